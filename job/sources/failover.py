"""Kafka failover: which cluster a stream's offsets belong to, and where to start on the secondary.

A stream may name a secondary cluster (``StreamSpec.failover``) that mirrors the primary's topics
with the same record timestamps, as MirrorMaker does (offsets differ). The source switches to it
when the primary has been unreachable for ``after_s``, and never switches back by itself.

* **Offsets** in Spark's checkpoint carry the cluster they belong to under :data:`CLUSTER_KEY`
  (``"@cluster"``: ``@`` is not allowed in a topic name, so it cannot clash with a topic). Offsets
  without the key (old checkpoints, streams without failover) belong to the primary.
* **Positions**: every reader task on the primary writes, per offset range, one small side file
  ``<positions_dir>/<topic>-<partition>-<start>-<end>.json`` with the offset, timestamp and
  fingerprint (a hash of key and value) of the last record it read. A replayed range writes the
  same file again; files behind the committed offsets are pruned at commit.
* **The switch** is a micro-batch of its own: its start offsets are the primary's, its end offsets
  the secondary's start positions, and it reads nothing. From then on the checkpoint is on the
  secondary, also after a restart.
* **A batch in flight**: a reader of a range planned on the primary that gets nothing from it for
  ``after_s`` finds the batch's start on the secondary by the same rule (the position recorded for
  the range ending there) and reads the same number of records on from it (``read_range``). This
  assumes offsets without gaps on both clusters (no compaction, no transaction markers).

The rule for the secondary's start, per partition, given the last record consumed on the primary
(timestamp ``T``, fingerprint ``F``): look up the first offset whose timestamp is at or after ``T``
(``offsets_for_times``), scan forward from there for the record with timestamp ``T`` and
fingerprint ``F``, and start right after it. So records with the same timestamp as the boundary
record are neither lost nor read twice. Limits: when no such record is found (not mirrored, or
more than :data:`MAX_SCAN` records away because timestamps are far out of order) the source starts
at the first record whose timestamp is after ``T`` and logs a warning: records at exactly ``T``
after the boundary are then lost, and out-of-order records (timestamp below ``T`` placed after the
boundary) can be lost too. Two identical records (same key, value and timestamp) are told apart by
order only: the first match wins. A partition from which nothing was consumed starts at the
secondary's beginning (``start_from: earliest``), its end (``latest``) or the start time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, TopicPartition

from job.errors import SourceError
from job.sources import offsets as kofs

log = logging.getLogger("daggers.source.failover")

CLUSTER_KEY = "@cluster"
PRIMARY = "primary"
SECONDARY = "secondary"
MAX_SCAN = 100_000  # records scanned on the secondary for the boundary record, per partition
ACTIVE_FILE = "active.json"


def split_cluster(offsets: dict[str, Any]) -> tuple[str, kofs.Offsets]:
    """Return the cluster ``offsets`` belong to (primary without the key) and the bare offsets."""
    cluster = str(offsets.get(CLUSTER_KEY, PRIMARY))
    if cluster not in (PRIMARY, SECONDARY):
        raise SourceError(f"the checkpoint's offsets name an unknown cluster {cluster!r}")
    # "@" starts no topic name: such keys are the source's own (the cluster, the eviction tick)
    return cluster, {t: ps for t, ps in offsets.items() if not t.startswith("@")}


def tag(offsets: kofs.Offsets, cluster: str, failover: bool) -> dict[str, Any]:
    """Return ``offsets`` with their cluster; unchanged (the old format) for streams without failover."""
    return {CLUSTER_KEY: cluster, **offsets} if failover else dict(offsets)


def fingerprint(key: bytes | None, value: bytes | None) -> str:
    """Return a short hash of a record's key and value (tells records with one timestamp apart)."""
    h = hashlib.blake2b(digest_size=8)
    for part in (key, value):
        h.update(b"\x00" if part is None else b"\x01%d:" % len(part) + part)
    return h.hexdigest()


@dataclass(frozen=True)
class Position:
    """The last record a reader consumed on the primary from one partition."""

    offset: int
    timestamp: int
    fingerprint: str
    moved: bool = False  # read on the secondary: the primary was lost while this range was read


def _position_file(folder: Path, topic: str, partition: int, start: int, end: int) -> Path:
    return folder / f"{topic}-{partition}-{start:020d}-{end:020d}.json"


def write_position(
    folder: str | Path, topic: str, partition: int, start: int, end: int, pos: Position
) -> None:
    """Record ``pos`` for the range ``[start, end)`` (atomically; a replay writes the same file)."""
    path = _position_file(Path(folder), topic, partition, start, end)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(pos)))
    tmp.replace(path)


def _ranges(folder: Path, topic: str, partition: int) -> list[tuple[int, Path]]:
    """Return (range end, file) of every position file of a partition."""
    out = []
    for path in folder.glob(f"{topic}-{partition}-*-*.json"):
        rest = path.stem[len(f"{topic}-{partition}-") :]
        start, _, end = rest.partition("-")
        if start.isdigit() and end.isdigit():  # "a-1-…" must not match topic "a" partition 1 of "a-1"
            out.append((int(end), path))
    return out


def find_position(folder: str | Path, topic: str, partition: int, offset: int) -> Position | None:
    """Return the last record read before ``offset``: from the range ending at ``offset``, else the
    newest range before it (with a warning: records after it will be read again); None when unknown."""
    candidates = [(end, p) for end, p in _ranges(Path(folder), topic, partition) if end <= offset]
    if not candidates:
        return None
    end, path = max(candidates)
    if end != offset:
        log.warning("%s[%s]: no position for offset %d, using the one at %d", topic, partition, offset, end)
    return Position(**json.loads(path.read_text()))


