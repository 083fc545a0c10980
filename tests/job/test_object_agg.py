"""DistinctCount (collect_set) of a light dagger over more than 128 groups stays in the hash map (real broker,
Spark, InfluxDB).

Spark's object aggregates sort their input once a task holds more than
``spark.sql.objectHashAggregate.sortBased.fallbackThreshold`` groups (128 by default), which a window of
S2 cells always does; a light dagger raises it (job.query.runner.OBJECT_AGG_GROUPS in LIGHT_SQL_CONF). The
test counts the tasks that fell back, from the SQL metrics of the micro-batch that read the records, and
checks the windows against the records sent. A light dagger also keeps its window state in the JVM's heap
(HDFS-backed state store, job.query.runner.LIGHT_STATE_STORE) instead of RocksDB: read from the checkpoint's offset
log, where Spark fixes the provider for the life of the checkpoint.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from job.query.plan import plan
from job.query.runner import LIGHT_STATE_STORE, OBJECT_AGG_GROUPS, DaggerJob
from job.spark.session import ROCKSDB_STATE_STORE
from tests.helpers import (
    influx_points,
    make_spec,
    micros_of,
    offset_log,
    offset_log_conf,
    produce_step,
    topic_and_db,
    unique,
    window_end_s,
)
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

SQL = """SELECT customer_id AS tag_customer_id,
       DistinctCount(driver_id) AS drivers,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), customer_id"""
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
PROVIDER = "spark.sql.streaming.stateStore.providerClass"


def _fallbacks(node: Any) -> int:
    """Return the "number of sort fallback tasks" of every object aggregate in a physical plan (py4j)."""
    metrics = node.metrics()
    own = int(metrics.apply("numTasksFallBacked").value()) if metrics.contains("numTasksFallBacked") else 0
    children = node.children()
    return own + sum(_fallbacks(children.apply(i)) for i in range(children.size()))


class _Measured(DaggerJob):
    """A dagger that records, after each micro-batch, the sort fallbacks of the plan that batch ran (the
    query's current incremental execution: the frame foreachBatch hands over is a scan of its result)."""

    fallbacks: list[int]

    def _write_batch(self, df: Any, batch_id: int) -> None:
        super()._write_batch(df, batch_id)
        query = next(q for q in self.spark.streams.active if q.name == self.query_name)
        execution = query._jsq.streamingQuery().lastExecution()
        assert execution.currentBatchId() == batch_id
        self.fallbacks = [*getattr(self, "fallbacks", []), _fallbacks(execution.executedPlan())]


# A light dagger keeps the groups in the hash map; another keeps Spark's sort (faster for a heavy one).
@pytest.mark.parametrize("light", [True, False], ids=["light", "heavy"])
def test_distinct_count_over_hundreds_of_groups_sorts_only_when_not_light(
    spark,
    tansu_broker,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    light: bool,
) -> None:
    assert OBJECT_AGG_GROUPS > 128
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "objagg", partitions=1)
    spec, _ = make_spec(
        name=unique("objagg"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=0,
    )
    spec = spec.model_copy(update={"light": light})
    rows = produce_step(broker.bootstrap, topic, 0, 1500, 5, T0)
    closer = rows.pop()  # ten minutes later: it closes the three windows and opens one of its own
    drivers: dict[tuple[int, str], set[str]] = defaultdict(set)
    for r in rows:
        drivers[(window_end_s(micros_of(r["event_timestamp"])), r["customer_id"])].add(r["driver_id"])
    assert min(sum(1 for e, _ in drivers if e == end) for end, _ in drivers) > 128  # groups in each window

    job = _Measured(plan(spec, tmp_path), spark)
    query = job.start(available_now=True)
    try:
        assert query.awaitTermination(240)
    finally:
        job.stop()
    assert len(job.fallbacks) >= 2, job.fallbacks  # the read, the close
    assert (sum(job.fallbacks) == 0) == light, job.fallbacks
    provider = offset_log_conf(offset_log(tmp_path / "ckpt")[0])[PROVIDER]
    assert provider == (LIGHT_STATE_STORE if light else ROCKSDB_STATE_STORE), provider
    got = influx_points(influxdb, db, "m", "drivers", ["tag_customer_id"])
    assert got == {key: len(ids) for key, ids in drivers.items()}
    assert window_end_s(micros_of(closer["event_timestamp"])) not in {e for e, _ in got}


def test_a_dagger_made_light_keeps_its_checkpoints_state_store(
    spark,
    tansu_broker,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    """A checkpoint made by a heavy dagger stays on RocksDB when the spec turns ``light`` on: Spark restores
    the provider from the offset log, and the windows of both runs are exact."""
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "objagg-switch", partitions=1)
    spec, _ = make_spec(
        name=unique("objagg-switch"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=0,
    )
    drivers: dict[tuple[int, str], set[str]] = defaultdict(set)
    for step, light in enumerate((False, True)):
        rows = produce_step(broker.bootstrap, topic, step, 300, 7, T0)
        # the last row closes the step's windows and opens one of its own, which the next step closes
        for r in rows if step == 0 else rows[:-1]:
            drivers[(window_end_s(micros_of(r["event_timestamp"])), r["customer_id"])].add(r["driver_id"])
        job = DaggerJob(plan(spec.model_copy(update={"light": light}), tmp_path), spark)
        query = job.start(available_now=True)
        try:
            assert query.awaitTermination(240)
        finally:
            job.stop()
    offsets = offset_log(tmp_path / "ckpt")
    assert len(offsets) >= 4, offsets  # two batches (the read, the close) a run
    assert {offset_log_conf(p)[PROVIDER] for p in offsets} == {ROCKSDB_STATE_STORE}
    got = influx_points(influxdb, db, "m", "drivers", ["tag_customer_id"])
    assert got == {key: len(ids) for key, ids in drivers.items()}
