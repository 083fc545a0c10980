"""DistinctCount's layouts: ``size(collect_set(x))``, and the byte-array aggregate (job.spark.jvm) that the engine feature
``distinct_count: sorted_bytes`` gives a value whose type tells every two values apart by their text. Golden
strings; no Spark."""

from __future__ import annotations

import pytest

from job.sql import translate

PINGS = {
    "data_stream": {
        "driver_id": "string",
        "lat": "double",
        "long": "double",
        "event_timestamp": "timestamp",
        "driver_status": "int",
        "service_type": "bigint",
        "accuracy_m": "float",
        "ok": "boolean",
        "day": "date",
        "fare": "decimal(12,2)",
        "raw": "binary",
        "tags": "array<string>",
    }
}
WINDOW = "GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND)"


def spark_sql(expr: str, tables: dict = PINGS, **flags: bool) -> str:
    sql = translate(f"SELECT {expr} AS n FROM data_stream {WINDOW}", tables, **flags).spark_sql
    return sql.removeprefix("SELECT ").split(" AS n FROM")[0]


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("DistinctCount(driver_id)", "dagger_distinct_count(CAST(driver_id AS BINARY))"),
        (
            "DistinctCount(driver_status)",
            "dagger_distinct_count(CAST(CAST(driver_status AS STRING) AS BINARY))",
        ),
        (
            "DistinctCount(service_type)",
            "dagger_distinct_count(CAST(CAST(service_type AS STRING) AS BINARY))",
        ),
        ("DistinctCount(ok)", "dagger_distinct_count(CAST(CAST(ok AS STRING) AS BINARY))"),
        ("DistinctCount(day)", "dagger_distinct_count(CAST(CAST(day AS STRING) AS BINARY))"),
        ("DistinctCount(fare)", "dagger_distinct_count(CAST(CAST(fare AS STRING) AS BINARY))"),
        (
            "DistinctCount(CONCAT_WS('|', driver_id, driver_id))",
            "dagger_distinct_count(CAST(CONCAT_WS('|', driver_id, driver_id) AS BINARY))",
        ),
        ("DistinctCount(UPPER(driver_id))", "dagger_distinct_count(CAST(UPPER(driver_id) AS BINARY))"),
    ],
)
def test_a_value_told_apart_by_its_text_is_counted_by_its_bytes(expr: str, want: str) -> None:
    assert spark_sql(expr) == want


@pytest.mark.parametrize("column", ["lat", "accuracy_m", "event_timestamp", "raw", "tags"])
def test_floats_times_bytes_and_nested_values_keep_collect_set(column: str) -> None:
    """-0.0 and 0.0 are one value to collect_set and two texts; local times repeat when clocks go back."""
    assert spark_sql(f"DistinctCount({column})") == f"size(collect_set({column}))"


def test_a_value_of_unknown_type_keeps_collect_set() -> None:
    untyped = {"data_stream": set(PINGS["data_stream"])}
    assert spark_sql("DistinctCount(driver_id)", untyped) == "size(collect_set(driver_id))"


def test_the_layout_before_is_collect_set_for_every_type() -> None:
    assert spark_sql("DistinctCount(driver_id)", distinct_bytes=False) == "size(collect_set(driver_id))"
    assert (
        spark_sql("DistinctCount(driver_status)", distinct_bytes=False) == "size(collect_set(driver_status))"
    )


def test_the_drivers_query_golden() -> None:
    from bench.workloads import DRIVERS_SQL

    assert translate(DRIVERS_SQL, PINGS).spark_sql == (
        "SELECT CAST(__dagger_s2_lat_long_13 AS STRING) AS tag_s2id, "
        "dagger_distinct_count(CAST(driver_id AS BINARY)) AS drivers, window.end AS window_timestamp "
        "FROM data_stream GROUP BY __dagger_s2_lat_long_13, window(rowtime, '60 seconds')"
    )


def test_a_set_the_user_builds_is_left_alone() -> None:
    """Only DistinctCount changes layout: CollectArray(DISTINCT x) is the set itself."""
    assert spark_sql("size(CollectArray(DISTINCT driver_id))") == "SIZE(collect_set(driver_id))"


def test_the_fused_merge_takes_the_byte_aggregate_for_an_aggregate() -> None:
    from job.shared.merge import member_shape

    sql = translate(
        "SELECT driver_status AS tag_s, DistinctCount(driver_id) AS n, "
        "TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp FROM data_stream "
        f"{WINDOW}, driver_status",
        PINGS,
    ).spark_sql
    shape = member_shape(sql, {"data_stream"})
    assert not isinstance(shape, str), shape
    assert [a.template for a in shape.aggregates] == ["dagger_distinct_count(__v0)"]
    assert [v.sql(dialect="spark") for a in shape.aggregates for v in a.values] == [
        "CAST(driver_id AS BINARY)"
    ]
