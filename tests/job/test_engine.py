"""Issue 2's must-show: the seed daggers end to end on the real broker (tansu and noida-db), real
Spark and real InfluxDB, asserting the exact points read back with InfluxQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.spark.session import HDFS_STATE_STORE
from tests.helpers import (
    BOOKINGS_SQL,
    DRIVERS_SQL,
    expected_bookings,
    expected_drivers,
    influx_points,
    make_spec,
    offset_log,
    offset_log_conf,
    topic_and_db,
    unique,
)

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a minute boundary


def closing_event(stream: str, at: datetime, seed: int):  # type: ignore[no-untyped-def]
    """One event far enough ahead to move the watermark past every real window; its own window stays open."""
    return generate(stream, 1, seed=seed, start=at, duration_s=1)  # type: ignore[arg-type]


def run_case(
    spark: SparkSession,
    broker,
    influxdb,
    tmp_path: Path,
    stream: str,
    proto: str,
    sql: str,  # type: ignore[no-untyped-def]
    count: int,
    spark_conf: dict[str, str] | None = None,
    **gen: object,
):
    topic, db = unique(stream.replace("_", "-")), unique("db").replace("-", "_")
    broker.create_topic(topic, partitions=3)
    influxdb.create_database(db)
    batch = generate(stream, count, seed=11, start=T0, duration_s=300, **gen)  # type: ignore[arg-type]
    produce(
        broker.bootstrap,
        topic,
        [batch, closing_event(stream, T0 + timedelta(minutes=15), 12)],
        progress=False,
    )
    spec, _ = make_spec(
        name=unique("it"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class=proto,
        sql=sql,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=4000,
    )
    if spark_conf:
        spec = spec.model_copy(update={"spark_conf": spark_conf})
    progress = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    return batch, db, progress


def test_completed_bookings_per_city_cell_vehicle(spark, broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    batch, db, progress = run_case(
        spark,
        broker,
        influxdb,
        tmp_path,
        "booking",
        "daggers.events.BookingLog",
        BOOKINGS_SQL,
        6000,
        out_of_order_fraction=0.05,
    )
    want = expected_bookings(batch.table.to_pylist())
    got = influx_points(influxdb, db, "m", "num_of_bookings", ["tag_city_id", "tag_s2id", "tag_vehicle_type"])
    assert sum(want.values()) > 2500 and len(want) > 200  # a realistic spread, not a handful of cells
    assert got == want
    assert progress.input_rows == 6001
    assert progress.late_rows_dropped == 0


def test_distinct_drivers_per_cell_and_status(spark, broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    batch, db, progress = run_case(
        spark,
        broker,
        influxdb,
        tmp_path,
        "driver_location",
        "daggers.events.DriverLocationPing",
        DRIVERS_SQL,
        8000,
        out_of_order_fraction=0.05,
        drivers=400,
    )
    want = expected_drivers(batch.table.to_pylist())
    got = influx_points(influxdb, db, "m", "drivers", ["tag_s2id", "tag_driver_status"])
    assert any(v > 1 for v in want.values())  # distinct counting matters: drivers ping more than once a cell
    assert got == want
    assert progress.input_rows == 8001


def test_spark_conf_applies_to_the_dagger_only(spark, tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A spec's spark_conf (another state store, other shuffle partitions) runs the dagger with those
    settings, recorded in its checkpoint, gives the same exact windows, and leaves the shared session
    as it was."""
    from tests.services import BrokerHandle

    key = "spark.sql.streaming.stateStore.providerClass"
    before = (spark.conf.get(key), spark.conf.get("spark.sql.shuffle.partitions"))
    batch, db, progress = run_case(
        spark,
        BrokerHandle("tansu", tansu_broker),
        influxdb,
        tmp_path,
        "driver_location",
        "daggers.events.DriverLocationPing",
        DRIVERS_SQL,
        3000,
        spark_conf={key: HDFS_STATE_STORE, "spark.sql.shuffle.partitions": "3"},
        drivers=200,
    )
    want = expected_drivers(batch.table.to_pylist())
    assert influx_points(influxdb, db, "m", "drivers", ["tag_s2id", "tag_driver_status"]) == want
    assert progress.input_rows == 3001
    conf = offset_log_conf(offset_log(tmp_path / "ckpt")[0])
    assert conf[key] == HDFS_STATE_STORE and conf["spark.sql.shuffle.partitions"] == "3"
    assert (spark.conf.get(key), spark.conf.get("spark.sql.shuffle.partitions")) == before


