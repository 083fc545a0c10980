"""The Kafka source's executor side: read a task's offset ranges with a consumer cached per worker."""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import TopicPartition
from pyspark.sql.datasource import InputPartition

from job.errors import BadRecordError, SourceError
from job.schema.arrow import ArrowDecoder
from job.sources import data_loss
from job.sources import failover as kfo
from job.sources import offsets as kofs
from job.sources.bad_records import record_bad
from job.sources.config import OffsetRange, RangeGroup, SourceConfig
from job.sources.stall import ClientLog, StallWatch, notice, starvation
from job.spark import worker_heap

if TYPE_CHECKING:  # imported when first read: numba's import takes ~0.5 s that a driver need not pay
    from job.sources.rdkafka import BatchConsumer, Fetched

FETCH_BATCH = 10_000  # records decoded per Arrow batch


def read_partition(cfg: SourceConfig, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of a task: one :class:`OffsetRange` or a :class:`RangeGroup` of them; where the
    source aggregates first (``cfg.partial``), one row per window and key of those records instead."""
    worker_heap.settle()
    ranges = partition.ranges if isinstance(partition, RangeGroup) else (cast(OffsetRange, partition),)
    assert all(isinstance(r, OffsetRange) for r in ranges)
    if cfg.partial:  # one row per window and key of the task's records (job.sources.partial)
        from job.sources import partial

        p = cfg.partial
        rows = partial.aggregate(
            [b for rng in ranges for b in read_range(cfg, rng)],
            p["keys"],
            p["time"],
            p["window_ms"],
            p["distinct"],
            p.get("aggregates") or (),
            bool(p.get("wrap")),
        )
        if rows is not None:
            yield rows
        return
    for rng in ranges:
        yield from read_range(cfg, rng)


_CONSUMERS: dict[str, tuple[BatchConsumer, ClientLog]] = {}
#: How patient this worker's reads of a topic have had to become, per (consumer key, topic): an index into
#: PATIENT_WAITS_MS (0: the configured fetch.wait.max.ms). It only grows (a partition that made the broker
#: give up once only gets longer), and it is per topic: each level has a consumer of its own, so the
#: fetches a patient consumer waits out at a partition's end never hold up the fast reads of other topics
#: (a shared host's light daggers) on the same worker.
_PATIENCE: dict[tuple[str, str], int] = {}
#: fetch.wait.max.ms after each stall that a longer wait cures (see :func:`_fresh_consumer`).
PATIENT_WAITS_MS = (2, 500, 5000)


def _consumer_key(cfg: SourceConfig, bootstrap: str, level: int = 0) -> str:
    """The key of a worker's consumer of ``bootstrap`` at patience ``level`` in ``_CONSUMERS``."""
    return json.dumps([bootstrap, cfg.consumer_config, *([level] if level else [])], sort_keys=True)


def reset_consumers() -> None:
    """Close this worker's cached consumers and forget how patient they had become (tests)."""
    for consumer, _ in _CONSUMERS.values():
        with contextlib.suppress(Exception):
            consumer.close()
    _CONSUMERS.clear()
    _PATIENCE.clear()


def patience(cfg: SourceConfig, bootstrap: str, topic: str) -> int:
    """Return how patient this worker's reads of ``topic`` on ``bootstrap`` have become (0: not at all)."""
    return _PATIENCE.get((_consumer_key(cfg, bootstrap), topic), 0)


def fetch_wait_ms(cfg: SourceConfig, level: int) -> int:
    """Return the fetch.wait.max.ms of a consumer at patience ``level``: the configured wait (2 ms unless
    ``consumer_config`` says otherwise) at level 0, then each of PATIENT_WAITS_MS, never less than the
    configured wait."""
    configured = int((cfg.consumer_config or {}).get("fetch.wait.max.ms", PATIENT_WAITS_MS[0]))
    return (
        configured if level == 0 else max(configured, PATIENT_WAITS_MS[min(level, len(PATIENT_WAITS_MS) - 1)])
    )


def _executor_consumer(cfg: SourceConfig, bootstrap: str, level: int = 0) -> tuple[BatchConsumer, ClientLog]:
    """One consumer per Python worker, cluster and patience level, reused across tasks (workers are reused
    by Spark), with the log of what librdkafka said. Raises SourceError for a ``consumer_config``
    property librdkafka refuses."""
    key = _consumer_key(cfg, bootstrap, level)
    cached = _CONSUMERS.get(key)
    if cached is None:
        said = ClientLog()
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": "daggers-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            # A range's offsets were seen on the broker. If it calls one out of range, say so and
            # assign again rather than go silently to the partition's first record (with
            # "earliest", a consumer that went back skipped millions of records below the range).
            "auto.offset.reset": "error",
            "fetch.min.bytes": 1,
            # Large fetches and a deep prefetch queue: 0.97M msgs/s from one partition instead of
            # 0.14M with librdkafka's defaults (measured against tansu, 70-byte records).
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.min.messages": 500_000,
            "queued.max.messages.kbytes": 262144,
            "receive.message.max.bytes": 1_000_000_000,
            "log_level": 4,
            **(cfg.consumer_config or {}),
            # A task's ranges are known to hold their records, so a fetch never has to wait for new
            # ones; but a newly assigned partition is fetched only once the broker has answered the
            # fetch in flight, which it may hold this long: with 100 ms, every range a task read cost
            # 100 ms of waiting, and 10 light daggers kept both task slots of a shared host waiting.
            # But tansu also stops looking for the records when this time is up and answers empty: past
            # some thousands of record batches in a partition (fewer on a busy machine) a 2-ms fetch
            # never got a record. A stall makes the worker's consumer more patient (_fresh_consumer).
            "fetch.wait.max.ms": fetch_wait_ms(cfg, level),
        }
        from job.sources.rdkafka import BatchConsumer, RdkafkaError

        try:
            consumer = BatchConsumer(config, log=said.line, error=lambda code, text: said.error(text))
        except RdkafkaError as exc:
            raise SourceError(f"consumer_config: {exc}") from None
        cached = _CONSUMERS[key] = (consumer, said)
    return cached