def prune_positions(folder: str | Path, committed: kofs.Offsets) -> None:
    """Delete the position files of ranges that end before the committed offsets (keep the last one)."""
    base = Path(folder)
    if not base.is_dir():
        return
    for topic, parts in committed.items():
        for part, offset in parts.items():
            for end, path in _ranges(base, topic, int(part)):
                if end < offset:
                    path.unlink(missing_ok=True)


def locate(records: Iterable[tuple[int, int, str]], pos: Position) -> tuple[int | None, int | None]:
    """Scan ``records`` ((offset, timestamp, fingerprint), in offset order) for the one that matches
    ``pos`` by timestamp and fingerprint.

    Returns the offset after it (None when none does) and the first offset seen whose timestamp is
    after ``pos``'s (the fallback; None when none was seen).
    """
    after: int | None = None
    for offset, ts, fp in records:
        if ts == pos.timestamp and fp == pos.fingerprint:
            return offset + 1, after
        if after is None and ts > pos.timestamp:
            after = offset
    return None, after


def _scan(
    consumer: Consumer, topic: str, partition: int, start: int, end: int, timeout: float = 10.0
) -> Iterable[tuple[int, int, str]]:
    """Yield (offset, timestamp, fingerprint) of records ``[start, min(end, start + MAX_SCAN))``."""
    stop = min(end, start + MAX_SCAN)
    if start >= stop:
        return
    consumer.assign([TopicPartition(topic, partition, start)])
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    return
                raise SourceError(f"scanning {topic}[{partition}] on the secondary failed: {err.str()}")
            deadline = time.monotonic() + timeout
            offset = cast(int, msg.offset())  # a record has its offset
            yield offset, msg.timestamp()[1], fingerprint(msg.key(), msg.value())
            if offset + 1 >= stop:
                return
    finally:
        consumer.unassign()


def has_position(folder: str | Path, topic: str, partition: int, offset: int) -> bool:
    """Whether a position file names the last record before ``offset`` exactly."""
    return any(end == offset for end, _ in _ranges(Path(folder), topic, partition))


def record_position(consumer: Consumer, folder: str | Path, topic: str, partition: int, offset: int) -> bool:
    """Read the record at ``offset - 1`` and record its position for ``offset`` (for offsets no reader
    of this checkpoint has recorded, e.g. when failover was added to a running dagger's spec).

    Returns False when there is no such record (nothing consumed yet). Raises SourceError.
    """
    if offset <= 0:
        return False
    for off, ts, fp in _scan(consumer, topic, partition, offset - 1, offset, timeout=5.0):
        if off == offset - 1:
            write_position(folder, topic, partition, offset, offset, Position(off, ts, fp))
            return True
    return False


def secondary_start(
    consumer: Consumer,
    tps: list[TopicPartition],
    positions: dict[tuple[str, int], Position | None],
    start_from: str,
) -> kofs.Offsets:
    """Return the offsets to start at on the secondary (``consumer``), by the rule in the module doc.

    Raises SourceError when the secondary cannot be reached.
    """
    ends = kofs.end_offsets(consumer, tps)
    out: kofs.Offsets = {}
    for tp in tps:
        pos = positions.get((tp.topic, tp.partition))
        end = ends[tp.topic][str(tp.partition)]
        if pos is None:
            out.setdefault(tp.topic, {})[str(tp.partition)] = _fresh(consumer, tp, start_from, ends)
            continue
        first = kofs.offsets_for_time(consumer, [tp], pos.timestamp, ends)[tp.topic][str(tp.partition)]
        # Some brokers (tansu) answer with the first offset of a record batch: scanning from there is right too.
        found, after = locate(_scan(consumer, tp.topic, tp.partition, first, end), pos)
        if found is None:
            found = (
                after
                if after is not None
                else (
                    kofs.offsets_for_time(consumer, [tp], pos.timestamp + 1, ends)[tp.topic][
                        str(tp.partition)
                    ]
                )
            )
            log.warning(
                "%s[%s]: the last record read on the primary (timestamp %d) is not on the secondary; "
                "starting at the first record after that time, offset %d",
                tp.topic,
                tp.partition,
                pos.timestamp,
                found,
            )
        out.setdefault(tp.topic, {})[str(tp.partition)] = found
    return out


def _fresh(consumer: Consumer, tp: TopicPartition, start_from: str, ends: kofs.Offsets) -> int:
    """Where a partition with nothing consumed on the primary starts on the secondary."""
    how = start_from.strip().lower()
    if how == "earliest":
        return kofs.beginning_offsets(consumer, [tp])[tp.topic][str(tp.partition)]
    if how == "latest":
        return ends[tp.topic][str(tp.partition)]
    return kofs.offsets_for_time(consumer, [tp], kofs.parse_start_time(start_from), ends)[tp.topic][
        str(tp.partition)
    ]


def write_active(folder: str | Path, cluster: str, bootstrap: str) -> None:
    """Record the cluster a stream reads from (shown in the job's status.json)."""
    path = Path(folder) / ACTIVE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"cluster": cluster, "bootstrap_servers": bootstrap, "since": time.time()}))
    tmp.replace(path)


def read_active(folder: str | Path) -> str:
    """Return the cluster a stream reads from: the one in ``active.json``, else primary."""
    try:
        return str(json.loads((Path(folder) / ACTIVE_FILE).read_text())["cluster"])
    except (OSError, ValueError, KeyError, TypeError):
        return PRIMARY