_SETS = {
    "distinct_count": "collect_set",
    "read_pacing": "every_trigger",
    "partial_aggregation": "spark",
    "numeric_keys": "spark",
}
_WINDOW_FIRST = "GROUP BY window(rowtime, '60 seconds'), __dagger_s2_lat_long_13, driver_status"


@pytest.mark.parametrize(
    ("pinned", "derived", "resumed_features", "group_by"),
    [
        # the first engine: S2 text keys, the window first, DistinctCount a collect_set, no engine.json
        (None, "s2id", {"s2_keys": "string", "group_keys": "as_written", **_SETS}, _WINDOW_FIRST),
        # the engine that pinned 64-bit S2 keys, before the window went last in the state key
        (
            '{"s2_keys": "int64"}',
            "s2cell",
            {"s2_keys": "int64", "group_keys": "as_written", **_SETS},
            _WINDOW_FIRST,
        ),
        # the engine before DistinctCount's state was one sorted byte array (job.spark.jvm)
        (
            '{"s2_keys": "int64", "group_keys": "window_last"}',
            "s2cell",
            {"s2_keys": "int64", "group_keys": "window_last", **_SETS},
            "GROUP BY __dagger_s2_lat_long_13, driver_status, window(rowtime, '60 seconds')",
        ),
    ],
)
def test_an_older_engines_checkpoint_keeps_its_state_layout_after_an_upgrade(  # type: ignore[no-untyped-def]
    spark,
    tansu_broker,
    influxdb,
    tmp_path,
    pinned: str | None,
    derived: str,
    resumed_features: dict[str, str],
    group_by: str,
) -> None:
    """Window state started by an older engine (S2 cells keyed on their text, the window first in the
    state key, DistinctCount's collect_set) is resumed with that layout, so the open windows' state is read,
    not refused; the totals across the restart are exact. A fresh checkpoint gets the current layout and
    pins it."""
    from job.query.plan import ENGINE_FEATURES, PINNED_ENGINE
    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "upgrade", 2)
    checkpoint = tmp_path / "ckpt"
    spec, _ = make_spec(
        name=unique("upgrade"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.DriverLocationPing",
        sql=DRIVERS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=checkpoint,
        max_records_per_batch=3000,
    )
    fresh = plan(spec, tmp_path)
    assert (
        fresh.features
        == ENGINE_FEATURES
        == {
            "s2_keys": "int64",
            "group_keys": "window_last",
            "distinct_count": "sorted_bytes",
            "read_pacing": "gather",
            "partial_aggregation": "source_simple",
            "numeric_keys": "source",
        }
    )
    # the source aggregates first (job.sql.partial), Spark merges its DistinctCount buffers
    assert (
        "dagger_distinct_count_merge(__dagger_distinct_driver_id) AS drivers" in fresh.translation.spark_sql
    )
    first = generate("driver_location", 3000, seed=21, start=T0, duration_s=300, drivers=150)
    produce(broker.bootstrap, topic, [first], progress=False)
    checkpoint.mkdir()
    older = json.dumps(resumed_features)
    (checkpoint / PINNED_ENGINE).write_text(older)  # as the older engine ran it
    old = plan(spec, tmp_path)
    assert old.streams[0].source.derived == [["__dagger_s2_lat_long_13", derived, "lat", "long", 13]]
    assert old.translation.spark_sql.endswith(group_by)
    assert "size(collect_set(driver_id)) AS drivers" in old.translation.spark_sql
    run_foreground(old, available_now=True, spark=spark)
    if pinned is None:
        (checkpoint / PINNED_ENGINE).unlink()  # the first engine wrote no such file
    else:
        (checkpoint / PINNED_ENGINE).write_text(pinned)
    # the second half (after the first run's watermark) overlaps its open windows; a late event closes them
    second = generate(
        "driver_location",
        3000,
        seed=22,
        start=T0 + timedelta(minutes=4, seconds=40),
        duration_s=240,
        drivers=150,
        first_index=10_000,
    )
    produce(
        broker.bootstrap,
        topic,
        [second, closing_event("driver_location", T0 + timedelta(minutes=30), 23)],
        progress=False,
    )
    resumed = plan(spec, tmp_path)
    assert resumed.features == resumed_features
    progress = run_foreground(resumed, available_now=True, spark=spark)
    assert json.loads((checkpoint / PINNED_ENGINE).read_text()) == json.loads(pinned or older)
    want = expected_drivers(first.table.to_pylist() + second.table.to_pylist())
    assert any(v > 1 for v in want.values())
    assert influx_points(influxdb, db, "m", "drivers", ["tag_s2id", "tag_driver_status"]) == want
    assert progress.input_rows == 6001
