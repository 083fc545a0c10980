"""The Kafka source: a PySpark Python Data Source over protobuf topics.

* Spark partitions are Kafka offset ranges ``[start, end)`` of one topic partition (a long range
  is split so that every core gets work).
* ``read()`` runs on the executors: it assigns (no consumer group), seeks, fetches with
  confluent-kafka and yields ``pyarrow.RecordBatch``es decoded column by column.
* Offsets live only in Spark's checkpoint (``{topic: {partition: next offset}}``), so a restart
  neither loses nor repeats input.
* Bad records follow the stream's policy: ``fail`` stops the query with the topic, partition and
  offset; ``skip`` leaves them out, logs and records each one (raw bytes included) under
  ``bad_records_dir`` so nothing is lost and the count is known.

Options (all strings, set by :func:`source_options`): ``bootstrap_servers``, ``topics`` (JSON list),
``proto_class``, ``descriptor_set`` (base64), ``columns`` (JSON list), ``start_from``,
``max_records_per_batch``, ``split_records``, ``bad_records``, ``bad_records_dir``, ``consumer_config``
(JSON object).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StringType, StructField, StructType

from job.errors import BadRecordError, SourceError
from job.schema.arrow import ArrowDecoder, gc_paused
from job.schema.registry import SchemaRegistry
from job.sources import offsets as kofs

log = logging.getLogger("daggers.source.kafka")

SOURCE_NAME = "dagger_kafka"
FETCH_BATCH = 10_000  # records decoded per Arrow batch
RECREATED_CONFIRMATIONS = 3  # consecutive look-ups that must show a topic shorter than the checkpoint


@dataclass(frozen=True)
class SourceConfig:
    """The parsed options of one stream's source."""

    bootstrap_servers: str
    topics: list[str]
    proto_class: str
    descriptor_set_b64: str
    columns: list[str]
    start_from: str = "earliest"
    max_records_per_batch: int = 0
    split_records: int = 200_000
    bad_records: str = "skip"
    bad_records_dir: str = ""
    consumer_config: dict[str, str] | None = None
    read_timeout_s: float = 60.0
    max_outage_s: float = 600.0
    dead_letter_topic: str = ""
    derived: list[list[Any]] | None = None  # columns computed from decoded ones (job.sql.pushdown)

    @classmethod
    def from_options(cls, options: Any) -> SourceConfig:
        """Build from Spark's (lower-cased) option map; raise SourceError naming a missing option."""
        def need(key: str) -> str:
            if key not in options:
                raise SourceError(f"the {SOURCE_NAME} source needs the option {key!r}")
            return str(options[key])

        return cls(
            bootstrap_servers=need("bootstrap_servers"),
            topics=json.loads(need("topics")),
            proto_class=need("proto_class"),
            descriptor_set_b64=need("descriptor_set"),
            columns=json.loads(need("columns")),
            start_from=str(options.get("start_from", "earliest")),
            max_records_per_batch=int(options.get("max_records_per_batch", 0)),
            split_records=int(options.get("split_records", 200_000)),
            bad_records=str(options.get("bad_records", "skip")),
            bad_records_dir=str(options.get("bad_records_dir", "")),
            consumer_config=json.loads(options.get("consumer_config", "{}")),
            read_timeout_s=float(options.get("read_timeout_s", 60.0)),
            max_outage_s=float(options.get("max_outage_s", 600.0)),
            dead_letter_topic=str(options.get("dead_letter_topic", "")),
            derived=json.loads(options.get("derived", "[]")),
        )

    def decoder(self) -> ArrowDecoder:
        """Return the decoder for this stream's message class and columns."""
        return ArrowDecoder(SchemaRegistry.from_b64(self.descriptor_set_b64), self.proto_class, self.columns)

    def spark_schema(self) -> StructType:
        """Return the rows' schema: the decoded columns, then the derived ones (strings)."""
        fields = list(self.decoder().spark_schema.fields)
        return StructType(fields + [StructField(str(name), StringType(), True) for name, *_ in self.derived or []])

    def add_derived(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Append the derived columns to a decoded batch (``S2Id`` computed with numpy)."""
        if not self.derived:
            return batch
        from job.functions.spark_udfs import s2id_arrow

        arrays, names = list(batch.columns), list(batch.schema.names)
        for name, function, lat, lng, level in self.derived:
            if function != "s2id":
                raise SourceError(f"unknown derived column function {function!r} for {name!r}")
            arrays.append(s2id_arrow(batch.column(lat), batch.column(lng), pa.repeat(pa.scalar(int(level), pa.int32()), batch.num_rows)))
            names.append(str(name))
        return pa.RecordBatch.from_arrays(arrays, names=names)


def source_options(cfg: SourceConfig) -> dict[str, str]:
    """Return the Spark options that :meth:`SourceConfig.from_options` reads back."""
    return {
        "bootstrap_servers": cfg.bootstrap_servers,
        "topics": json.dumps(cfg.topics),
        "proto_class": cfg.proto_class,
        "descriptor_set": cfg.descriptor_set_b64,
        "columns": json.dumps(cfg.columns),
        "start_from": cfg.start_from,
        "max_records_per_batch": str(cfg.max_records_per_batch),
        "split_records": str(cfg.split_records),
        "bad_records": cfg.bad_records,
        "bad_records_dir": cfg.bad_records_dir,
        "consumer_config": json.dumps(cfg.consumer_config or {}),
        "read_timeout_s": str(cfg.read_timeout_s),
        "max_outage_s": str(cfg.max_outage_s),
        "dead_letter_topic": cfg.dead_letter_topic,
        "derived": json.dumps(cfg.derived or []),
    }


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records ``[start, end)`` of one topic partition: one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:  # InputPartition has __init__(value)
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "value", (topic, partition, start, end))


class DaggerKafkaSource(DataSource):
    """``spark.readStream.format("dagger_kafka")``: protobuf records from Kafka topics."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return SourceConfig.from_options(self.options).spark_schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(SourceConfig.from_options(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(SourceConfig.from_options(self.options))


class KafkaBatchReader(DataSourceReader):
    """A bounded read for previews: from ``start_from`` to the end offsets at planning time, and at
    most ``max_records_per_batch`` records per partition (the newest ones)."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg

    def partitions(self) -> list[InputPartition]:
        consumer = kofs.driver_consumer(self.cfg.bootstrap_servers, self.cfg.consumer_config)
        try:
            tps = kofs.partitions_of(consumer, self.cfg.topics, self.cfg.bootstrap_servers)
            ends = kofs.end_offsets(consumer, tps)
            how = self.cfg.start_from.strip().lower()
            if how == "latest":
                starts = ends
            elif how == "earliest":
                starts = kofs.beginning_offsets(consumer, tps)
            else:
                starts = kofs.offsets_for_time(consumer, tps, kofs.parse_start_time(self.cfg.start_from), ends)
        finally:
            consumer.close()
        cap = self.cfg.max_records_per_batch
        out: list[InputPartition] = []
        for topic, parts in ends.items():
            for part, hi in parts.items():
                lo = starts.get(topic, {}).get(part, hi)
                if cap > 0:
                    lo = max(lo, hi - cap)
                if lo < hi:
                    out.append(OffsetRange(topic, int(part), lo, hi))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        yield from read_range(self.cfg, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver and reads them on the executors."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg
        self._client: Consumer | None = None
        self._target: kofs.Offsets | None = None
        self._outage_since: float | None = None
        self._behind_seen = 0

    def _during_outage(self, start: dict, exc: SourceError) -> dict:
        """The broker cannot be reached: plan no new data and try again at the next trigger, until
        ``max_outage_s`` has passed (then the error stops the query)."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        waited = now - self._outage_since
        if waited > self.cfg.max_outage_s:
            raise SourceError(f"{exc.message} (for {waited:.0f} s, more than max_outage_s "
                              f"{self.cfg.max_outage_s:.0f})", hint=exc.hint) from None
        log.warning("broker unavailable for %.0f s, will retry: %s", waited, exc.message)
        if self._client is not None:  # start afresh: a restarted broker may have new metadata
            self._client.close()
            self._client = None
        return start

    # The driver-side client must not travel to executors with the pickled reader.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _consumer(self) -> Consumer:
        if self._client is None:
            self._client = kofs.driver_consumer(self.cfg.bootstrap_servers, self.cfg.consumer_config)
        return self._client

    def _partitions(self) -> list[TopicPartition]:
        return kofs.partitions_of(self._consumer(), self.cfg.topics, self.cfg.bootstrap_servers)

    def _ends(self) -> kofs.Offsets:
        return kofs.end_offsets(self._consumer(), self._partitions())

    def initialOffset(self) -> dict:
        tps = self._partitions()
        how = self.cfg.start_from.strip().lower()
        if how == "earliest":
            return kofs.beginning_offsets(self._consumer(), tps)
        ends = kofs.end_offsets(self._consumer(), tps)
        if how == "latest":
            return ends
        return kofs.offsets_for_time(self._consumer(), tps, kofs.parse_start_time(self.cfg.start_from), ends)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.cfg.max_records_per_batch
        return ReadMaxRows(n) if n > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        try:
            end = self._target or self._ends()
        except SourceError as exc:
            return self._during_outage(start, exc)
        self._outage_since = None
        behind = _ahead_of_end(start, end)
        if behind:
            # A broker that is starting up can briefly report empty partitions: believe that the
            # topic was recreated only when it says so several times in a row.
            self._behind_seen += 1
            if self._behind_seen < RECREATED_CONFIRMATIONS:
                log.warning("%s: end offsets are behind the checkpoint (%s); waiting to confirm", self.cfg.topics,
                            sorted(behind))
                return start
        self._behind_seen = 0
        begin = (kofs.beginning_offsets(self._consumer(), self._partitions())
                 if _has_new(start, end) or behind else {})
        merged: kofs.Offsets = {}
        for topic, parts in end.items():
            for part, hi in parts.items():
                lo = start.get(topic, {}).get(part, begin.get(topic, {}).get(part, 0))
                if (topic, part) in behind:
                    # The topic holds fewer records than the checkpoint has read: it was deleted and
                    # made again. Like auto.offset.reset=earliest, go back to its first record.
                    log.warning("%s[%s]: checkpoint offset %d is past the end %d; the topic was recreated, "
                                "reading it again from its beginning", topic, part, lo, hi)
                    merged.setdefault(topic, {})[part] = begin[topic][part]
                    continue
                merged.setdefault(topic, {})[part] = max(hi, lo)
        if behind:
            self._behind_seen = 0
            return merged
        full_start = {t: {p: start.get(t, {}).get(p, begin.get(t, {}).get(p, 0)) for p in ps}
                      for t, ps in merged.items()}
        if isinstance(limit, ReadMaxRows):
            merged = kofs.split_limit(full_start, merged, limit.max_rows)
        return merged

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        out: list[InputPartition] = []
        step = max(self.cfg.split_records, 1)
        for topic, parts in end.items():
            for part, hi in parts.items():
                lo = start.get(topic, {}).get(part, 0)
                for s in range(lo, hi, step):
                    out.append(OffsetRange(topic, int(part), s, min(s + step, hi)))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        yield from read_range(self.cfg, partition)

    def commit(self, end: dict) -> None:
        """Spark has committed everything before ``end``: publish that data's bad records."""
        if self.cfg.bad_records == "dead-letter" and self.cfg.bad_records_dir:
            publish_dead_letters(self.cfg.bad_records_dir, self.cfg.bootstrap_servers,
                                 self.cfg.dead_letter_topic, self.cfg.consumer_config)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _ahead_of_end(start: dict, end: kofs.Offsets) -> set[tuple[str, str]]:
    return {(t, p) for t, ps in end.items() for p, hi in ps.items() if start.get(t, {}).get(p, 0) > hi}


def _has_new(start: dict, end: kofs.Offsets) -> bool:
    return any(p not in start.get(t, {}) for t, ps in end.items() for p in ps)


# ---- executor side ---------------------------------------------------------------------------

_CONSUMERS: dict[str, Consumer] = {}


def _executor_consumer(cfg: SourceConfig) -> Consumer:
    """One consumer per Python worker, reused across tasks (workers are reused by Spark)."""
    key = json.dumps([cfg.bootstrap_servers, cfg.consumer_config], sort_keys=True)
    consumer = _CONSUMERS.get(key)
    if consumer is None:
        consumer = Consumer({
            "bootstrap.servers": cfg.bootstrap_servers,
            "group.id": "daggers-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.min.bytes": 1,
            "fetch.wait.max.ms": 100,
            # Large fetches and a deep prefetch queue: 0.97M msgs/s from one partition instead of
            # 0.14M with librdkafka's defaults (measured against tansu, 70-byte records).
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.min.messages": 500_000,
            "queued.max.messages.kbytes": 262144,
            "receive.message.max.bytes": 1_000_000_000,
            "log_level": 2,
            **(cfg.consumer_config or {}),
        })
        _CONSUMERS[key] = consumer
    return consumer


def read_range(cfg: SourceConfig, rng: OffsetRange) -> Iterator[pa.RecordBatch]:
    """Yield the decoded records of ``rng`` in batches of at most FETCH_BATCH rows.

    Bad records follow ``cfg.bad_records``; with skip or dead-letter they are written, raw bytes
    included, to one file per offset range under ``bad_records_dir`` (the same file again when
    Spark replays the range, so nothing is counted or published twice).
    Raises BadRecordError (policy ``fail``) or SourceError when the range cannot be read in
    ``read_timeout_s`` (the broker is down, or the records were deleted by retention).
    """
    if rng.end <= rng.start:
        return
    decoder = cfg.decoder()
    consumer = _executor_consumer(cfg)
    consumer.assign([TopicPartition(rng.topic, rng.partition, rng.start)])
    next_offset = rng.start
    payloads: list[bytes | None] = []
    offs: list[int] = []
    bad: list[dict[str, Any]] = []
    last_progress = time.monotonic()
    try:
        while next_offset < rng.end:
            msgs = consumer.consume(num_messages=min(FETCH_BATCH, rng.end - next_offset), timeout=1.0)
            if not msgs:
                if time.monotonic() - last_progress > cfg.read_timeout_s:
                    raise SourceError(
                        f"no records from {rng.topic}[{rng.partition}] at offset {next_offset} for "
                        f"{cfg.read_timeout_s:.0f} s (range {rng.start}..{rng.end})")
                continue
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= rng.end:
                            next_offset = rng.end
                        continue
                    if err.retriable() or err.code() in _TRANSIENT:
                        continue  # librdkafka retries on its own; the read timeout bounds the wait
                    raise SourceError(f"reading {rng.topic}[{rng.partition}] failed: {err.str()}")
                off = msg.offset()
                if off < next_offset or off >= rng.end:
                    continue
                payloads.append(msg.value())
                offs.append(off)
                next_offset = off + 1
            last_progress = time.monotonic()
            if len(payloads) >= FETCH_BATCH:
                yield _decode(cfg, decoder, rng, payloads, offs, bad)
                payloads, offs = [], []
        if payloads:
            yield _decode(cfg, decoder, rng, payloads, offs, bad)
    finally:
        consumer.unassign()
    if bad:
        _record_bad(cfg, rng, bad)


_TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def _decode(cfg: SourceConfig, decoder: ArrowDecoder, rng: OffsetRange, payloads: list[bytes | None],
            offs: list[int], bad: list[dict[str, Any]]) -> pa.RecordBatch:
    with gc_paused():
        messages, _, failures = decoder.parse(payloads)
        if failures:
            first = failures[0]
            if cfg.bad_records == "fail":
                raise BadRecordError(rng.topic, rng.partition, offs[first.index], first.reason)
            for f in failures:
                print(f"daggers: bad record {rng.topic}[{rng.partition}]@{offs[f.index]} ({cfg.bad_records}): "
                      f"{f.reason}", file=sys.stderr)
                bad.append({"topic": rng.topic, "partition": rng.partition, "offset": offs[f.index],
                            "error": f.reason, "value_b64": base64.b64encode(payloads[f.index] or b"").decode()})
        return cfg.add_derived(decoder.to_batch(messages))


def _range_file(folder: Path, rng: OffsetRange) -> Path:
    return folder / f"{rng.topic}-{rng.partition}-{rng.start:020d}-{rng.end:020d}.jsonl"


def _record_bad(cfg: SourceConfig, rng: OffsetRange, bad: list[dict[str, Any]]) -> None:
    if not cfg.bad_records_dir:
        return
    folder = Path(cfg.bad_records_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = _range_file(folder, rng)
    if target.with_suffix(".jsonl.published").exists():
        return  # a replayed range whose bad records are already in the dead-letter topic
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(rec) + "\n" for rec in bad))
    tmp.replace(target)


