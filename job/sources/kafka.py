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
(JSON object), and for failover (:mod:`job.sources.failover`) ``failover_bootstrap_servers``,
``failover_after_s`` and ``positions_dir``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import LongType, StringType, StructField, StructType

from job import worker_heap
from job.errors import BadRecordError, SourceError
from job.schema.arrow import ArrowDecoder
from job.schema.registry import SchemaRegistry
from job.sources import failover as kfo
from job.sources import offsets as kofs
from job.sources.pacing import ClosePacer
from job.sources.stall import ClientLog, StallWatch, notice, starvation

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
    start_from: str = "earliest"  # earliest, latest, a time, or {topic: {partition: offset}} (a fused group)
    max_records_per_batch: int = 0
    split_records: int = 200_000
    #: A micro-batch's ranges are read by ceil(records / pack_records) tasks, at least one, each range
    #: whole (small ranges share a task: a task's fixed cost dwarfs reading a few hundred records).
    pack_records: int = 20_000
    #: At most this many tasks read a micro-batch (0: no cap). A shared host sets it for its heavy daggers
    #: so that a task slot stays free for the light ones (job.shared.hosted.heavy_task_cap).
    max_tasks: int = 0
    bad_records: str = "skip"
    bad_records_dir: str = ""
    consumer_config: dict[str, str] | None = None
    read_timeout_s: float = 60.0
    max_outage_s: float = 600.0
    dead_letter_topic: str = ""
    derived: list[list[Any]] | None = None  # columns computed from decoded ones (job.sql.pushdown)
    hidden: list[str] | None = None  # decoded only to compute derived columns: not handed to Spark
    batch_order: str = ""  # the column each batch is sorted by, stably ("": arrival order; job.sql.pushdown)
    failover_bootstrap_servers: str = ""  # the secondary cluster ("" : no failover)
    failover_after_s: float = 30.0
    positions_dir: str = ""  # where readers record the last record of each range read on the primary
    close_period_ms: int = 0  # window boundaries every this much event time (0: no windows; job.sources.pacing)
    close_delay_ms: int = 0  # ... closed this long after, by the watermark
    read_at_close: bool = False  # plan new data only when it closes a window (job.sources.pacing)
    gather_ms: int = 0  # far from a window boundary, plan new data at most this often (job.sources.pacing)
    #: A batch read's end, ``{topic: {partition: offset}}`` as JSON: each partition is read up to (not
    #: including) its offset here, or its end when that comes first ("": up to the end; batch reads only).
    end_at: str = ""

    def __post_init__(self) -> None:
        if not self.batch_order:
            return
        columns = self.output_columns()
        if self.batch_order not in columns:
            raise SourceError(f"batch_order {self.batch_order!r} is not a column the source hands over "
                              f"({', '.join(columns)})")

    def output_columns(self) -> list[str]:
        """Return the names of the columns each batch hands to Spark: the decoded ones but the hidden,
        then the derived ones."""
        hidden = set(self.hidden or [])
        return [c for c in self.columns if c not in hidden] + [str(d[0]) for d in self.derived or []]

    @property
    def failover(self) -> bool:
        """Whether the stream names a secondary cluster."""
        return bool(self.failover_bootstrap_servers)

    def bootstrap(self, cluster: str) -> str:
        """Return the bootstrap servers of ``cluster`` (primary or secondary)."""
        return self.failover_bootstrap_servers if cluster == kfo.SECONDARY else self.bootstrap_servers

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
            pack_records=int(options.get("pack_records", 20_000)),
            max_tasks=int(options.get("max_tasks", 0)),
            bad_records=str(options.get("bad_records", "skip")),
            bad_records_dir=str(options.get("bad_records_dir", "")),
            consumer_config=json.loads(options.get("consumer_config", "{}")),
            read_timeout_s=float(options.get("read_timeout_s", 60.0)),
            max_outage_s=float(options.get("max_outage_s", 600.0)),
            dead_letter_topic=str(options.get("dead_letter_topic", "")),
            derived=json.loads(options.get("derived", "[]")),
            hidden=json.loads(options.get("hidden", "[]")),
            batch_order=str(options.get("batch_order", "")),
            failover_bootstrap_servers=str(options.get("failover_bootstrap_servers", "")),
            failover_after_s=float(options.get("failover_after_s", 30.0)),
            positions_dir=str(options.get("positions_dir", "")),
            close_period_ms=int(options.get("close_period_ms", 0)),
            close_delay_ms=int(options.get("close_delay_ms", 0)),
            read_at_close=options.get("read_at_close", "false") == "true",
            gather_ms=int(options.get("gather_ms", 0)),
            end_at=str(options.get("end_at", "")),
        )

    def decoder(self) -> ArrowDecoder:
        """Return the decoder for this stream's message class and columns."""
        return ArrowDecoder(SchemaRegistry.from_b64(self.descriptor_set_b64), self.proto_class, self.columns)

    def spark_schema(self) -> StructType:
        """Return the rows' schema: the decoded columns but the hidden ones, then the derived ones
        (``s2id``: strings, ``s2cell``: longs)."""
        hidden = set(self.hidden or [])
        fields = [f for f in self.decoder().spark_schema.fields if f.name not in hidden]
        return StructType(fields + [StructField(str(name), LongType() if function == "s2cell" else StringType(), True)
                                    for name, function, *_ in self.derived or []])

    def add_derived(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Append the derived columns to a decoded batch (S2 cells computed with numpy) and drop the
        hidden ones. Raises SourceError for a derived column of an unknown function."""
        if not self.derived:
            return batch
        from job.functions.spark_udfs import s2cell_arrow, s2id_arrow

        functions = {"s2id": s2id_arrow, "s2cell": s2cell_arrow}
        arrays, names = list(batch.columns), list(batch.schema.names)
        for name, function, lat, lng, level in self.derived:
            if function not in functions:
                raise SourceError(f"unknown derived column function {function!r} for {name!r}")
            levels = pa.repeat(pa.scalar(int(level), pa.int32()), batch.num_rows)
            arrays.append(functions[function](batch.column(lat), batch.column(lng), levels))
            names.append(str(name))
        hidden = set(self.hidden or [])
        keep = [i for i, n in enumerate(names) if n not in hidden]
        return pa.RecordBatch.from_arrays([arrays[i] for i in keep], names=[names[i] for i in keep])

    def ordered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Return ``batch`` sorted stably by ``batch_order`` (rows with equal keys keep their order)."""
        if not self.batch_order or batch.num_rows < 2:
            return batch
        return batch.take(pc.sort_indices(batch, [(self.batch_order, "ascending")]))  # nulls last


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
        "pack_records": str(cfg.pack_records),
        "max_tasks": str(cfg.max_tasks),
        "bad_records": cfg.bad_records,
        "bad_records_dir": cfg.bad_records_dir,
        "consumer_config": json.dumps(cfg.consumer_config or {}),
        "read_timeout_s": str(cfg.read_timeout_s),
        "max_outage_s": str(cfg.max_outage_s),
        "dead_letter_topic": cfg.dead_letter_topic,
        "derived": json.dumps(cfg.derived or []),
        "hidden": json.dumps(cfg.hidden or []),
        "batch_order": cfg.batch_order,
        "failover_bootstrap_servers": cfg.failover_bootstrap_servers,
        "failover_after_s": str(cfg.failover_after_s),
        "positions_dir": cfg.positions_dir,
        "close_period_ms": str(cfg.close_period_ms),
        "read_at_close": "true" if cfg.read_at_close else "false",
        "close_delay_ms": str(cfg.close_delay_ms),
        "gather_ms": str(cfg.gather_ms),
        "end_at": cfg.end_at,
    }


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records ``[start, end)`` of one topic partition on one cluster (primary or secondary): one Spark task.

    ``anchor`` is where the micro-batch starts on that partition (``start`` or before it, when a long
    range was split): the position recorded there lets a reader move a primary range to the secondary.
    """

    topic: str
    partition: int
    start: int
    end: int
    cluster: str
    anchor: int

    def __init__(self, topic: str, partition: int, start: int, end: int,  # InputPartition has __init__(value)
                 cluster: str = kfo.PRIMARY, anchor: int | None = None) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "cluster", cluster)
        object.__setattr__(self, "anchor", start if anchor is None else anchor)
        object.__setattr__(self, "value", (topic, partition, start, end, cluster, self.anchor))


class RangeGroup(InputPartition):
    """Several offset ranges of one micro-batch, read one after the other by one Spark task."""

    ranges: tuple[OffsetRange, ...]

    def __init__(self, ranges: list[OffsetRange]) -> None:
        object.__setattr__(self, "ranges", tuple(ranges))
        object.__setattr__(self, "value", tuple(r.value for r in ranges))


def pack_ranges(ranges: list[OffsetRange], pack_records: int, max_tasks: int = 0) -> list[InputPartition]:
    """Return the tasks that read ``ranges``: ``ceil(records / pack_records)`` of them (at least one, at
    most one per range, and at most ``max_tasks`` when it is not 0), the ranges dealt largest first to the
    task with the fewest records so far. Ranges are never cut (``split_records`` does that); a task of one
    range is that range itself."""
    if len(ranges) < 2 or (pack_records <= 0 and not 0 < max_tasks < len(ranges)):
        return list(ranges)
    total = sum(r.end - r.start for r in ranges)
    tasks = max(1, -(-total // pack_records)) if pack_records > 0 else len(ranges)
    if max_tasks > 0:
        tasks = min(tasks, max_tasks)
    if tasks >= len(ranges):
        return list(ranges)
    groups: list[list[OffsetRange]] = [[] for _ in range(tasks)]
    loads = [0] * tasks
    for r in sorted(ranges, key=lambda r: r.end - r.start, reverse=True):
        i = loads.index(min(loads))
        groups[i].append(r)
        loads[i] += r.end - r.start
    return [g[0] if len(g) == 1 else RangeGroup(sorted(g, key=lambda r: (r.topic, r.partition, r.start)))
            for g in groups]


def read_partition(cfg: SourceConfig, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of a task: one :class:`OffsetRange` or a :class:`RangeGroup` of them."""
    worker_heap.settle()
    if isinstance(partition, RangeGroup):
        for rng in partition.ranges:
            yield from read_range(cfg, rng)
        return
    assert isinstance(partition, OffsetRange)
    yield from read_range(cfg, partition)


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
    """A bounded read: from ``start_from`` (earliest, latest, a time, or offsets) to the end offsets at
    planning time, or to ``end_at`` where it comes first, and at most ``max_records_per_batch`` records
    per partition (the newest ones). Previews read this way, and a fused group catches up a member that
    comes back behind the others (:mod:`job.shared.catchup`)."""

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg

    def partitions(self) -> list[InputPartition]:
        consumer = kofs.driver_consumer(self.cfg.bootstrap_servers, self.cfg.consumer_config)
        try:
            tps = kofs.partitions_of(consumer, self.cfg.topics, self.cfg.bootstrap_servers, proto_class=self.cfg.proto_class)
            ends = kofs.end_offsets(consumer, tps)
            how = self.cfg.start_from.strip().lower()
            if how == "latest":
                starts = ends
            elif how == "earliest":
                starts = kofs.beginning_offsets(consumer, tps)
            elif how.startswith("{"):
                given = json.loads(self.cfg.start_from)
                starts = {t: {p: int((given.get(t) or {}).get(p, hi)) for p, hi in parts.items()}
                          for t, parts in ends.items()}
            else:
                starts = kofs.offsets_for_time(consumer, tps, kofs.parse_start_time(self.cfg.start_from), ends)
        finally:
            consumer.close()
        cap = self.cfg.max_records_per_batch
        stop = json.loads(self.cfg.end_at) if self.cfg.end_at else {}
        out: list[OffsetRange] = []
        for topic, parts in ends.items():
            for part, hi in parts.items():
                hi = min(hi, int((stop.get(topic) or {}).get(part, hi)))
                lo = starts.get(topic, {}).get(part, hi)
                if cap > 0:
                    lo = max(lo, hi - cap)
                if lo < hi:
                    out.append(OffsetRange(topic, int(part), lo, hi))
        return pack_ranges(out, self.cfg.pack_records, self.cfg.max_tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.cfg, partition)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans offset ranges on the driver and reads them on the executors.

    With failover, the offsets say which cluster they belong to (:mod:`job.sources.failover`) and the
    driver reads from that cluster; it moves to the secondary when the primary has been unreachable
    for ``failover_after_s``, and never moves back.
    """

    def __init__(self, cfg: SourceConfig) -> None:
        self.cfg = cfg
        self._clients: dict[str, Consumer] = {}
        self._target: tuple[str, kofs.Offsets] | None = None
        self._available_now = False
        self._outage_since: float | None = None
        self._behind_seen = 0
        self._positioned: dict[tuple[str, str], int] = {}  # (topic, partition) -> the last offset with a known position
        self._pacer = ClosePacer(cfg.close_period_ms, cfg.close_delay_ms, cfg.read_at_close, cfg.gather_ms / 1000)
        self._newest_ms: dict[tuple[str, int], int] = {}  # (topic, partition) -> the newest probed record's time

    def _during_outage(self, start: dict, exc: SourceError) -> dict:
        """The broker cannot be reached: plan no new data and try again at the next trigger, until
        ``max_outage_s`` has passed (then the error stops the query). With failover, move to the
        secondary once the primary has been unreachable for ``failover_after_s``."""
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        waited = now - self._outage_since
        self._drop_clients()  # start afresh: a restarted broker may have new metadata
        cluster, offsets = kfo.split_cluster(start)
        if self.cfg.failover and cluster == kfo.PRIMARY and waited >= self.cfg.failover_after_s:
            try:
                return self._fail_over(offsets, waited, exc)
            except SourceError as second:
                log.warning("cannot fail over to the secondary cluster %s yet: %s",
                            self.cfg.failover_bootstrap_servers, second.message)
        if waited > self.cfg.max_outage_s:
            raise SourceError(f"{exc.message} (for {waited:.0f} s, more than max_outage_s "
                              f"{self.cfg.max_outage_s:.0f})", hint=exc.hint) from None
        log.warning("broker unavailable for %.0f s, will retry: %s", waited, exc.message)
        return start

    def _fail_over(self, start: kofs.Offsets, waited: float, exc: SourceError) -> dict:
        """Return the switch offsets: where to start on the secondary (a micro-batch that reads nothing)."""
        consumer = self._consumer(kfo.SECONDARY)
        tps = kofs.partitions_of(consumer, self.cfg.topics, self.cfg.failover_bootstrap_servers)
        positions = {(tp.topic, tp.partition): self._position(start, tp) for tp in tps}
        target = kfo.secondary_start(consumer, tps, positions, self.cfg.start_from)
        log.warning("FAILOVER %s: the primary cluster %s has been unreachable for %.0f s (%s); switching to the "
                    "secondary cluster %s at offsets %s (by the timestamps of the last records read; no "
                    "automatic failback)", self.cfg.topics, self.cfg.bootstrap_servers, waited, exc.message,
                    self.cfg.failover_bootstrap_servers, json.dumps(target, sort_keys=True))
        print(f"daggers: FAILOVER of {self.cfg.topics} from {self.cfg.bootstrap_servers} to "
              f"{self.cfg.failover_bootstrap_servers} after {waited:.0f} s", file=sys.stderr)
        if self.cfg.positions_dir:
            kfo.write_active(self.cfg.positions_dir, kfo.SECONDARY, self.cfg.failover_bootstrap_servers)
        self._outage_since = None
        self._target = None
        return kfo.tag(target, kfo.SECONDARY, True)

    def _ensure_positions(self, start: kofs.Offsets) -> None:
        """Make sure the position before every start offset is known (readers record it for the ranges
        they read; offsets read before failover was configured have none): fetch the missing ones."""
        for topic, parts in start.items():
            for part, offset in parts.items():
                if self._positioned.get((topic, part)) == offset:
                    continue
                try:
                    if not kfo.has_position(self.cfg.positions_dir, topic, int(part), offset):
                        kfo.record_position(self._consumer(), self.cfg.positions_dir, topic, int(part), offset)
                except SourceError as exc:  # e.g. deleted by retention: failover uses start_from there
                    log.warning("%s[%s]: cannot record the position before offset %d: %s", topic, part, offset,
                                exc.message)
                self._positioned[(topic, part)] = offset  # one entry per partition: no growth over a long run

    def _position(self, start: kofs.Offsets, tp: TopicPartition) -> kfo.Position | None:
        offset = start.get(tp.topic, {}).get(str(tp.partition))
        if offset is None or not self.cfg.positions_dir:
            return None
        return kfo.find_position(self.cfg.positions_dir, tp.topic, tp.partition, offset)

    # The driver-side clients must not travel to executors with the pickled reader.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_clients"] = {}
        return state

    def _drop_clients(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients = {}

    def _consumer(self, cluster: str = kfo.PRIMARY) -> Consumer:
        if cluster not in self._clients:
            self._clients[cluster] = kofs.driver_consumer(self.cfg.bootstrap(cluster), self.cfg.consumer_config)
        return self._clients[cluster]

    def _partitions(self, cluster: str = kfo.PRIMARY) -> list[TopicPartition]:
        return kofs.partitions_of(self._consumer(cluster), self.cfg.topics, self.cfg.bootstrap(cluster),
                                  proto_class=self.cfg.proto_class)

    def _ends(self, cluster: str = kfo.PRIMARY) -> kofs.Offsets:
        ends, self._newest_ms = kofs.probe_ends(self._consumer(cluster), self._partitions(cluster))
        return ends

    def _cluster_of(self, offsets: dict) -> tuple[str, kofs.Offsets]:
        cluster, bare = kfo.split_cluster(offsets)
        if cluster == kfo.SECONDARY and not self.cfg.failover:
            raise SourceError(f"the checkpoint of {self.cfg.topics} is on the secondary cluster, but the spec "
                              "names no failover cluster", hint="put failover back in the spec, or start "
                              "a new checkpoint (there is no automatic failback)")
        return cluster, bare

    def initialOffset(self) -> dict:
        tps = self._partitions()
        how = self.cfg.start_from.strip().lower()
        if how == "earliest":
            return kfo.tag(kofs.beginning_offsets(self._consumer(), tps), kfo.PRIMARY, self.cfg.failover)
        if how.startswith("{"):  # {topic: {partition: offset}}: where a fused group's last generation stopped
            given = json.loads(self.cfg.start_from)
            firsts = kofs.beginning_offsets(self._consumer(), tps)
            return kfo.tag({t: {p: int((given.get(t) or {}).get(p, o)) for p, o in parts.items()}
                            for t, parts in firsts.items()}, kfo.PRIMARY, self.cfg.failover)
        ends = kofs.end_offsets(self._consumer(), tps)
        if how == "latest":
            return kfo.tag(ends, kfo.PRIMARY, self.cfg.failover)
        found = kofs.offsets_for_time(self._consumer(), tps, kofs.parse_start_time(self.cfg.start_from), ends)
        return kfo.tag(found, kfo.PRIMARY, self.cfg.failover)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.cfg.max_records_per_batch
        return ReadMaxRows(n) if n > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        cluster, bare = self._cluster_of(start)
        if not self._available_now and self._pacer.hold():
            return start  # no new data: Spark closes the windows the last batch's watermark passed in a short batch
        try:
            if self._available_now and (self._target is None or self._target[0] != cluster):
                self._target = (cluster, self._ends(cluster))  # the end of "now", once per cluster
            end = self._target[1] if self._target is not None else self._ends(cluster)
        except SourceError as exc:
            return self._during_outage(start, exc)
        self._outage_since = None
        if self.cfg.positions_dir and kfo.read_active(self.cfg.positions_dir) != cluster:
            kfo.write_active(self.cfg.positions_dir, cluster, self.cfg.bootstrap(cluster))
        if self.cfg.positions_dir and cluster == kfo.PRIMARY:
            self._ensure_positions(bare)
        planned = self._plan_end(cluster, bare, end, limit)
        newest = _newest_read(planned, end, self._newest_ms)
        if _advances(bare, planned):
            now = time.monotonic()
            newest_s = newest / 1000 if newest is not None else None
            if not self._available_now and not self._pacer.worth_reading(newest_s, now):
                return start  # read at window close: the records wait until they close a window
            self._pacer.planned(newest_s, now)
        return kfo.tag(planned, cluster, self.cfg.failover)

    def _plan_end(self, cluster: str, start: kofs.Offsets, end: kofs.Offsets, limit: ReadLimit) -> kofs.Offsets:
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
        begin = (kofs.beginning_offsets(self._consumer(cluster), self._partitions(cluster))
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
        (from_cluster, start_), (cluster, end_) = self._cluster_of(start), self._cluster_of(end)
        if from_cluster != cluster:
            return []  # the failover micro-batch: it only moves the offsets to the secondary
        out: list[OffsetRange] = []
        step = max(self.cfg.split_records, 1)
        for topic, parts in end_.items():
            for part, hi in parts.items():
                lo = start_.get(topic, {}).get(part, 0)
                for s in range(lo, hi, step):
                    out.append(OffsetRange(topic, int(part), s, min(s + step, hi), cluster, lo))
        # a split range keeps a task of its own (unless max_tasks says otherwise)
        return pack_ranges(out, min(self.cfg.pack_records, step), self.cfg.max_tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from read_partition(self.cfg, partition)

    def commit(self, end: dict) -> None:
        """Spark has committed everything before ``end``: publish that data's bad records, and forget
        the positions of ranges before it."""
        cluster, offsets = self._cluster_of(end)
        if self.cfg.positions_dir and cluster == kfo.PRIMARY:
            kfo.prune_positions(self.cfg.positions_dir, offsets)
        if self.cfg.bad_records == "dead-letter" and self.cfg.bad_records_dir:
            publish_dead_letters(self.cfg.bad_records_dir, self.cfg.bootstrap(cluster),
                                 self.cfg.dead_letter_topic, self.cfg.consumer_config)

    def stop(self) -> None:
        self._drop_clients()


def _ahead_of_end(start: dict, end: kofs.Offsets) -> set[tuple[str, str]]:
    return {(t, p) for t, ps in end.items() for p, hi in ps.items() if start.get(t, {}).get(p, 0) > hi}


def _has_new(start: dict, end: kofs.Offsets) -> bool:
    return any(p not in start.get(t, {}) for t, ps in end.items() for p in ps)


def _newest_read(planned: kofs.Offsets, end: kofs.Offsets, newest_ms: dict[tuple[str, int], int]) -> int | None:
    """Return the time of the newest probed record that ``planned`` reads: over the partitions it reads to
    their end (a batch capped by a read limit does not reach the probed record)."""
    times = [newest_ms[(t, int(p))] for t, ps in planned.items() for p, hi in ps.items()
             if (t, int(p)) in newest_ms and hi >= end.get(t, {}).get(p, hi + 1)]
    return max(times, default=None)


def _advances(start: kofs.Offsets, end: kofs.Offsets) -> bool:
    """Whether ``end`` reads anything past ``start`` (a new partition counts from 0)."""
    return any(hi > start.get(t, {}).get(p, 0) for t, ps in end.items() for p, hi in ps.items())


# ---- executor side ---------------------------------------------------------------------------

_CONSUMERS: dict[str, tuple[Consumer, ClientLog]] = {}
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
    return configured if level == 0 else max(configured, PATIENT_WAITS_MS[min(level, len(PATIENT_WAITS_MS) - 1)])


def _executor_consumer(cfg: SourceConfig, bootstrap: str, level: int = 0) -> tuple[Consumer, ClientLog]:
    """One consumer per Python worker, cluster and patience level, reused across tasks (workers are reused
    by Spark), with the log of what librdkafka said."""
    key = _consumer_key(cfg, bootstrap, level)
    cached = _CONSUMERS.get(key)
    if cached is None:
        said = ClientLog()
        consumer = Consumer({
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
            "logger": said.logger(bootstrap),
            "error_cb": said.error,
            **(cfg.consumer_config or {}),
            # A task's ranges are known to hold their records, so a fetch never has to wait for new
            # ones; but a newly assigned partition is fetched only once the broker has answered the
            # fetch in flight, which it may hold this long: with 100 ms, every range a task read cost
            # 100 ms of waiting, and 10 light daggers kept both task slots of a shared host waiting.
            # But tansu also stops looking for the records when this time is up and answers empty: past
            # some thousands of record batches in a partition (fewer on a busy machine) a 2-ms fetch
            # never got a record. A stall makes the worker's consumer more patient (_fresh_consumer).
            "fetch.wait.max.ms": fetch_wait_ms(cfg, level),
        })
        cached = _CONSUMERS[key] = (consumer, said)
    return cached


def _fresh_consumer(cfg: SourceConfig, bootstrap: str, topic: str, patient: bool = False
                    ) -> tuple[Consumer, ClientLog]:
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
    next_offset = rng.start
    shift: int | None = None  # secondary offset - primary offset, once the range moved to the secondary
    payloads: list[bytes | None] = []
    offs: list[int] = []
    bad: list[dict[str, Any]] = []
    last: Any = None  # the last record read (its position is recorded for failover)
    last_offset = -1
    starved = starvation()
    watch = StallWatch(cfg.read_timeout_s, lost_at_progress=starved.lost())
    try:
        while next_offset < rng.end:
            msgs = consumer.consume(num_messages=min(FETCH_BATCH, rng.end - next_offset), timeout=1.0)
            moved = 0 if shift is None else shift
            progressed = False
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        progressed = True
                        if cast(int, msg.offset()) - moved >= rng.end:  # an end event has its offset
                            next_offset = rng.end
                        continue
                    if err.code() == KafkaError._AUTO_OFFSET_RESET:
                        watch.was_out_of_range()  # assigned again below
                        continue
                    if err.retriable() or err.code() in _TRANSIENT:
                        continue  # librdkafka retries on its own; the read timeout bounds the wait
                    raise SourceError(f"reading {rng.topic}[{rng.partition}] failed: {err.str()}")
                off = cast(int, msg.offset()) - moved  # a record has its offset
                if off < next_offset:
                    watch.went_back(1)
                    continue
                if off >= rng.end:
                    continue
                payloads.append(msg.value())
                offs.append(off)
                next_offset = off + 1
                last, last_offset = msg, off
                progressed = True
            now = time.monotonic()
            watch.starved(starved.lost())
            if progressed:
                if watch.reseeks:
                    notice(f"{rng.topic}[{rng.partition}] reads again after {watch.stalled_s(now):.1f} s "
                           f"without records (range {rng.start}..{rng.end}; {watch.describe()})")
                watch.moved(now, starved.lost())
            elif (shift is None and cfg.failover and rng.cluster == kfo.PRIMARY
                  and watch.stalled_s(now) > min(cfg.failover_after_s, cfg.read_timeout_s)):
                shift = _shift_to_secondary(cfg, rng, next_offset, watch.stalled_s(now))
                consumer.unassign()
                bootstrap = cfg.failover_bootstrap_servers
                consumer, said = _executor_consumer(cfg, bootstrap, patience(cfg, bootstrap, rng.topic))
                consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset + shift)])
                watch.moved(time.monotonic(), starved.lost())
                continue
            elif watch.timed_out(now):
                raise SourceError(
                    f"no records from {rng.topic}[{rng.partition}] at offset {next_offset} for "
                    f"{cfg.read_timeout_s:.0f} s (range {rng.start}..{rng.end}; {watch.describe()}; "
                    f"the client said: {said.said()})")
            elif watch.reseek_due(now):
                patient = watch.needs_patience()
                if not watch.reseeks:
                    notice(_stall_notice(cfg, bootstrap, rng, next_offset, watch, said, patient, now))
                consumer.unassign()
                consumer, said = _fresh_consumer(cfg, bootstrap, rng.topic, patient)
                consumer.assign([TopicPartition(rng.topic, rng.partition, next_offset + moved)])
                watch.reseeked(now)
            if len(payloads) >= FETCH_BATCH:
                yield _decode(cfg, decoder, rng, payloads, offs, bad)
                payloads, offs = [], []
        if payloads:
            yield _decode(cfg, decoder, rng, payloads, offs, bad)
    finally:
        consumer.unassign()
    if bad:
        _record_bad(cfg, rng, bad)
    if last is not None and cfg.positions_dir and rng.cluster == kfo.PRIMARY:
        kfo.write_position(cfg.positions_dir, rng.topic, rng.partition, rng.start, rng.end,
                           kfo.Position(last_offset, last.timestamp()[1], kfo.fingerprint(last.key(), last.value()),
                                        moved=shift is not None))


def _shift_to_secondary(cfg: SourceConfig, rng: OffsetRange, next_offset: int, waited: float) -> int:
    """Return how far the secondary's offsets of ``rng``'s partition are from the primary's, found
    from the position recorded at the batch's start (``rng.anchor``). Raises SourceError when the
    secondary cannot be reached."""
    pos = kfo.find_position(cfg.positions_dir, rng.topic, rng.partition, rng.anchor) if cfg.positions_dir else None
    consumer = kofs.driver_consumer(cfg.failover_bootstrap_servers, cfg.consumer_config)
    try:
        tp = TopicPartition(rng.topic, rng.partition)
        start = kfo.secondary_start(consumer, [tp], {(rng.topic, rng.partition): pos}, cfg.start_from)
    finally:
        consumer.close()
    shift = start[rng.topic][str(rng.partition)] - rng.anchor
    print(f"daggers: FAILOVER of {rng.topic}[{rng.partition}] range {rng.start}..{rng.end}: no records from the "
          f"primary {cfg.bootstrap_servers} for {waited:.0f} s; reading offsets {next_offset + shift}.."
          f"{rng.end + shift} on the secondary {cfg.failover_bootstrap_servers}", file=sys.stderr)
    return shift


_TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def _stall_notice(cfg: SourceConfig, bootstrap: str, rng: OffsetRange, next_offset: int, watch: StallWatch,
                  said: ClientLog, patient: bool, now: float) -> str:
    """The line a range read logs when it first assigns its partition again."""
    level = patience(cfg, bootstrap, rng.topic) + 1
    how = f"on a new consumer with fetch.wait.max.ms {fetch_wait_ms(cfg, level)}" if patient else "on a new consumer"
    return (f"no records from {rng.topic}[{rng.partition}] at offset {next_offset} for {watch.stalled_s(now):.1f} s "
            f"(range {rng.start}..{rng.end}); assigning it again {how} ({watch.describe()}; "
            f"the client said: {said.said()})")


def _decode(cfg: SourceConfig, decoder: ArrowDecoder, rng: OffsetRange, payloads: list[bytes | None],
            offs: list[int], bad: list[dict[str, Any]]) -> pa.RecordBatch:
    batch, failures = decoder.decode(payloads)
    if failures:
        first = failures[0]
        if cfg.bad_records == "fail":
            raise BadRecordError(rng.topic, rng.partition, offs[first.index], first.reason)
        for f in failures:
            print(f"daggers: bad record {rng.topic}[{rng.partition}]@{offs[f.index]} ({cfg.bad_records}): "
                  f"{f.reason}", file=sys.stderr)
            bad.append({"topic": rng.topic, "partition": rng.partition, "offset": offs[f.index],
                        "error": f.reason, "value_b64": base64.b64encode(payloads[f.index] or b"").decode()})
    return cfg.ordered(cfg.add_derived(batch))


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
    """Register the Kafka data source (``SOURCE_NAME``) with ``spark``, idempotently.

    Spark refuses a name that the thread's *active* session already knows (DATA_SOURCE_ALREADY_EXISTS),
    and a ``newSession()`` child does not inherit its parent's Python data sources: with the parent
    active, the child could neither register the source nor find it. So ``spark`` is made the active
    session while it registers (:func:`job.spark_session.active_session`); ALREADY_EXISTS then means
    it had registered the source itself.
    """
    from job.spark_session import active_session

    with active_session(spark):
        try:
            spark.dataSource.register(DaggerKafkaSource)
        except Exception as exc:  # pyspark's AnalysisException; the class moved between releases
            if "DATA_SOURCE_ALREADY_EXISTS" not in str(exc):
                raise
