"""What a plan hands each stream's source: the order of its batches, where its windows close."""

from __future__ import annotations

from pathlib import Path

from job.query.plan import LIGHT_TRIGGER_S, plan
from job.spec import parse_spec
from tests.helpers import DRIVERS_SQL, make_spec


def test_a_grouped_stream_is_sorted_by_its_first_key_unless_a_transformer_reads_it(tmp_path: Path) -> None:
    _, text = make_spec(
        name="order",
        bootstrap="127.0.0.1:1",
        topic="t",
        proto_class="daggers.events.DriverLocationPing",
        sql=DRIVERS_SQL,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    spark_aggregates = {"partial_aggregation": "spark"}  # the source hands over every record
    assert (
        plan(parse_spec(text, "a.yaml"), tmp_path, features=spark_aggregates).streams[0].source.batch_order
        == "__dagger_s2_lat_long_13"
    )
    dedup = text.replace(
        "    bad_records:",
        "    transformers:\n      - {type: deduplicate, keys: [driver_id], ttl_s: 60}\n    bad_records:",
    )
    assert dedup != text
    assert (
        plan(parse_spec(dedup, "b.yaml"), tmp_path, features=spark_aggregates).streams[0].source.batch_order
        == ""
    )


def test_the_source_aggregates_distinct_counts_first_unless_a_transformer_reads_its_records(
    tmp_path: Path,
) -> None:
    _, text = make_spec(
        name="first",
        bootstrap="127.0.0.1:1",
        topic="t",
        proto_class="daggers.events.DriverLocationPing",
        sql=DRIVERS_SQL,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    p = plan(parse_spec(text, "a.yaml"), tmp_path)
    assert p.streams[0].source.partial == {
        "keys": ["__dagger_s2_lat_long_13", "driver_status"],
        "window_ms": 60_000,
        "distinct": {"driver_id": "__dagger_distinct_driver_id"},
        "time": "event_timestamp",
        "aggregates": [],
        "wrap": False,
    }
    assert p.streams[0].source.batch_order == "" and p.streams[0].source.max_tasks == p.spec.parallelism
    assert "dagger_distinct_count_merge(__dagger_distinct_driver_id)" in p.translation.spark_sql
    assert [f.name for f in p.streams[0].source.spark_schema().fields] == [
        "__dagger_s2_lat_long_13",
        "driver_status",
        "event_timestamp",
        "__dagger_distinct_driver_id",
        "__dagger_records",
    ]
    dedup = text.replace(
        "    bad_records:",
        "    transformers:\n      - {type: deduplicate, keys: [driver_id], ttl_s: 60}\n    bad_records:",
    )
    assert plan(parse_spec(dedup, "b.yaml"), tmp_path).streams[0].source.partial is None
    fused = (
        text.replace("sinks:", "isolation: fused\nsinks:")
        if "sinks:" in text
        else text + "isolation: fused\n"
    )
    assert plan(parse_spec(fused, "c.yaml"), tmp_path).streams[0].source.partial is None
    pinned = plan(parse_spec(text, "d.yaml"), tmp_path, features={"partial_aggregation": "spark"})
    assert (
        pinned.streams[0].source.partial is None and "dagger_distinct_count(" in pinned.translation.spark_sql
    )


def _source(tmp_path: Path, sql: str, extra: str = ""):  # type: ignore[no-untyped-def]
    return _plan(tmp_path, sql, extra).streams[0].source


def _plan(tmp_path: Path, sql: str, extra: str = ""):  # type: ignore[no-untyped-def]
    _, text = make_spec(
        name="close",
        bootstrap="127.0.0.1:1",
        topic="t",
        proto_class="daggers.events.DriverLocationPing",
        sql=sql,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=7_000,
    )
    return plan(parse_spec(text + extra, "c.yaml"), tmp_path)


def test_the_source_knows_when_windows_close_every_size_or_slide_after_the_watermark_delay(
    tmp_path: Path,
) -> None:
    tumble = _source(tmp_path, DRIVERS_SQL)
    assert (tumble.close_period_ms, tumble.close_delay_ms) == (60_000, 7_000)
    hop = _source(
        tmp_path,
        "SELECT COUNT(*) AS n, HOP_END(rowtime, INTERVAL '15' SECOND, INTERVAL '2' MINUTE) AS t "
        "FROM data_stream GROUP BY HOP(rowtime, INTERVAL '15' SECOND, INTERVAL '2' MINUTE)",
    )
    assert hop.close_period_ms == 15_000
    projection = _source(tmp_path, "SELECT driver_id FROM data_stream WHERE driver_id <> ''")
    assert projection.close_period_ms == 0
    assert _source(tmp_path, DRIVERS_SQL, "close_windows_promptly: false\n").close_period_ms == 0


def test_read_at_window_close_reaches_the_source_of_a_windowed_query_without_a_join(tmp_path: Path) -> None:
    on = "read_at_window_close: true\n"
    assert _source(tmp_path, DRIVERS_SQL, on).read_at_close is True
    assert _source(tmp_path, DRIVERS_SQL).read_at_close is False  # off unless asked for
    assert (
        _source(tmp_path, DRIVERS_SQL, "light: true\n").read_at_close is True
    )  # a light dagger reads at close
    assert (
        _source(tmp_path, "SELECT driver_id FROM data_stream WHERE driver_id <> ''", on).read_at_close
        is False
    )
    assert _source(tmp_path, DRIVERS_SQL, on + "close_windows_promptly: false\n").read_at_close is False
    self_join = (
        "SELECT COUNT(*) AS n, TUMBLE_END(a.rowtime, INTERVAL '1' MINUTE) AS t FROM data_stream AS a "
        "JOIN data_stream AS b ON a.driver_id = b.driver_id AND b.rowtime BETWEEN a.rowtime AND "
        "a.rowtime + INTERVAL '10' SECOND GROUP BY TUMBLE(a.rowtime, INTERVAL '1' MINUTE)"
    )
    joined = _source(tmp_path, self_join, on)  # an interval join: its boundaries come 10 s later
    assert (joined.read_at_close, joined.close_period_ms, joined.close_delay_ms) == (True, 60_000, 17_000)
    unbounded = self_join.replace(
        "b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND", "b.rowtime >= a.rowtime"
    )
    assert _source(tmp_path, unbounded, on).read_at_close is False  # a join whose lag is not known


def test_a_windowed_dagger_gathers_records_between_boundaries_unless_its_checkpoint_pinned_otherwise(
    tmp_path: Path,
) -> None:
    import json

    from job.query.plan import GATHER_S, PINNED_ENGINE

    assert GATHER_S == 8.0
    assert _source(tmp_path, DRIVERS_SQL).gather_ms == 8_000
    assert (
        _source(tmp_path, "SELECT driver_id FROM data_stream WHERE driver_id <> ''").gather_ms == 0
    )  # no window
    assert _source(tmp_path, DRIVERS_SQL, "close_windows_promptly: false\n").gather_ms == 0
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / PINNED_ENGINE).write_text(json.dumps({"read_pacing": "every_trigger"}))
    assert (
        _source(tmp_path, DRIVERS_SQL).gather_ms == 0
    )  # a checkpoint that reads at every trigger keeps doing so


def test_a_gathering_query_runs_no_batch_without_new_data_its_source_asks_for_those(tmp_path: Path) -> None:
    """Spark's batch after every one that moved the watermark closed no window between boundaries: a query
    whose source gathers turns them off (the source ticks for the ones that close a window), unless it reads
    all input once (its last windows close in such batches)."""
    from job.query.runner import eviction_conf

    def conf(sql: str, extra: str = "", available_now: bool = False) -> dict[str, str]:
        return eviction_conf(_plan(tmp_path, sql, extra), available_now)

    off = {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}
    assert conf(DRIVERS_SQL) == off
    assert conf(DRIVERS_SQL, available_now=True) == {}
    assert conf(DRIVERS_SQL, "close_windows_promptly: false\n") == {}  # Spark's own pacing
    assert conf(DRIVERS_SQL, "light: true\n") == off  # reads at window close, and ticks to close it
    assert conf("SELECT driver_id FROM data_stream WHERE driver_id <> ''") == {}  # no window


def test_a_light_dagger_that_keeps_no_state_triggers_at_most_every_five_seconds(tmp_path: Path) -> None:
    def trigger(sql: str, extra: str = "", every_s: float = 1.0) -> float:
        _, text = make_spec(
            name="trig",
            bootstrap="127.0.0.1:1",
            topic="t",
            proto_class="daggers.events.DriverLocationPing",
            sql=sql,
            influx_url="http://127.0.0.1:1",
            db="d",
            measurement="m",
            checkpoint=tmp_path / "ckpt",
            trigger_interval_s=every_s,
        )
        return plan(parse_spec(text + extra, "t.yaml"), tmp_path).trigger_interval_s

    projection = "SELECT driver_id FROM data_stream WHERE driver_id <> ''"
    assert trigger(projection) == 1.0  # the spec's, unless light
    assert trigger(projection, "light: true\n") == LIGHT_TRIGGER_S == 5.0
    assert trigger(projection, "light: true\n", every_s=8.0) == 8.0  # a longer one stays
    assert (
        trigger(DRIVERS_SQL, "light: true\n") == 1.0
    )  # a window: it reads at close, and notices it by the trigger


def test_the_source_aggregates_counts_sums_least_and_greatest_first_with_sparks_types(tmp_path: Path) -> None:
    sql = """SELECT city_id AS tag_city, COUNT(*) AS bookings, SUM(fare_idr) AS fares, MIN(pickup_lat) AS south,
       AVG(pickup_lat) AS lat, MAX(city_id) AS top, TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
    FROM data_stream GROUP BY city_id, TUMBLE(rowtime, INTERVAL '60' SECOND)"""
    _, text = make_spec(
        name="sums",
        bootstrap="127.0.0.1:1",
        topic="t",
        proto_class="daggers.events.BookingLog",
        sql=sql,
        influx_url="http://127.0.0.1:1",
        db="d",
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    source = plan(parse_spec(text, "a.yaml"), tmp_path).streams[0].source
    assert source.partial == {
        "keys": ["city_id"],
        "window_ms": 60_000,
        "distinct": {},
        "time": "event_timestamp",
        "aggregates": [
            ["max", "city_id", "__dagger_max_city_id"],
            ["sum", "fare_idr", "__dagger_sum_fare_idr"],
            ["count", "pickup_lat", "__dagger_count_pickup_lat"],
            ["sum", "pickup_lat", "__dagger_sum_pickup_lat"],
            ["min", "pickup_lat", "__dagger_min_pickup_lat"],
        ],
        "wrap": False,
    }
    assert [(f.name, f.dataType.simpleString()) for f in source.spark_schema().fields] == [
        ("city_id", "int"),
        ("event_timestamp", "timestamp"),
        ("__dagger_max_city_id", "int"),
        ("__dagger_sum_fare_idr", "bigint"),
        ("__dagger_count_pickup_lat", "bigint"),
        ("__dagger_sum_pickup_lat", "double"),
        ("__dagger_min_pickup_lat", "double"),
        ("__dagger_records", "bigint"),
    ]
    assert source.output_columns() == [f.name for f in source.spark_schema().fields]
    # Spark's arithmetic without ANSI wraps a sum around: so does the source's
    unchecked = plan(parse_spec(text + "spark_conf:\n  spark.sql.ansi.enabled: false\n", "b.yaml"), tmp_path)
    assert unchecked.streams[0].source.partial is not None and unchecked.streams[0].source.partial["wrap"]
    # a checkpoint pinned to the DistinctCount-only source keeps Spark's aggregation of these
    older = plan(parse_spec(text, "c.yaml"), tmp_path, features={"partial_aggregation": "source"})
    assert older.streams[0].source.partial is None and "COUNT(*) AS bookings" in older.translation.spark_sql
