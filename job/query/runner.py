"""Run a dagger: Kafka sources → Dagger SQL on Spark Structured Streaming → sinks.

The query's offsets and window state live in ``<checkpoint>/spark``; a restart resumes exactly
where the last committed micro-batch ended. Sinks are idempotent per window, so the batch that
Spark replays after a crash overwrites what it had written.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming import StreamingQuery

from job.errors import DaggerError
from job.query import late
from job.query.events import QueryEvents
from job.query.plan import DaggerPlan, pin_schema, register_plan_functions
from job.schema.registry import SchemaRegistry
from job.sinks import Sink, build_sinks
from job.sinks.base import start_sinks
from job.sources.config import PARTIAL_RECORDS
from job.sources.failover import read_active
from job.sources.kafka import SOURCE_NAME, count_bad_records, register_source, source_options
from job.sources.preflight import wait_for_brokers
from job.spark import jvm as jvm_functions
from job.spark.failure import explain_failure
from job.spark.session import HDFS_STATE_STORE, build_session, running_session
from job.spec import DaggerSpec
from job.sql import Translation
from job.sql.dedup import TIME_COLUMN
from job.sql.pushdown import DERIVED_PREFIX
from job.sql.rewrite import BARRIER_COLUMN
from job.transform import DELAY_KEY, apply_output_transformers, apply_stream_transformers

if TYPE_CHECKING:
    from job.enrich.engine import Enricher

log = logging.getLogger("daggers.runner")

#: Groups an object aggregate (collect_set, i.e. DistinctCount) of a light dagger keeps in its hash map per
#: task before it sorts instead (Spark's default: 128, which a window of S2 cells always passes).
OBJECT_AGG_GROUPS = 100_000
#: The SQL settings of a ``light`` dagger (its spec's spark_conf wins):
#: - whole-stage code generation re-generates its Java source (and cleans its closures) in every
#:   micro-batch, which a batch of a few hundred rows never pays back;
#: - DistinctCount's groups stay in the hash map: 20 light DistinctCount daggers in a shared host, 546 -> 387
#:   core-ms a micro-batch. Not for heavy daggers: at 100,000 events/s (~44,000 groups a task) the batch p50
#:   went 1,265 -> 2,092 ms and the p99 2.96 -> 4.62 s, so they keep Spark's sort.
#: - window state in the JVM's heap (HDFS-backed state store) instead of RocksDB: a light dagger's state is a
#:   window or two of a few thousand events, and each RocksDB instance holds native memory of its own. 20 light
#:   daggers in a shared host: 2,493 -> 2,189 MB PSS at the same CPU (434 and 414 core-ms a micro-batch), though
#:   the JVM's PSS varies by as much between runs; 100: the JVM 2,124 -> 1,801 MB. The provider is fixed when
#:   the checkpoint is made: a dagger made light later keeps the one it has.
LIGHT_STATE_STORE = HDFS_STATE_STORE
LIGHT_SQL_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": str(OBJECT_AGG_GROUPS),
    "spark.sql.streaming.stateStore.providerClass": LIGHT_STATE_STORE,
}


def shown_watermark(watermark: str | None) -> str:
    """Return a query's watermark as a batch's log line shows it: Spark reports the epoch until the first
    batch has seen an event time, which read as if the events were from 1970."""
    return "none yet" if not watermark or watermark.startswith("1970-01-01T00:00:00") else watermark


def batch_rows_per_s(p: dict[str, Any]) -> float:
    """Return the input rate of the batch that Spark progress report ``p`` describes, in rows per second.

    That is Spark's ``inputRowsPerSecond`` (the batch's rows over the time since the previous batch started)
    when Spark has one; for the first batch of a run Spark has no previous batch and reports 0 even after
    reading 100,000 rows, so it is then the batch's rows over the batch's own duration (``triggerExecution``).
    Returns 0.0 for a batch without rows or without a duration."""
    spark_rate = float(p.get("inputRowsPerSecond") or 0.0)
    rows = int(p.get("numInputRows") or 0)
    if spark_rate > 0 or rows <= 0:
        return spark_rate
    duration_ms = int((p.get("durationMs") or {}).get("triggerExecution") or 0)
    return rows * 1000.0 / duration_ms if duration_ms > 0 else 0.0


#: The observed metric (Spark's ``Dataset.observe``) that adds up the records a source that aggregates first
#: (:mod:`job.sql.partial`) read in a micro-batch: its rows are groups, and ``numInputRows`` counts rows.
RECORDS_METRIC = "dagger_records"


def observed_records(p: dict[str, Any]) -> int | None:
    """Return the records the micro-batch of progress report ``p`` read, as its streams' frames observed them
    (:data:`RECORDS_METRIC`); None when no frame observes them."""
    seen = [
        int((m or {}).get("records") or 0)
        for name, m in (p.get("observedMetrics") or {}).items()
        if name.startswith(RECORDS_METRIC)
    ]
    return sum(seen) if seen else None


@dataclass
class Progress:
    """The job's counters, updated after every micro-batch and saved to ``<checkpoint>/status.json``.

    ``sinks`` holds each sink's metrics (:class:`job.sinks.base.SinkMetrics`); while a sink retries a
    write, its entry has ``retrying`` ({attempt, of, next_at, since, error}), written at each retry."""

    batches: int = 0
    input_rows: int = 0
    late_rows_dropped: int = 0
    # the late records are a fused member's stream's, before its WHERE: at most that many were its own
    late_before_filter: bool = False
    bad_records: int = 0
    last_batch_id: int = -1
    last_input_rows: int = 0
    input_rows_per_s: float = 0.0
    processed_rows_per_s: float = 0.0
    batch_duration_ms: int = 0
    batch_phases_ms: dict[str, int] = field(default_factory=dict)  # Spark's durationMs of the last batch
    watermark: str | None = None
    sinks: dict[str, Any] = field(default_factory=dict)
    lookups: dict[str, Any] = field(default_factory=dict)  # lookup name -> its metrics (job.enrich.engine)
    kafka_clusters: dict[str, str] = field(default_factory=dict)  # table -> primary|secondary (with failover)
    state: str = "starting"  # starting | running | stopped | failed
    last_error: str | None = None
    updated_at: float = 0.0
    batch_at: float = 0.0  # when the last micro-batch was reported (updated_at also moves on idle events)
    #: the micro-batch in flight, {id, since}, from its start until it is reported (None: none runs)
    running_batch: dict[str, Any] | None = None
    # a fused member held up by its group before its query starts: {"since": epoch s, "by": why}
    held_up: dict[str, Any] | None = None
    # when this run's query started (epoch s): a run is up from then, not from its process's start
    query_started_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _Listener(QueryEvents):
    def __init__(self, on_progress: Callable[[dict[str, Any]], None], on_idle: Callable[[str], None]) -> None:
        self._on_progress = on_progress
        self._on_idle = on_idle

    def on_progress(self, progress: dict[str, Any]) -> None:
        self._on_progress(progress)

    def on_idle(self, query_id: str, run_id: str) -> None:
        self._on_idle(query_id)


def committed_since(spark_dir: Path, last_reported: int) -> tuple[int, int]:
    """Return (records, last batch id) of the batches Spark committed after ``last_reported``, counted
    from the offset log as Kafka records (bad records included); (0, last_reported) when there are none
    or their offsets cannot be read."""
    from job.query.offset_log import batch_offsets, committed_batches, lag_of

    newer = [b for b in committed_batches(spark_dir) if b > last_reported]
    if last_reported < 0 or not newer:
        return 0, last_reported
    rows, last = 0, last_reported
    for batch in newer:
        start, end = batch_offsets(spark_dir, batch - 1), batch_offsets(spark_dir, batch)
        if start is None or end is None:
            break
        rows += lag_of(start, end)
        last = batch
    return rows, last


def stream_frame(
    spark: SparkSession, plan: DaggerPlan, index: int, bounds: tuple[str, str] | None = None
) -> DataFrame:
    """Return the streaming DataFrame of the plan's stream ``index`` as its SQL reads it: the Kafka
    source, ``rowtime`` with its watermark, the stream's transformers, and the watermark barrier
    column (see :func:`job.sql.rewrite.add_watermark_barrier`, which keeps a WHERE above the watermark).
    With ``bounds`` (start, end: offsets as JSON, see :class:`job.sources.kafka.KafkaBatchReader`), the
    same frame over those records only, as a batch DataFrame.
    """
    stream = plan.streams[index]
    options = source_options(stream.source)
    if bounds is None:
        df = spark.readStream.format(SOURCE_NAME).options(**options).load()
    else:
        df = (
            spark.read.format(SOURCE_NAME)
            .options(
                **{**options, "start_from": bounds[0], "end_at": bounds[1], "max_records_per_batch": "0"}
            )
            .load()
        )
    ts = F.col(stream.timestamp_field)
    if stream.timestamp_kind == "int64":
        ts = F.timestamp_millis(ts)
    watermarked = df.withColumn("rowtime", ts).withWatermark(
        "rowtime", f"{plan.spec.watermark_delay_ms} milliseconds"
    )
    watermarked = apply_stream_transformers(watermarked, plan.spec.streams[index])
    if stream.source.partial:  # its rows are groups: add up the records they stand for (observed_records)
        watermarked = watermarked.observe(
            f"{RECORDS_METRIC}_{index}", F.sum(PARTIAL_RECORDS).cast("long").alias("records")
        )
    # the records per window (those its WHERE keeps), which count the records dropped as late (job.query.late);
    # a fused group observes its stream itself (job.shared.fusion.group_frame)
    window_ms = plan.translation.late_window_ms if plan.spec.isolation != "fused" else None
    if window_ms and bounds is None and jvm_functions.available(spark):
        watermarked = late.observe_windows(
            watermarked, index, bool(stream.source.partial), window_ms, plan.translation.late_where
        )
    # spark_partition_id(), not rand(): Spark reseeds rand() in every micro-batch, and the seed is a
    # literal of the generated code, which then compiles again in every batch.
    return watermarked.withColumn(BARRIER_COLUMN, F.spark_partition_id())


def register_stream_views(spark: SparkSession, plan: DaggerPlan) -> None:
    """Register each stream of ``plan`` as the temporary view its SQL names (:func:`stream_frame`);
    the Kafka source must be registered with ``spark`` first."""
    for i, stream in enumerate(plan.streams):
        stream_frame(spark, plan, i).createOrReplaceTempView(stream.table)
    register_dedup_views(spark, plan.translation)


def register_dedup_views(spark: SparkSession, translation: Translation) -> None:
    """Register each deduplicated subquery of the query (:mod:`job.sql.dedup`) as the view its SQL names: the
    subquery's rows without duplicate keys (the first to arrive; late rows dropped; keys kept for good).

    Spark's ``dropDuplicates`` keeps late rows when the keys leave out the event time;
    ``dropDuplicatesWithinWatermark`` drops them, and keeps a key until the watermark passes its first row's
    time plus the column's delay: lent :data:`KEEP_KEYS_MS` for that (the column gets its own back)."""
    for dedup in translation.dedups:
        df = spark.sql(dedup.spark_sql)
        metadata = dict(df.schema[TIME_COLUMN].metadata)
        kept = F.col(TIME_COLUMN).alias(TIME_COLUMN, metadata={**metadata, DELAY_KEY: KEEP_KEYS_MS})
        out = df.withColumn(TIME_COLUMN, kept).dropDuplicatesWithinWatermark(dedup.keys)
        out.withColumn(
            TIME_COLUMN, F.col(TIME_COLUMN).alias(TIME_COLUMN, metadata=metadata)
        ).createOrReplaceTempView(dedup.view)