def publish_dead_letters(bad_records_dir: str | Path, bootstrap: str, topic: str,
                         producer_config: dict[str, str] | None = None) -> int:
    """Publish every not yet published bad-record file to the dead-letter topic; return the count.

    Each record keeps its raw bytes as the value, ``<topic>:<partition>:<offset>`` as the key and
    the source topic, partition, offset and error as headers. A file is marked published only
    after the broker acknowledged all of its records (a crash in between publishes it again:
    consumers can drop repeats by key). Raises SourceError when delivery fails.
    """
    from confluent_kafka import Producer

    folder = Path(bad_records_dir)
    files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    if not files:
        return 0
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 20, "log_level": 2, **(producer_config or {})})
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))

    sent = 0
    for path in files:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            producer.produce(topic, value=base64.b64decode(rec["value_b64"]),
                             key=f"{rec['topic']}:{rec['partition']}:{rec['offset']}",
                             headers={"dagger.source.topic": rec["topic"],
                                      "dagger.source.partition": str(rec["partition"]),
                                      "dagger.source.offset": str(rec["offset"]),
                                      "dagger.error": rec["error"][:1000]},
                             on_delivery=on_delivery)
            producer.poll(0)
            sent += 1
        left = producer.flush(30)
        if errors or left:
            raise SourceError(f"cannot publish bad records to dead-letter topic {topic!r}: "
                              f"{errors[0] if errors else f'{left} not acknowledged'}")
        path.replace(path.with_suffix(".jsonl.published"))
    return sent


def count_bad_records(bad_records_dir: str | Path) -> int:
    """Return how many bad records a job has skipped so far (each recorded once)."""
    folder = Path(bad_records_dir)
    if not folder.is_dir():
        return 0
    seen: set[tuple[str, int, int]] = set()
    for path in [*folder.rglob("*.jsonl"), *folder.rglob("*.jsonl.published")]:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            seen.add((rec["topic"], rec["partition"], rec["offset"]))
    return len(seen)


def register_source(spark: Any) -> None:
    """Register the Kafka data source (``SOURCE_NAME``) with ``spark``.

    Idempotent: a session made by ``newSession()`` inherits its parent's data sources and refuses to
    register the same name again (DATA_SOURCE_ALREADY_EXISTS); that inherited source is the same one.
    """
    try:
        spark.dataSource.register(DaggerKafkaSource)
    except Exception as exc:  # pyspark's AnalysisException; the class moved between releases
        if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
            raise
