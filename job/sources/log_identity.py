"""Tells a partition's log from a new one that reuses its offsets: a broker that came back empty (in memory),
or a topic deleted and made again, whose new log has already grown past the checkpoint's position.

Offsets alone cannot tell: the position is within the new log's offsets. What can is a record the stream
read: per partition, the offset, Kafka timestamp and fingerprint (a hash of key and value) of a record below
the position are kept in the checkpoint's data-loss folder (one small JSON file per cluster). When a batch is
planned after a gap (the query's start, a position that is not the previous batch's end, a long pause) the
record at that offset is fetched again (one fetch per partition): another record there means the log was
replaced, the same data loss as a position past the partition's end. Between gaps the kept record is checked
and moved up to the position at most every :data:`REFRESH_S` (so retention does not delete it), one fetch a
partition each, in a thread of its own with a consumer of its own: a broker such as tansu finds a record by
walking back from its end (seconds for a record a few million back), and the plan of a batch does not wait for
it. Its finding is acted on at the next plan.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from confluent_kafka import Consumer, KafkaError, TopicPartition

from job.errors import SourceError
from job.sources import data_loss
from job.sources import offsets as kofs
from job.sources.failover import fingerprint

log = logging.getLogger("daggers.source.data_loss")

REFRESH_S = 60.0  # how often the kept record moves up to the position between gaps
PAUSE_S = 30.0  # no plan for this long counts as a gap: the broker may have been replaced meanwhile

Key = tuple[str, str]  # (topic, partition)


@dataclass(frozen=True)
class Seen:
    """A record of a partition: its offset, Kafka timestamp and fingerprint."""

    offset: int
    timestamp: int
    fingerprint: str

    def same_record(self, other: Seen) -> bool:
        return (self.timestamp, self.fingerprint) == (other.timestamp, other.fingerprint)


def _file(folder: str, cluster: str) -> Path:
    return Path(folder) / f"log-identity.{cluster}.json"


def load(folder: str, cluster: str) -> dict[Key, Seen]:
    """The records kept for the partitions of ``cluster`` (none when nothing was kept or it is unreadable)."""
    if not folder:
        return {}
    try:
        raw = json.loads(_file(folder, cluster).read_text(encoding="utf-8"))
        return {
            (str(topic), str(part)): Seen(int(o), int(ts), str(fp))
            for topic, parts in raw.items()
            for part, (o, ts, fp) in parts.items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save(folder: str, cluster: str, seen: dict[Key, Seen]) -> None:
    """Keep ``seen`` (atomically)."""
    if not folder:
        return
    body: dict[str, dict[str, list[int | str]]] = {}
    for (topic, part), s in sorted(seen.items()):
        body.setdefault(topic, {})[part] = [s.offset, s.timestamp, s.fingerprint]
    path = _file(folder, cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body), encoding="utf-8")
    os.replace(tmp, path)


def fetch(
    consumer: Consumer, wanted: dict[Key, int], timeout: float = 10.0
) -> tuple[dict[Key, Seen], set[Key]]:
    """Fetch the record at each wanted offset (all partitions at once); return those the broker gave at
    exactly that offset (none for a partition at its end, or that gave a later offset: a compacted log), and
    the partitions that did not answer in time. Raises SourceError when a fetch fails."""
    out: dict[Key, Seen] = {}
    if not wanted:
        return out, set()
    pending = set(wanted)
    consumer.assign([TopicPartition(t, int(p), o) for (t, p), o in wanted.items()])
    try:
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            key = (cast(str, msg.topic()), str(msg.partition()))
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    pending.discard(key)
                    continue
                raise SourceError(f"fetch from {key[0]}[{key[1]}] failed: {err.str()}")
            if key not in pending:
                continue
            pending.discard(key)
            offset = cast(int, msg.offset())
            if offset == wanted[key]:
                out[key] = Seen(offset, msg.timestamp()[1], fingerprint(msg.key(), msg.value()))
    finally:
        consumer.unassign()
    return out, pending


def replaced(kept: dict[Key, Seen], now: dict[Key, Seen]) -> dict[Key, tuple[Seen, Seen]]:
    """The partitions whose record at the kept offset is another one now: (kept, now) per partition."""
    return {k: (kept[k], s) for k, s in now.items() if k in kept and not kept[k].same_record(s)}


@dataclass
class LogWatch:
    """A stream reader's check of its partitions' logs, on the driver (see the module doc)."""

    folder: str
    fail: bool
    _trusted: dict[tuple[str, str, str], int] = field(
        default_factory=dict
    )  # (cluster, topic, part) -> offset
    _last_look: float = -1e9
    _refreshed_at: float = -1e9
    _kept: dict[str, dict[Key, Seen]] = field(default_factory=dict)  # cluster -> the records kept
    _refresh: Future[Looked] | None = None  # the refresh in its thread (see the module doc)
    _refresh_cluster: str = ""
    _pool: ThreadPoolExecutor | None = None

    def check(
        self,
        consumer: Consumer,
        cluster: str,
        start: kofs.Offsets,
        end: kofs.Offsets,
        connect: Callable[[], Consumer] | None = None,
    ) -> kofs.Offsets | None:
        """Return ``start`` itself when the batch may be planned from it; None to plan nothing yet (the
        records could not be fetched); else the end of a batch that reads nothing and moves the partitions
        whose log was replaced to their first offset (``fail`` false). Raises DataLossError (``fail``).

        After a gap the records are fetched with ``consumer`` before planning; a refresh between gaps runs in
        a thread with a consumer of its own from ``connect`` (with ``consumer`` now when none is given)."""
        now = time.monotonic()
        paused, self._last_look = now - self._last_look >= PAUSE_S, now
        held = {
            (t, p): o for t, ps in start.items() for p, o in ps.items() if o <= end.get(t, {}).get(p, -1)
        }  # a position past the end is data loss by the offsets (job.sources.data_loss)
        gap = {k: o for k, o in held.items() if paused or self._trusted.get((cluster, *k)) != o}
        if not self.folder or not held:
            return start
        if cluster not in self._kept:
            self._kept[cluster] = load(self.folder, cluster)
        kept = self._kept[cluster]
        looked = self._refreshed(cluster)
        every = REFRESH_S if all(k in kept or o == 0 for k, o in held.items()) else 1.0
        due = now - self._refreshed_at >= every and self._refresh is None
        if gap:  # checked before planning; a refresh due then (a query's start) with it
            if due:
                self._refreshed_at = now
            looked = _look(consumer, held if due else gap, dict(kept), below=due)
        elif looked is None:
            if not due:
                return start
            self._refreshed_at = now
            if connect is None:
                looked = _look(consumer, held, dict(kept))
            else:
                self._start_refresh(connect, cluster, held, dict(kept))
                return start
        if looked.silent and not gap:  # a refresh the broker did not answer: the batch goes on, again soon
            log.info(
                "%s: no answer to the logs' check; checking again",
                sorted(f"{t}[{p}]" for t, p in looked.silent),
            )
            self._refreshed_at = now - REFRESH_S + 1.0
            return start
        if looked.silent:
            log.warning(
                "%s: the broker did not give the records to check its logs against; waiting to plan",
                sorted(f"{t}[{p}]" for t, p in looked.silent),
            )
            return None
        first = looked.first
        moved = dict(held)
        for (t, p), (was, _) in sorted(replaced(kept, looked.seen).items()):
            if (t, p) not in held:
                continue
            hi = end[t][p]
            if self.fail:
                raise data_loss.replaced_error(t, p, held[(t, p)], was.offset, first.get((t, p), 0), hi)
            moved[(t, p)] = data_loss.replaced_skip(t, p, held[(t, p)], was.offset, first.get((t, p), 0), hi)
            del kept[(t, p)]
        for k, o in moved.items():
            self._trusted[(cluster, *k)] = o
        kept.update({k: seen for k, seen in looked.ahead.items() if k in held and moved[k] == held[k]})
        if looked.ahead or moved != held:
            save(self.folder, cluster, kept)
        if moved == held:
            return start
        out: kofs.Offsets = {t: dict(ps) for t, ps in start.items()}
        for (t, p), o in moved.items():
            out[t][p] = o
        return out

    def _start_refresh(
        self, connect: Callable[[], Consumer], cluster: str, held: dict[Key, int], kept: dict[Key, Seen]
    ) -> None:
        def run() -> Looked:
            consumer = connect()
            try:
                return _look(consumer, held, kept)
            finally:
                consumer.close()

        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="daggers-log-identity")
        self._refresh, self._refresh_cluster = self._pool.submit(run), cluster

    def _refreshed(self, cluster: str) -> Looked | None:
        """The finished refresh's findings for ``cluster`` (None while it runs, or for none). Raises
        SourceError when its fetches failed."""
        job = self._refresh
        if job is None or not job.done():
            return None
        self._refresh = None
        if self._refresh_cluster != cluster:
            return None
        return job.result()

    def close(self) -> None:
        """Let a refresh in its thread end on its own (its fetches are bounded); start no other."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool, self._refresh = None, None

    def forget(self) -> None:
        """The broker did not answer: the next batch is planned after a gap."""
        self._trusted.clear()
        self._refresh = None

    def planned(self, cluster: str, planned: kofs.Offsets) -> None:
        """The batch planned up to ``planned``: the next one from there is no gap."""
        for t, ps in planned.items():
            for p, o in ps.items():
                self._trusted[(cluster, t, p)] = o


@dataclass(frozen=True)
class Looked:
    """What a check of the kept records found: each partition's first offset, the record now at each kept
    offset, the partitions that did not answer, and the records just below the positions (to keep next)."""

    first: dict[Key, int]
    seen: dict[Key, Seen]
    silent: set[Key]
    ahead: dict[Key, Seen]


def _look(consumer: Consumer, verify: dict[Key, int], kept: dict[Key, Seen], below: bool = True) -> Looked:
    """Fetch, for the partitions of ``verify`` (-> the stream's position), the record at each ``kept`` offset
    below the position, and with ``below`` the record just below the position. Raises SourceError when a
    fetch fails."""
    firsts = kofs.beginning_offsets(consumer, [TopicPartition(t, int(p)) for t, p in verify])
    first = {(t, p): o for t, ps in firsts.items() for p, o in ps.items()}
    wanted = {
        k: kept[k].offset for k, o in verify.items() if k in kept and first.get(k, 0) <= kept[k].offset < o
    }
    seen, silent = fetch(consumer, wanted)
    if silent or not below:
        return Looked(first, seen, silent, {})
    under = {k: o - 1 for k, o in verify.items() if o - 1 >= first.get(k, 0)}
    return Looked(first, seen, set(), fetch(consumer, under)[0])