#: How long a deduplication keeps a key, in event time: for good (a century), as Flink without a state TTL.
KEEP_KEYS_MS = 100 * 365 * 86_400_000


def query_sql_conf(spec: DaggerSpec) -> dict[str, str]:
    """Return the SQL settings a dagger's query runs with: :data:`LIGHT_SQL_CONF` for a ``light`` one, then
    the spec's own ``spark.sql.*`` (which win)."""
    return {
        **(LIGHT_SQL_CONF if spec.light else {}),
        **{k: v for k, v in spec.spark_conf.items() if k.startswith("spark.sql.")},
    }


def eviction_conf(plan: DaggerPlan, available_now: bool = False) -> dict[str, str]:
    """Return the setting that turns off Spark's micro-batches without new data for a query whose sources
    gather (``read_pacing: gather``): Spark runs one after every batch that moved the watermark, which after
    every gathered read was one more micro-batch (planning, the state store's scan and commit) that closed no
    window. Its sources ask for the batches that do close one (job.sources.kafka.TICK_KEY). Nothing for a run
    of all input (``available_now``), whose last windows close in such batches."""
    if available_now or not any(s.source.gather_ms > 0 for s in plan.streams):
        return {}
    return {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}


@contextmanager
def session_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set SQL ``settings`` on ``spark`` for the block, then put back what was there (a shared or warm
    session's other queries keep their own settings)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, was in before.items():
            if was is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, was)