def _fresh_consumer(
    cfg: SourceConfig, bootstrap: str, topic: str, patient: bool = False
) -> tuple[BatchConsumer, ClientLog]:
    """Drop this worker's consumer of ``bootstrap`` that reads ``topic`` and return a new one, on new
    connections; with ``patient``, one whose fetches wait the next of PATIENT_WAITS_MS (and so do this
    worker's later reads of ``topic``).

    A broker that never answers a fetch (tansu: nisshi-io/nisshi#668) holds up every later response on
    that connection, since Kafka answers a connection's requests in order: assigning the partition again
    on the same consumer waited behind it. And tansu (memory storage) lists a partition's record batches
    from the first on every fetch and gives up when the fetch's max wait is up, answering with no record
    but the true high watermark: a fetch that waits 2 ms got nothing, forever, from a partition of some
    thousands of small batches, where librdkafka's default 500 ms read at once (bench/results/stall.md).
    The old consumer is closed in a thread of its own."""
    level = patience(cfg, bootstrap, topic)
    old = _CONSUMERS.pop(_consumer_key(cfg, bootstrap, level), None)
    if old is not None:
        threading.Thread(target=old[0].close, name="close-stalled-consumer", daemon=True).start()
    if patient:
        level = min(level + 1, len(PATIENT_WAITS_MS) - 1)
        _PATIENCE[(_consumer_key(cfg, bootstrap), topic)] = level
    return _executor_consumer(cfg, bootstrap, level)


