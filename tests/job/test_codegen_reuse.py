"""A running dagger compiles its generated code once: later micro-batches reuse the classes (real
broker, Spark and InfluxDB). Spark gives every expression with a random seed a new seed in every
micro-batch, and the seed is a literal of the generated code; the watermark barrier (job.sql.rewrite)
once was such an expression, and each batch of each dagger compiled its code again."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from job.query.plan import plan
from job.query.runner import DaggerJob
from tests.helpers import influx_points, live_feed, make_spec, topic_and_db, unique, wait_until
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

PASS_SQL = """SELECT customer_id AS tag_customer_id, fare_idr, rowtime AS window_timestamp
FROM data_stream WHERE status <> ''"""
WINDOW_SQL = """SELECT COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '1' SECOND) AS window_timestamp
FROM data_stream WHERE status <> '' GROUP BY TUMBLE(rowtime, INTERVAL '1' SECOND)"""


def _compilations(spark) -> int:  # type: ignore[no-untyped-def]
    """Return how many classes Spark's code generator has compiled in this JVM."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


# A window's state store compiles, in every micro-batch, the predicate that evicts the windows the
# watermark closed (the watermark is a literal of its code): a small class of Spark's, at most one a batch.
# A light dagger runs without whole-stage code generation (its Java source is generated again in every
# micro-batch): its plan has no whole-stage code (no "*(1)" marks), and it compiles no more than the others.
@pytest.mark.parametrize(
    ("sql", "per_batch", "light"),
    [(PASS_SQL, 0, False), (WINDOW_SQL, 1, False), (PASS_SQL, 0, True), (WINDOW_SQL, 1, True)],
    ids=["pass-through", "window", "light-pass-through", "light-window"],
)
def test_later_micro_batches_compile_no_code(
    spark,
    tansu_broker,
    influxdb,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    sql: str,
    per_batch: int,
    light: bool,
) -> None:
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "codegen", partitions=1)
    spec, _ = make_spec(
        name=unique("codegen"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=sql,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=0,
        trigger_interval_s=0.2,
    )
    spec = spec.model_copy(update={"light": light})
    job = DaggerJob(plan(spec, tmp_path), spark)
    sent: Counter = Counter()
    stop = threading.Event()
    query = job.start()
    feeder = threading.Thread(target=live_feed, args=(broker.bootstrap, topic, sent, stop), daemon=True)
    feeder.start()

    mark: tuple[int, str] | None = None
    counted = 0

    def data_batches() -> int:
        # the whole recent progress (a call into the JVM per report: ~10 ms for 25) only when a new report came
        nonlocal mark, counted
        last = query.lastProgress
        now = (int(last.batchId), str(last.timestamp)) if last else None
        if now != mark:
            mark, counted = now, sum(1 for p in query.recentProgress if p.numInputRows)
        return counted

    def last_batch() -> int:
        return int(query.lastProgress.batchId) if query.lastProgress else -1

    try:
        # warm: every kind of batch has run
        wait_until("the dagger to warm up (3 data batches)", lambda: data_batches() >= 3, 240, every_s=0.1)
        before, batches_before, first = _compilations(spark), data_batches(), last_batch()
        wait_until("3 more data batches", lambda: data_batches() >= batches_before + 3, 240, every_s=0.1)
        after, batches_after, last = _compilations(spark), data_batches(), last_batch()
        executed = str(query._jsq.streamingQuery().lastExecution().executedPlan().toString())
        whole_stage = spark.conf.get("spark.sql.codegen.wholeStage")
    finally:
        stop.set()
        feeder.join(30)
        job.stop()
    assert batches_after - batches_before >= 3, (batches_before, batches_after)
    # (a batch running while the counts were read may have compiled its predicate: one more at most)
    assert after - before <= per_batch * (last - first + 1), (
        f"{after - before} classes in {last - first} micro-batches"
    )
    assert influx_points(influxdb, db, "m", "fare_idr" if sql is PASS_SQL else "n", [])  # it did write
    assert ("*(" in executed) is not light, executed  # "*(1) Project": an operator of whole-stage code 1
    assert whole_stage == "true"  # the session's own setting is back: only the query runs without