class DaggerJob:
    """A running (or runnable) dagger on a SparkSession."""

    def __init__(self, plan: DaggerPlan, spark: SparkSession, sinks: list[Sink] | None = None) -> None:
        self.plan = plan
        self.spark = spark
        schema = SchemaRegistry.from_b64(plan.streams[0].source.descriptor_set_b64) if plan.streams else None
        self.sinks = sinks if sinks is not None else build_sinks(plan.spec.sinks, schema, plan.spec.name)
        self.enricher = _enricher(plan)
        self.query: StreamingQuery | None = None
        self._interval_s = 1.0  # the query's trigger interval, set when it starts
        self.progress = self._load_progress()
        self._lock = threading.Lock()
        self._ended = False  # set once the job is marked stopped or failed
        self.batch_error: DaggerError | None = None  # what the last failed batch raised in foreachBatch
        self._listener: _Listener | None = None
        self._seen: set[tuple[str, int]] = set()
        self.batch_listeners: list[Callable[[Progress], None]] = []
        self.log_batches = True  # a fused group's members but one leave the batch lines to it
        self._partial = any(s.source.partial for s in plan.streams)  # rows are groups, not records
        for sink in self.sinks:
            sink.retry_listener = self.on_sink_retry

    # ---- status file --------------------------------------------------------------------------

    @property
    def status_path(self) -> Path:
        return self.plan.checkpoint / "status.json"

    def _load_progress(self) -> Progress:
        try:
            data = json.loads(self.status_path.read_text())
            progress = Progress(**{k: v for k, v in data.items() if k in Progress.__dataclass_fields__})
        except (OSError, ValueError, TypeError):
            return Progress()
        for metrics in progress.sinks.values():  # a retry of a run that is over is no news
            if isinstance(metrics, dict):
                metrics.pop("retrying", None)
        progress.running_batch = None  # nor is its batch in flight
        progress.held_up = None
        progress.query_started_at = None
        # A process killed after Spark committed a batch but before its progress event was counted
        # leaves that batch out of status.json, and Spark does not run it again: count it from the
        # checkpoint's offset log.
        rows, last = committed_since(self.plan.checkpoint / "spark", progress.last_batch_id)
        if last > progress.last_batch_id:
            log.info(
                "counting batches %d..%d (%d rows) committed before the last stop but not reported",
                progress.last_batch_id + 1,
                last,
                rows,
            )
            progress.input_rows += rows
            progress.batches += last - progress.last_batch_id
            progress.last_batch_id = last
        return progress

    def _save_progress(self) -> None:
        self.status_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.status_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.progress.to_dict(), indent=2, default=str))
        tmp.replace(self.status_path)

    def _on_progress(self, p: dict[str, Any]) -> None:
        if self.query is None or p.get("id") != str(self.query.id):
            return
        key = (str(p.get("runId")), int(p.get("batchId", -1)))
        with self._lock:
            if key in self._seen:
                return
            self._seen.add(key)
            pr = self.progress
            pr.batches += 1
            pr.last_batch_id = int(p.get("batchId", -1))
            rows = int(p.get("numInputRows") or 0)
            # records read, where the source aggregates first and hands Spark fewer rows (job.sql.partial)
            counted = observed_records(p) if self._partial else None
            records = rows if counted is None else counted
            scale = records / rows if rows else 1.0
            pr.last_input_rows = records
            pr.input_rows += pr.last_input_rows
            pr.input_rows_per_s = batch_rows_per_s(p) * scale
            pr.processed_rows_per_s = float(p.get("processedRowsPerSecond") or 0.0) * scale
            pr.batch_duration_ms = int((p.get("durationMs") or {}).get("triggerExecution") or 0)
            pr.batch_phases_ms = {str(k): int(v) for k, v in (p.get("durationMs") or {}).items()}
            states = p.get("stateOperators") or []
            for metric in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
                pr.batch_phases_ms[f"state.{metric.removesuffix('TimeMs')}"] = sum(
                    int(s.get(metric) or 0) for s in states
                )
            # records, where the frame observed them per window (job.query.late): Spark counts the (key,
            # window) rows its state operator drops; the watermark for late data is the previous batch's
            windows = late.observed_windows(p)
            pr.late_rows_dropped += (
                late.late_records(windows, pr.watermark)
                if windows is not None
                else sum(int(s.get("numRowsDroppedByWatermark") or 0) for s in p.get("stateOperators") or [])
            )
            pr.late_before_filter = windows is not None and late.counted_before_filter(self.plan)
            pr.watermark = (p.get("eventTime") or {}).get("watermark")
            if pr.running_batch is not None and (
                pr.running_batch.get("planning") or int(pr.running_batch.get("id", -1)) <= pr.last_batch_id
            ):
                pr.running_batch = None
            pr.bad_records = count_bad_records(self.plan.bad_records_dir)
            pr.sinks = {s.name: s.metrics.to_dict() for s in self.sinks}
            if self.enricher is not None:
                pr.lookups = self.enricher.metrics()
            pr.kafka_clusters = {
                s.table: read_active(s.source.positions_dir) for s in self.plan.streams if s.source.failover
            }
            if not self._ended:  # a late listener event must not bring a stopped job back to life
                pr.state = "running"
            pr.updated_at = pr.batch_at = time.time()
            self._save_progress()
        for listener in self.batch_listeners:
            listener(self.progress)
        if self.log_batches and (pr.last_input_rows or pr.late_rows_dropped):
            log.info(
                "%s: batch %d: %d rows in %d ms (%.0f rows/s), late dropped %d, bad %d so far, watermark %s; phases %s",
                self.plan.spec.name,
                pr.last_batch_id,
                pr.last_input_rows,
                pr.batch_duration_ms,
                pr.processed_rows_per_s,
                pr.late_rows_dropped,
                pr.bad_records,
                shown_watermark(pr.watermark),
                " ".join(f"{k}={v}" for k, v in pr.batch_phases_ms.items() if v),
            )

    # ---- start --------------------------------------------------------------------------------

    def _write_batch(self, df: DataFrame, batch_id: int) -> None:
        self.batch_started(batch_id)
        try:
            self.write_rows(self.enrich(df.toArrow(), batch_id), batch_id)
        except DaggerError as exc:  # kept as it is: Spark hands it back as py4j's text (explain_failure)
            self.batch_error = exc
            raise

    def write_rows(self, table: pa.Table, batch_id: int) -> None:
        """Write a micro-batch's (enriched) rows to every sink, in order; a sink's retries are written to
        status.json as they happen (:meth:`on_sink_retry`). Raises the first sink's error."""
        for sink in self.sinks:
            sink.write(table, batch_id)

    def enrich(self, table: pa.Table, batch_id: int) -> pa.Table:
        """Return a micro-batch's rows enriched by the spec's lookups (as they are without lookups).

        Raises EnrichError when a lookup with ``fail_on_errors`` fails."""
        return self.enricher.enrich(table, batch_id) if self.enricher is not None else table

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        """Return the schema the sinks get, given the SQL's result ``schema``: with the lookups' columns.

        Raises SpecError naming a lookup whose key the rows lack."""
        return self.enricher.bind(schema) if self.enricher is not None else schema

    @property
    def query_name(self) -> str:
        """The name of the dagger's streaming query in Spark: its spec name with ``_`` for ``-``."""
        return self.plan.spec.name.replace("-", "_")

    def start(
        self, *, available_now: bool = False, trigger_interval_s: float | None = None
    ) -> StreamingQuery:
        """Start the streaming query and return it; the sinks are opened and bound to the result schema first.

        Raises SinkError when a sink cannot work, before anything is read.
        """
        with session_conf(
            self.spark, {**eviction_conf(self.plan, available_now), **query_sql_conf(self.plan.spec)}
        ):  # the query keeps them: it runs on a clone of the session
            return self._start(available_now, trigger_interval_s)

    def _start(self, available_now: bool, trigger_interval_s: float | None) -> StreamingQuery:
        register_source(self.spark)
        register_plan_functions(self.spark, self.plan)
        self._listener = _Listener(self._on_progress, self._heartbeat)
        self.spark.streams.addListener(self._listener)
        register_stream_views(self.spark, self.plan)
        result = self.spark.sql(self.plan.translation.spark_sql)
        # SELECT * would carry the barrier and the source's derived columns to the sinks
        internal = [c for c in result.columns if c == BARRIER_COLUMN or c.startswith(DERIVED_PREFIX)]
        if internal:
            result = result.drop(*internal)
        result = apply_output_transformers(result, self.plan.spec)
        # Sinks open and check the result's columns (proto fields, table columns) before any data is read.
        start_sinks(self.sinks, self.output_schema(to_arrow_schema(result.schema, timezone="UTC")))
        interval = self.plan.trigger_interval_s if trigger_interval_s is None else trigger_interval_s
        writer = (
            result.writeStream.queryName(self.query_name)
            .outputMode("append")
            .option("checkpointLocation", str(self.plan.checkpoint / "spark"))
            .foreachBatch(self._write_batch)
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime=f"{max(interval, 0.0)} seconds")
        )
        self._interval_s = max(interval, 0.0)
        self.plan.checkpoint.mkdir(parents=True, exist_ok=True)
        pin_schema(self.plan)
        self.query = writer.start()
        self.query_started()
        return self.query

    def _heartbeat(self, query_id: str) -> None:
        """An idle query is alive: refresh ``updated_at`` so health checks do not take it for down.

        Listeners see every query of the session: only this job's query counts."""
        if self.query is None or query_id != str(self.query.id):
            return
        with self._lock:
            if self._ended:
                return
            self.progress.state = "running"
            self.progress.updated_at = time.time()
            self._save_progress()

    def query_started(self) -> None:
        """Record in status.json that the query's first micro-batch is being planned from now: planning the
        first batch after a restart (Spark's offsets, the source's look-ups) can take as long as a batch on a
        busy machine, and that dagger is starting to read, not silent (``running_batch`` with ``planning``,
        cleared by the first batch's report). A plan may find nothing to read yet (its source checks the logs
        first, or nothing waits) and the next trigger plans again: idle events leave it; the health model reads
        it as a batch in flight only while records wait."""
        with self._lock:
            if self._ended:
                return
            now = time.time()
            self.progress.running_batch = {
                "id": self.progress.last_batch_id + 1,
                "since": now,
                "planning": True,
            }
            self.progress.held_up = None
            self.progress.query_started_at = now
            self.progress.updated_at = now
            self._save_progress()

    def held_up(self, why: str) -> None:
        """Record in status.json that this dagger's query cannot start yet, and why (a fused member whose group
        waits for another member's sink): ``held_up`` {since, by}, until its query starts."""
        with self._lock:
            if self._ended:
                return
            now = time.time()
            if self.progress.held_up is None or self.progress.held_up.get("by") != why:
                self.progress.held_up = {"since": now, "by": why}
            self.progress.updated_at = now
            self._save_progress()

    def batch_started(self, batch_id: int) -> None:
        """Record in status.json that micro-batch ``batch_id`` runs from now (``running_batch``) until it is
        reported: a batch that runs long (the first after a restart, on a busy machine) is a dagger reading,
        not one that reads nothing (:func:`job.control.health_model.batch_in_flight`)."""
        with self._lock:
            if self._ended:
                return
            now = time.time()
            self.progress.running_batch = {"id": batch_id, "since": now}
            self.progress.updated_at = now
            self._save_progress()

    def on_sink_retry(self, sink: Sink) -> None:
        """Write a sink's retry (or the end of it) to status.json at once: a write retried for minutes
        would otherwise show nothing until its micro-batch ends (:attr:`Progress.sinks`)."""
        with self._lock:
            if self._ended:
                return
            self.progress.sinks[sink.name] = sink.metrics.to_dict()
            self.progress.updated_at = time.time()
            self._save_progress()

    def mark(self, state: str, error: str | None = None) -> None:
        """Record the job's state (and last error) in status.json."""
        with self._lock:
            self._ended = state in ("stopped", "failed")
            self.progress.state = state
            if self._ended:
                self.progress.running_batch = None
            if (
                self.enricher is not None
            ):  # a lookup that failed the query did so after the last progress event
                self.progress.lookups = self.enricher.metrics()
            if error is not None:
                self.progress.last_error = error
            self.progress.updated_at = time.time()
            self._save_progress()

    def count_read(self, rows: int) -> None:
        """Count ``rows`` records read outside the query's batches (a fused member's catch-up, see
        :mod:`job.shared.catchup`) in status.json's ``input_rows``."""
        with self._lock:
            self.progress.input_rows += rows
            self.progress.updated_at = time.time()
            self._save_progress()

    def sync_progress(self) -> None:
        """Count every batch the query reported, including those whose listener event has not arrived
        (listener events are asynchronous)."""
        if self.query is None:
            return
        for p in self.query.recentProgress:
            self._on_progress(json.loads(p.json) if hasattr(p, "json") else dict(p))

    def settle(self, grace_s: float = 10.0, most_s: float = 45.0) -> None:
        """Wait until the query is idle for a whole trigger interval: at most ``grace_s`` after the trigger in
        progress at the call has ended, and ``most_s`` in all (under a controller's 60-s stop timeout).

        Spark evicts the windows a data batch's watermark closed in the *next* trigger (a no-data
        batch), and it keeps that watermark only in memory: a query stopped between the two would
        resume with the older watermark and hold those windows back until new data arrives. A batch still
        running when the stop comes is waited for: on a busy machine one took 11 s, longer than the grace,
        and the windows of its data stayed unwritten after the dagger moved (no data came after it).

        That trigger has ended when the query is seen idle or reports new progress: triggers back to back
        (a broker that is down makes each wait ~10 s for it) are not one long batch, and a stop then takes
        the grace after the first, not ``most_s``.
        """
        query = self.query
        if query is None or not query.isActive:
            return
        started = time.monotonic()
        deadline = started + grace_s
        first: tuple[Any, Any] | None = _progress_mark(
            query
        )  # while set: the trigger at the call may still run
        idle_since: float | None = None
        while query.isActive:
            now = time.monotonic()
            if now >= min(deadline, started + most_s):
                return
            status = query.status
            active = bool(status.get("isTriggerActive"))
            if first is not None:
                if active and _progress_mark(query) == first:
                    deadline = now + grace_s
                else:
                    first = None
            idle = not active and not status.get("isDataAvailable")
            idle_since = (idle_since or now) if idle else None
            if idle_since is not None and now - idle_since > self._interval_s + 0.5:
                return
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the query gracefully, once the windows its last batch closed are written (see
        :meth:`settle`); a batch in progress then is re-run from the checkpoint next time."""
        if self.query is not None and self.query.isActive:
            self.settle()
            self.query.stop()
        self.sync_progress()
        if self._listener is not None:
            self.spark.streams.removeListener(self._listener)
            self._listener = None
        for sink in self.sinks:
            sink.close()
        if self.enricher is not None:
            self.enricher.close()


def _progress_mark(query: Any) -> tuple[Any, Any]:
    """Return what tells the query's last progress report from the next: its batch and trigger time."""
    last = query.lastProgress
    return (last.batchId, last.timestamp) if last is not None else (None, None)


