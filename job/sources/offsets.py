"""Kafka offsets as the driver sees them: partitions, start positions and true end offsets.

Offsets are kept as ``{topic: {partition (str): next offset to read}}`` — the JSON form Spark
stores in the query's checkpoint.

Brokers differ: tansu answers ListOffsets "latest" with the base offset of the newest record
batch + 1 (a topic holding one 100-record batch says 1), while a Fetch response carries the true
high watermark on every broker. So :func:`end_offsets` lists offsets first (cheap, exact on most
brokers, a lower bound on tansu) and then fetches the newest record of each partition and reads
the high watermark that came with it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from confluent_kafka import (
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from job.errors import SourceError

Offsets = dict[str, dict[str, int]]


def driver_consumer(bootstrap: str, extra: dict[str, str] | None = None) -> Consumer:
    """Return a consumer for offset look-ups (assign only; it never joins or commits a group)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "daggers-offsets",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.max.bytes": 1024 * 1024,
        "max.partition.fetch.bytes": 64 * 1024,
        # Its fetches are probes. The broker may take up to fetch.wait.max.ms to answer one, and tansu gives up
        # looking for the records in that time and answers empty: with 10 ms it never found the newest record
        # of a 35M-record partition (a long live run); keep librdkafka's 500 ms.
        "fetch.wait.max.ms": 500,
        # No follow-up fetch after a probe: once a record is queued, librdkafka waits fetch.queue.backoff.ms
        # before fetching that partition again, and the probe has unassigned it by then. Without these, the
        # follow-up fetch (at the end: nothing new) was held fetch.wait.max.ms by tansu, and the next look-up
        # on this consumer waited behind it: 503 ms median on tansu, sometimes two holds (1.0 s, a CI failure);
        # with them 2 ms median, 103 ms at most in 100 look-ups back to back (noida-db: 1 ms either way).
        "queued.min.messages": 1,
        "fetch.queue.backoff.ms": 100,
        "socket.timeout.ms": 10000,
        "log_level": 2,
        **(extra or {}),
    }
    # A stream's consumer_config is for reading: a shorter wait here would make tansu answer the probe of the
    # newest record empty, and the end offsets fall back to its ListOffsets (short of the newest batch).
    conf["fetch.wait.max.ms"] = max(500, int(conf["fetch.wait.max.ms"]))
    return Consumer(conf)


def produce_hint(topic: str, bootstrap: str, proto_class: str | None = None) -> str:
    """A ``daggers produce`` command that creates ``topic`` with events of ``proto_class`` (when it is one of
    the generator's streams)."""
    from job.produce.generator import MESSAGE_NAMES

    streams = [s for s, name in MESSAGE_NAMES.items() if name == proto_class] or list(MESSAGE_NAMES)
    command = f"daggers produce --stream {streams[0]} --topic {topic} --bootstrap {bootstrap} --count 10000"
    others = f" (or --stream {' / '.join(streams[1:])})" if len(streams) > 1 else ""
    return f"create it, or produce to it first: {command}{others}"


def partitions_of(
    consumer: Consumer,
    topics: Iterable[str],
    bootstrap: str,
    timeout: float = 10.0,
    proto_class: str | None = None,
) -> list[TopicPartition]:
    """Return every partition of ``topics``; raise SourceError naming a topic that does not exist (with a
    ``daggers produce`` command for events of ``proto_class``)."""
    out: list[TopicPartition] = []
    for topic in topics:
        try:
            meta = consumer.list_topics(topic, timeout=timeout).topics.get(topic)
        except KafkaException as exc:
            raise SourceError(f"cannot reach the Kafka broker at {bootstrap}: {exc.args[0]}") from None
        if meta is None or meta.error is not None or not meta.partitions:
            why = meta.error.str() if meta is not None and meta.error is not None else "no partitions"
            raise SourceError(
                f"topic {topic!r} does not exist on {bootstrap} ({why})",
                hint=produce_hint(topic, bootstrap, proto_class),
            )
        out.extend(TopicPartition(topic, p) for p in sorted(meta.partitions))
    return out


def _listed(consumer: Consumer, tp: TopicPartition, timeout: float) -> tuple[int, int]:
    try:
        return consumer.get_watermark_offsets(
            TopicPartition(tp.topic, tp.partition), timeout=timeout, cached=False
        )
    except KafkaException as exc:
        raise SourceError(f"cannot list offsets of {tp.topic}[{tp.partition}]: {exc.args[0]}") from None


def beginning_offsets(consumer: Consumer, tps: list[TopicPartition], timeout: float = 10.0) -> Offsets:
    """Return the first available offset of each partition."""
    out: Offsets = {}
    for tp in tps:
        out.setdefault(tp.topic, {})[str(tp.partition)] = _listed(consumer, tp, timeout)[0]
    return out


def end_offsets(consumer: Consumer, tps: list[TopicPartition], timeout: float = 10.0) -> Offsets:
    """Return the true end (high watermark) of each partition, correct on tansu too.

    Raises SourceError when the broker cannot be reached.
    """
    return probe_ends(consumer, tps, timeout)[0]


