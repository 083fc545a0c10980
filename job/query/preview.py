"""Preview a dagger: run its SQL once over the recent records of its topics and return the first rows.

Nothing is deployed, no consumer group is joined or committed, and no checkpoint is written: the
topics are read as a bounded batch (the last ``minutes`` of records, at most ``max_records`` per
partition), so a preview is safe to run against production topics at any time.
"""

from __future__ import annotations

import dataclasses
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from job.common.words import counted
from job.errors import DaggerError
from job.query.plan import plan, register_plan_functions
from job.sources.kafka import SOURCE_NAME, register_source, source_options
from job.spec import DaggerSpec
from job.sql.pushdown import DERIVED_PREFIX
from job.sql.rewrite import BARRIER_COLUMN

#: How often a running preview reports its progress.
PROGRESS_EVERY_S = 0.5


@dataclass(frozen=True)
class PreviewProgress:
    """Where a running preview is: its time so far and the Spark stages and tasks of its jobs."""

    elapsed_s: float
    stages_done: int = 0
    stages: int = 0
    tasks_done: int = 0
    tasks: int = 0
    #: What is said before a Spark job has begun (or when the stages cannot be seen: a preview in the server).
    waiting: str = "planning the read"

    def text(self) -> str:
        """Return it for a person: ``12 s · Spark stage 2 of 3 · 3 of 4 tasks done`` (``planning the read`` before a
        job has begun)."""
        if not self.stages:
            return f"{self.elapsed_s:.0f} s · {self.waiting}"
        stage = min(self.stages_done + 1, self.stages)
        return (
            f"{self.elapsed_s:.0f} s · Spark stage {stage} of {self.stages} · "
            f"{self.tasks_done} of {counted(self.tasks, 'task')} done"
        )


def spark_progress(spark: SparkSession, group: str, started: float) -> PreviewProgress:
    """Return the progress of the Spark jobs of job group ``group`` (stages and tasks, from the status
    tracker), ``started`` being the ``time.monotonic()`` the preview began at."""
    tracker = spark.sparkContext.statusTracker()
    stages_done = stages = tasks_done = tasks = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job else []:
            stage = tracker.getStageInfo(stage_id)
            stages += 1
            if stage is None:  # not submitted yet, or skipped (its output reused) in a job that is done
                stages_done += job is not None and job.status == "SUCCEEDED"
                continue
            tasks += stage.numTasks
            tasks_done += stage.numCompletedTasks
            stages_done += stage.numTasks > 0 and stage.numCompletedTasks >= stage.numTasks
    return PreviewProgress(time.monotonic() - started, stages_done, stages, tasks_done, tasks)


@contextmanager
def ticking(
    report: Callable[[PreviewProgress], None],
    sample: Callable[[], PreviewProgress],
    first: PreviewProgress,
    last: Callable[[], PreviewProgress] | None = None,
) -> Iterator[None]:
    """Call ``report`` with ``first`` at once, with ``sample()`` every :data:`PROGRESS_EVERY_S` while the
    block runs (from a thread of its own), and with ``last()`` (default ``sample()``) once at its end."""
    done = threading.Event()

    def poll() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            report(sample())

    report(first)
    poller = threading.Thread(target=poll, name="preview-progress", daemon=True)
    poller.start()
    try:
        yield
    finally:
        done.set()
        poller.join()
        report((last or sample)())


@contextmanager
def reporting(spark: SparkSession, on_progress: Callable[[PreviewProgress], None] | None) -> Iterator[None]:
    """Run the block's Spark jobs in a job group of their own and call ``on_progress`` with their progress
    at once, every :data:`PROGRESS_EVERY_S` while the block runs, and once at its end."""
    if on_progress is None:
        yield
        return
    sc, group, started = spark.sparkContext, f"daggers-preview-{uuid.uuid4().hex}", time.monotonic()
    sc.setJobGroup(group, "daggers preview")
    try:
        with ticking(on_progress, lambda: spark_progress(spark, group, started), PreviewProgress(0.0)):
            yield
    finally:
        # None clears a property (PySpark's stub says str)
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]


def _enriched(spec: DaggerSpec, rows: pa.Table) -> pa.Table:
    """Return ``rows`` with the spec's lookups applied, as the sinks would get them (nothing is kept for a
    replay). Raises EnrichError when a lookup with fail_on_errors fails."""
    if not spec.lookups:
        return rows
    from job.enrich.engine import Enricher

    enricher = Enricher(spec.lookups)
    try:
        enricher.bind(rows.schema)
        return enricher.enrich(rows, 0)
    finally:
        enricher.close()


def preview(
    spec: DaggerSpec,
    *,
    minutes: float = 5,
    limit: int = 100,
    max_records: int = 100_000,
    spark: SparkSession | None = None,
    on_progress: Callable[[PreviewProgress], None] | None = None,
) -> pa.Table:
    """Return up to ``limit`` result rows of ``spec``'s SQL over the events of the last ``minutes``
    (by event time) in its topics; ``on_progress`` hears how it goes while it runs (see :func:`reporting`).

    Windows are shown whether or not they have closed; the spec's lookups are applied (their servers are
    asked). Raises SqlError/SchemaError/SpecError for a spec that cannot run, SourceError when a broker or
    topic cannot be read, EnrichError when a lookup with fail_on_errors fails.
    """
    from job.query.runner import register_dedup_views
    from job.spark.failure import explain_failure
    from job.spark.session import build_session, running_session

    # Spark aggregates every record: a source that aggregates first (job.sql.partial) would hand over groups,
    # which the filter on the last minutes below cannot cut at the right record
    p = plan(spec, Path(tempfile.gettempdir()) / "daggers-preview", features={"partial_aggregation": "spark"})
    spark = spark or running_session()
    own = spark is None
    base = spark or build_session(f"preview-{spec.name}", shuffle_partitions=spec.parallelism)
    # The base session itself (register_source works in a newSession() child too now that it registers
    # with the child active, but a child costs a session's state). Replacing a temp view does not touch
    # a streaming query already started on it.
    session = base
    since_ms = int((time.time() - minutes * 60) * 1000)
    try:
        with reporting(session, on_progress):
            register_source(session)
            register_plan_functions(session, p)
            for stream in p.streams:
                cfg = dataclasses.replace(
                    stream.source,
                    start_from=str(since_ms),
                    max_records_per_batch=max_records,
                    bad_records="skip",
                    bad_records_dir="",
                )
                df = session.read.format(SOURCE_NAME).options(**source_options(cfg)).load()
                ts = F.col(stream.timestamp_field)
                if stream.timestamp_kind == "int64":
                    ts = F.timestamp_millis(ts)
                # Offsets-for-times bounds the read (brokers such as tansu stamp append time, not event
                # time); the rows shown are those whose event time is in the last ``minutes``.
                recent = df.withColumn("rowtime", ts).where(
                    F.col("rowtime") >= F.timestamp_millis(F.lit(since_ms))
                )
                recent.withColumn(BARRIER_COLUMN, F.lit(0.0)).createOrReplaceTempView(stream.table)
            register_dedup_views(session, p.translation)
            result = session.sql(p.translation.spark_sql)
            # SELECT * would carry the barrier and the source's derived columns to the sinks
            internal = [c for c in result.columns if c == BARRIER_COLUMN or c.startswith(DERIVED_PREFIX)]
            if internal:
                result = result.drop(*internal)
            return _enriched(spec, result.limit(limit).toArrow())
    except DaggerError:
        raise
    except Exception as exc:
        raise explain_failure(exc) from None
    finally:
        if own:
            base.stop()
