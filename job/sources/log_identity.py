"""Tells a partition's log from a new one that reuses its offsets: a broker that came back empty (in memory),
or a topic deleted and made again, whose new log has already grown past the checkpoint's position.

Offsets alone cannot tell: the position is within the new log's offsets. What can is a record the stream
read: per partition, the offset, Kafka timestamp and fingerprint (a hash of key and value) of a record below
the position are kept in the checkpoint's data-loss folder (one small JSON file per cluster). When a batch is
planned after a gap (the query's start, a position that is not the previous batch's end, a long pause) the
record at that offset is fetched again (one fetch per partition): another record there means the log was
replaced, the same data loss as a position past the partition's end. Between gaps the kept record is moved
up to the position at most every :data:`REFRESH_S` (so retention does not delete it), one fetch a partition.
"""

from __future__ import annotations

import json
import logging
import os
import time
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

    def check(
        self, consumer: Consumer, cluster: str, start: kofs.Offsets, end: kofs.Offsets
    ) -> kofs.Offsets | None:
        """Return ``start`` itself when the batch may be planned from it; None to plan nothing yet (the
        records could not be fetched); else the end of a batch that reads nothing and moves the partitions
        whose log was replaced to their first offset (``fail`` false). Raises DataLossError (``fail``)."""
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
        every = REFRESH_S if all(k in kept or o == 0 for k, o in held.items()) else 1.0
        refresh = now - self._refreshed_at >= every
        if not (gap or refresh):
            return start
        tps = [TopicPartition(t, int(p)) for t, p in (held if refresh else gap)]
        firsts = kofs.beginning_offsets(consumer, tps)
        first = {(t, p): o for t, ps in firsts.items() for p, o in ps.items()}
        verify = held if refresh else gap
        wanted = {
            k: kept[k].offset
            for k, o in verify.items()
            if k in kept and first.get(k, 0) <= kept[k].offset < o
        }
        now_seen, silent = fetch(consumer, wanted)
        if silent:
            log.warning(
                "%s: the broker did not give the records to check its logs against; waiting to plan",
                sorted(f"{t}[{p}]" for t, p in silent),
            )
            return None
        moved = dict(held)
        for (t, p), (was, _) in sorted(replaced(kept, now_seen).items()):
            hi = end[t][p]
            if self.fail:
                raise data_loss.replaced_error(t, p, held[(t, p)], was.offset, first.get((t, p), 0), hi)
            moved[(t, p)] = data_loss.replaced_skip(t, p, held[(t, p)], was.offset, first.get((t, p), 0), hi)
            del kept[(t, p)]
        for k, o in moved.items():
            self._trusted[(cluster, *k)] = o
        if refresh or moved != held:
            self._refreshed_at = now
            ahead = {k: o - 1 for k, o in moved.items() if o - 1 >= first.get(k, 0) and o == held[k]}
            kept.update(fetch(consumer, ahead)[0])
            save(self.folder, cluster, kept)
        if moved == held:
            return start
        out: kofs.Offsets = {t: dict(ps) for t, ps in start.items()}
        for (t, p), o in moved.items():
            out[t][p] = o
        return out

    def forget(self) -> None:
        """The broker did not answer: the next batch is planned after a gap."""
        self._trusted.clear()

    def planned(self, cluster: str, planned: kofs.Offsets) -> None:
        """The batch planned up to ``planned``: the next one from there is no gap."""
        for t, ps in planned.items():
            for p, o in ps.items():
                self._trusted[(cluster, t, p)] = o