#: A look-up's end offsets are one moment's to within this many seconds: a micro-batch must not read one
#: partition further than another (Spark's watermark is the newest event time of all partitions, so a partition
#: read ahead makes the others' older events late). Each partition's end is read from the fetch that brought
#: its probed record, and those fetches can come 100 ms or more apart (a fresh consumer's first look-up); a
#: look-up whose records came further apart than this is made again, up to :data:`PROBE_PASSES` times.
PROBE_SPREAD_S = 0.02
#: At most this many probes per look-up (the one whose records came closest together is kept).
PROBE_PASSES = 4


def probe_ends(
    consumer: Consumer, tps: list[TopicPartition], timeout: float = 10.0
) -> tuple[Offsets, dict[tuple[str, int], int]]:
    """Return the true end of each partition (see :func:`end_offsets`), all read within
    :data:`PROBE_SPREAD_S` of one another when the broker allows, and, per partition that holds records,
    the Kafka timestamp (epoch ms) of the newest record batch's probed record.

    Raises SourceError when the broker cannot be reached.
    """
    listed = {(tp.topic, tp.partition): _listed(consumer, tp, timeout) for tp in tps}
    deadline = time.monotonic() + timeout
    best: tuple[float, dict[tuple[str, int], int], dict[tuple[str, int], int]] | None = None
    for _ in range(PROBE_PASSES):
        result, times, spread = _probe(consumer, listed, deadline)
        if best is None or spread < best[0]:
            best = (spread, result, times)
        if spread <= PROBE_SPREAD_S or time.monotonic() >= deadline:
            break
        # probe again at the newest record found: the partitions answer in one fetch more often than not
        listed = {key: (lo, max(hi, result[key])) for key, (lo, hi) in listed.items()}
    assert best is not None
    out: Offsets = {}
    for (topic, part), hi in best[1].items():
        out.setdefault(topic, {})[str(part)] = hi
    return out, best[2]


def _probe(
    consumer: Consumer, listed: dict[tuple[str, int], tuple[int, int]], deadline: float
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int], float]:
    """Fetch the newest listed record of every partition; return each partition's high watermark as that
    fetch reported it (at least the listed end), the probed records' Kafka timestamps, and how many seconds
    apart the first and the last of the records came. An empty partition answers end-of-partition: its end
    held from the listing to that answer, so it does not count in the spread."""
    probe = [TopicPartition(t, p, max(hi - 1, lo)) for (t, p), (lo, hi) in listed.items()]
    result = {key: hi for key, (_, hi) in listed.items()}
    times: dict[tuple[str, int], int] = {}
    came: list[float] = []
    pending = set(result)
    consumer.assign(probe)
    try:
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                raise SourceError(f"fetch from {msg.topic()}[{msg.partition()}] failed: {err.str()}")
            key = (msg.topic(), msg.partition())
            if key in pending:
                _, hw = consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
                if hw is not None and hw >= 0:
                    result[key] = max(result[key], hw)
                kind, ts = msg.timestamp() if err is None else (TIMESTAMP_NOT_AVAILABLE, 0)
                if kind != TIMESTAMP_NOT_AVAILABLE and ts > 0:
                    times[key] = ts
                if err is None:
                    came.append(time.monotonic())
                pending.discard(key)
    finally:
        consumer.unassign()
    return result, times, (max(came) - min(came)) if came else 0.0


def offsets_for_time(
    consumer: Consumer, tps: list[TopicPartition], ts_ms: int, ends: Offsets, timeout: float = 10.0
) -> Offsets:
    """Return, per partition, the first offset whose record time is at or after ``ts_ms``.

    A partition with nothing that new starts at its end.
    """
    try:
        found = consumer.offsets_for_times(
            [TopicPartition(tp.topic, tp.partition, ts_ms) for tp in tps], timeout=timeout
        )
    except KafkaException as exc:
        raise SourceError(f"cannot look up offsets for time {ts_ms}: {exc.args[0]}") from None
    out: Offsets = {}
    for tp in found:
        end = ends[tp.topic][str(tp.partition)]
        off = end if tp.offset in (-1, OFFSET_END) or tp.offset < 0 else min(tp.offset, end)
        out.setdefault(tp.topic, {})[str(tp.partition)] = off
    return out


def split_limit(start: Offsets, end: Offsets, max_rows: int) -> Offsets:
    """Cap ``end`` so that at most ``max_rows`` records are read, shared across partitions in
    proportion to what each has pending (so every partition advances in every micro-batch and an
    event-time watermark does not run ahead on one partition)."""
    pending = {(t, p): end[t][p] - start.get(t, {}).get(p, 0) for t in end for p in end[t]}
    total = sum(max(v, 0) for v in pending.values())
    if total <= max_rows:
        return end
    out: Offsets = {}
    for (t, p), n in pending.items():
        take = max(n, 0) * max_rows // total
        if n > 0 and take == 0:
            take = 1
        out.setdefault(t, {})[p] = start.get(t, {}).get(p, 0) + take
    return out


def parse_start_time(text: str) -> int:
    """Return epoch milliseconds of ``start_from`` given as ISO 8601 or epoch milliseconds.

    Raises SourceError for anything else.
    """
    value = text.strip()
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise SourceError(
            f"start_from {text!r} is not earliest, latest, an ISO 8601 time or epoch ms"
        ) from None
    if moment.tzinfo is None:
        raise SourceError(f"start_from {text!r} has no time zone; add Z or +07:00")
    return int(moment.timestamp() * 1000)