def _enricher(plan: DaggerPlan) -> Enricher | None:
    """Return the enricher of a plan's lookups, keeping each batch's answers in its checkpoint (None without
    lookups)."""
    if not plan.spec.lookups:
        return None
    from job.enrich.engine import Enricher
    from job.enrich.replay import ReplayStore

    return Enricher(plan.spec.lookups, ReplayStore(plan.checkpoint / "lookups", plan.checkpoint / "spark"))


def _wait_for_brokers_or_ctrl_c(plan: DaggerPlan) -> None:
    """Wait for the plan's brokers; Ctrl-C raises KeyboardInterrupt, and is also kept in a flag the wait checks
    every round (in the main thread; elsewhere the wait is plain)."""
    sources = [s.source for s in plan.streams]
    if threading.current_thread() is not threading.main_thread():
        wait_for_brokers(sources)
        return
    interrupted = threading.Event()

    def _interrupt(signum: int, frame: Any) -> None:
        interrupted.set()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        wait_for_brokers(sources, interrupted=interrupted)
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def run_foreground(
    plan: DaggerPlan,
    *,
    master: str = "local[*]",
    available_now: bool = False,
    trigger_interval_s: float | None = None,
    max_seconds: float | None = None,
    spark: SparkSession | None = None,
) -> Progress:
    """Run a dagger until Ctrl-C/SIGTERM (or ``max_seconds``, or all input with ``available_now``).

    Returns the final progress. Raises DaggerError with a readable message when the query fails.
    Ctrl-C (SIGINT) stops it as SIGTERM does; a second Ctrl-C interrupts the graceful stop.
    """
    _wait_for_brokers_or_ctrl_c(plan)  # an unreachable broker delays the start, up to max_outage_s
    spark = spark or running_session()
    own_session = spark is None
    spark = spark or build_session(
        f"dagger-{plan.spec.name}",
        master=master,
        shuffle_partitions=plan.spec.parallelism,
        extra=plan.spec.spark_conf,
    )
    job = DaggerJob(plan, spark)
    stopping = threading.Event()

    def _terminate(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()

    previous = (
        signal.signal(signal.SIGTERM, _terminate)
        if threading.current_thread() is threading.main_thread()
        else None
    )
    previous_int = signal.signal(signal.SIGINT, _terminate) if previous is not None else None
    try:
        query = job.start(available_now=available_now, trigger_interval_s=trigger_interval_s)
        job.mark("running")
        deadline = time.monotonic() + max_seconds if max_seconds else None
        while query.isActive and not stopping.is_set():
            if deadline and time.monotonic() > deadline:
                break
            query.awaitTermination(0.5)  # type: ignore[arg-type]  # Spark takes seconds as a float
        failure = query.exception()
        if failure is not None:
            raise explain_failure(failure, job.batch_error)
    except KeyboardInterrupt:
        pass
    except DaggerError as exc:
        job.mark("failed", f"{exc.title}: {exc.message}")
        raise
    except Exception as exc:
        err = explain_failure(exc, job.batch_error)
        job.mark("failed", f"{err.title}: {err.message}")
        raise err from None
    finally:
        try:
            job.stop()
        except Exception as exc:  # noqa: BLE001 - a JVM that is gone: the run's own error is what is said
            log.debug("the query could not be stopped cleanly: %s", explain_failure(exc).message)
        if job.progress.state != "failed":
            job.mark("stopped")
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
        if own_session:
            _stop_session(spark)
    return job.progress


def _stop_session(spark: SparkSession) -> None:
    """Stop the session this run built; a JVM that is already gone (killed, crashed) is logged, not raised: the
    run's own error, if any, is what the user reads."""
    try:
        spark.stop()
    except Exception as exc:  # noqa: BLE001 - py4j's errors, or the socket's to a JVM that is gone
        log.debug("the Spark session could not be stopped, its JVM is gone: %s", type(exc).__name__)