def read_range(cfg: SourceConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the decoded records of ``rng`` in batches of at most FETCH_BATCH rows.

    Bad records follow ``cfg.bad_records``; with skip or dead-letter they are written, raw bytes
    included, to one file per offset range under ``bad_records_dir`` (the same file again when
    Spark replays the range, so nothing is counted or published twice).

    With failover, a range read on the primary records its last record under ``positions_dir``
    (:mod:`job.sources.failover`); and when the primary gives nothing for ``failover_after_s`` the
    reader moves the rest of the range to the secondary: it finds the batch's start (``anchor``)
    there by the position recorded for it and reads the same number of records on from it (this
    assumes offsets without gaps, i.e. no compaction and no transaction markers, on both clusters).
    Raises BadRecordError (policy ``fail``) or SourceError when the range cannot be read in
    ``read_timeout_s`` (the broker is down, or the records were deleted by retention).
    """
    if rng.end <= rng.start:
        return
    decoder = cfg.decoder()
    bootstrap = cfg.bootstrap(rng.cluster)  # the secondary's, once the range moved there
    consumer, said = _executor_consumer(cfg, bootstrap, patience(cfg, bootstrap, rng.topic))
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    positions = bool(cfg.positions_dir) and rng.cluster == kfo.PRIMARY
    next_offset = rng.start
    shift: int | None = None  # secondary offset - primary offset, once the range moved to the secondary
    taken: list[_Taken] = []  # records read, not yet decoded
    pending = 0
    bad: list[dict[str, Any]] = []
    last: _Taken | None = None  # holds the last record read (its position is recorded for failover)
    starved = starvation()
    watch = StallWatch(cfg.read_timeout_s, lost_at_progress=starved.lost())
    loss = (
        data_loss.LossWatch()
    )  # on "out of range" answers and re-seeks: is the position gone from the broker?
    try:
        while next_offset < rng.end:
            got = consumer.consume(min(FETCH_BATCH, rng.end - next_offset), timeout=1.0, with_keys=positions)
            moved = 0 if shift is None else shift
            progressed = False
            if len(got):
                part, next_offset, progressed = _take(got, moved, next_offset, rng, watch)
                if len(part.index):
                    taken.append(part)
                    pending += len(part.index)
                    last = part
            now = time.monotonic()
            watch.starved(starved.lost())
            if progressed:
                if watch.reseeks:
                    notice(
                        f"{rng.topic}[{rng.partition}] reads again after {watch.stalled_s(now):.1f} s "
                        f"without records (range {rng.start}..{rng.end}; {watch.describe()})"
                    )
                watch.moved(now, starved.lost())
            elif (
                shift is None
                and cfg.failover
                and rng.cluster == kfo.PRIMARY
                and watch.stalled_s(now) > min(cfg.failover_after_s, cfg.read_timeout_s)
            ):
                shift = _shift_to_secondary(cfg, rng, next_offset, watch.stalled_s(now))
                consumer.unassign()
                bootstrap = cfg.failover_bootstrap_servers
                consumer, said = _executor_consumer(cfg, bootstrap, patience(cfg, bootstrap, rng.topic))
                consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset + shift)])
                watch.moved(time.monotonic(), starved.lost())
                continue
            elif (
                shift is None
                and (
                    held := loss.check(
                        watch.out_of_range + watch.short_ends + watch.all_reseeks,
                        now,
                        bootstrap,
                        rng.topic,
                        rng.partition,
                        next_offset,
                        rng.end,
                    )
                )
                is not None
            ):
                if cfg.fail_on_data_loss:
                    raise data_loss.error(
                        rng.topic, rng.partition, next_offset, *held, rng.end, loss_dir=cfg.loss_dir
                    )
                to = data_loss.skip_to(
                    rng.topic, rng.partition, next_offset, *held, rng.end, loss_dir=cfg.loss_dir
                )
                if not next_offset < to < rng.end:
                    break  # the rest of the range is gone
                next_offset = to
                consumer.unassign()
                consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset)])
                watch.moved(time.monotonic(), starved.lost())
                continue
            elif watch.timed_out(now):
                raise SourceError(
                    f"no records from {rng.topic}[{rng.partition}] at offset {next_offset} for "
                    f"{cfg.read_timeout_s:.0f} s (range {rng.start}..{rng.end}; {watch.describe()}; "
                    f"the client said: {said.said()})"
                )
            elif watch.reseek_due(now):
                patient = watch.needs_patience()
                if not watch.reseeks:
                    notice(_stall_notice(cfg, bootstrap, rng, next_offset, watch, said, patient, now))
                consumer.unassign()
                consumer, said = _fresh_consumer(cfg, bootstrap, rng.topic, patient)
                consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset + moved)])
                watch.reseeked(now)
            if pending >= FETCH_BATCH:
                yield _decode(cfg, decoder, rng, taken, bad)
                taken, pending = [], 0
        if pending:
            yield _decode(cfg, decoder, rng, taken, bad)
    finally:
        consumer.unassign()
    if bad:
        record_bad(cfg, rng, bad)
    if last is not None and positions:
        i = int(last.index[-1])
        kfo.write_position(
            cfg.positions_dir,
            rng.topic,
            rng.partition,
            rng.start,
            rng.end,
            kfo.Position(
                int(last.offsets[-1]),
                int(last.got.timestamps[i]),
                kfo.fingerprint(last.got.key(i), last.got.value(i)),
                moved=shift is not None,
            ),
        )


@dataclass(frozen=True)
class _Taken:
    """The records of one fetch that belong to the range: their indices in ``got``, and their offsets on the
    cluster the range was planned on."""

    got: Fetched
    index: np.ndarray
    offsets: np.ndarray


def _take(
    got: Fetched, moved: int, next_offset: int, rng: OffsetRange, watch: StallWatch
) -> tuple[_Taken, int, bool]:
    """Return the records of ``got`` that the range still needs, the next offset it needs, and whether the
    read moved (a record taken, or the partition's end reached). A record below ``next_offset`` (the
    consumer went back) is passed over and told to ``watch``; one at or past the range's end is passed over;
    the end of the partition at or past the range's end ends the read; an "offset out of range" is told to
    ``watch``; transient errors are left to librdkafka; any other error raises SourceError."""
    from job.sources import rdkafka as rdk

    offsets = got.offsets - moved if moved else got.offsets
    errs = got.errs
    if not errs.any() and offsets[0] >= next_offset and bool(np.all(offsets[1:] > offsets[:-1])):
        index = np.flatnonzero(offsets < rng.end)  # increasing: the records before the range's end
        if len(index):
            next_offset = int(offsets[index[-1]]) + 1
        return _Taken(got, index, offsets[index]), next_offset, len(index) > 0
    kept: list[int] = []
    progressed = False
    for i, err in enumerate(errs.tolist()):
        off = int(offsets[i])
        if err:
            if err == rdk.ERR_PARTITION_EOF:
                progressed = True
                if off >= rng.end:  # an end event has its offset
                    next_offset = rng.end
                else:
                    watch.short_ends += 1  # the partition ends before the range: records are gone
                continue
            if err == rdk.ERR_AUTO_OFFSET_RESET:
                watch.was_out_of_range()  # assigned again by the caller
                continue
            if err in rdk.TRANSIENT:
                continue  # librdkafka retries on its own; the read timeout bounds the wait
            text = (got.value(i) or b"").decode(errors="replace") or rdk.error_text(err)
            raise SourceError(f"reading {rng.topic}[{rng.partition}] failed: {text}")
        if off < next_offset:
            watch.went_back(1)
            continue
        if off >= rng.end:
            continue
        kept.append(i)
        next_offset = off + 1
        progressed = True
    index = np.array(kept, dtype=np.int64)
    return _Taken(got, index, offsets[index]), next_offset, progressed


def _shift_to_secondary(cfg: SourceConfig, rng: OffsetRange, next_offset: int, waited: float) -> int:
    """Return how far the secondary's offsets of ``rng``'s partition are from the primary's, found
    from the position recorded at the batch's start (``rng.anchor``). Raises SourceError when the
    secondary cannot be reached."""
    pos = (
        kfo.find_position(cfg.positions_dir, rng.topic, rng.partition, rng.anchor)
        if cfg.positions_dir
        else None
    )
    consumer = kofs.driver_consumer(cfg.failover_bootstrap_servers, cfg.consumer_config)
    try:
        tp = TopicPartition(rng.topic, rng.partition)
        start = kfo.secondary_start(consumer, [tp], {(rng.topic, rng.partition): pos}, cfg.start_from)
    finally:
        consumer.close()
    shift = start[rng.topic][str(rng.partition)] - rng.anchor
    print(
        f"daggers: FAILOVER of {rng.topic}[{rng.partition}] range {rng.start}..{rng.end}: no records from the "
        f"primary {cfg.bootstrap_servers} for {waited:.0f} s; reading offsets {next_offset + shift}.."
        f"{rng.end + shift} on the secondary {cfg.failover_bootstrap_servers}",
        file=sys.stderr,
    )
    return shift


def _stall_notice(
    cfg: SourceConfig,
    bootstrap: str,
    rng: OffsetRange,
    next_offset: int,
    watch: StallWatch,
    said: ClientLog,
    patient: bool,
    now: float,
) -> str:
    """The line a range read logs when it first assigns its partition again."""
    level = patience(cfg, bootstrap, rng.topic) + 1
    how = (
        f"on a new consumer with fetch.wait.max.ms {fetch_wait_ms(cfg, level)}"
        if patient
        else "on a new consumer"
    )
    return (
        f"no records from {rng.topic}[{rng.partition}] at offset {next_offset} for {watch.stalled_s(now):.1f} s "
        f"(range {rng.start}..{rng.end}); assigning it again {how} ({watch.describe()}; "
        f"the client said: {said.said()})"
    )


def _decode(
    cfg: SourceConfig,
    decoder: ArrowDecoder,
    rng: OffsetRange,
    taken: list[_Taken],
    bad: list[dict[str, Any]],
) -> pa.RecordBatch:
    if len(taken) == 1:
        got, index = taken[0].got, taken[0].index
        buf, starts, ends, nulls = got.buf, got.starts[index], got.ends[index], got.nulls[index]
        offs = taken[0].offsets
    else:  # the fetches' buffers back to back
        base = np.cumsum([0] + [len(t.got.buf) for t in taken[:-1]])
        buf = np.concatenate([t.got.buf for t in taken])
        starts = np.concatenate([t.got.starts[t.index] + b for t, b in zip(taken, base, strict=True)])
        ends = np.concatenate([t.got.ends[t.index] + b for t, b in zip(taken, base, strict=True)])
        nulls = np.concatenate([t.got.nulls[t.index] for t in taken])
        offs = np.concatenate([t.offsets for t in taken])
    batch, failures = decoder.decode_buffer(buf, starts, ends, nulls)
    if failures:
        first = failures[0]
        if cfg.bad_records == "fail":
            raise BadRecordError(rng.topic, rng.partition, int(offs[first.index]), first.reason)
        for f in failures:
            print(
                f"daggers: bad record {rng.topic}[{rng.partition}]@{offs[f.index]} ({cfg.bad_records}): "
                f"{f.reason}",
                file=sys.stderr,
            )
            value = b"" if nulls[f.index] else buf[starts[f.index] : ends[f.index]].tobytes()
            bad.append(
                {
                    "topic": rng.topic,
                    "partition": rng.partition,
                    "offset": int(offs[f.index]),
                    "error": f.reason,
                    "value_b64": base64.b64encode(value).decode(),
                }
            )
    return cfg.ordered(cfg.add_derived(batch))
