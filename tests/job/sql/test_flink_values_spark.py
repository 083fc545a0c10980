"""The rewritten queries of job.sql.values and job.sql.flink give Flink 2.3's exact values on Spark.

The events are the Flink compatibility harness's (bench/flink_compat/cases.py, its ``main`` data set without
the closers), as temporary views in the tests' SparkSession; each query's Spark SQL (job.sql.translate) runs
as a batch. The expected values are what Flink 2.3 (PyFlink, bench/setup_flink.sh) gave for the same query
over the same events.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from bench.flink_compat.cases import MAIN_BOOKINGS, MAIN_PINGS
from job.sql import translate
from job.sql.rewrite import BARRIER_COLUMN
from tests.job.sql.test_flink_values import BOOKINGS, PINGS, TABLES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run(spark: Any) -> Iterator[Any]:  # the tests' one SparkSession (tests/conftest.py)
    from pyspark.sql import types as T

    def view(name: str, columns: dict[str, str], events: list[dict[str, Any]]) -> None:
        kinds = {
            "STRING": T.StringType(),
            "INT": T.IntegerType(),
            "BIGINT": T.LongType(),
            "DOUBLE": T.DoubleType(),
            "FLOAT": T.FloatType(),
            "TIMESTAMP": T.TimestampType(),
        }
        schema = T.StructType(
            [T.StructField(c, kinds[t]) for c, t in columns.items()]
            + [T.StructField("rowtime", T.TimestampType()), T.StructField(BARRIER_COLUMN, T.IntegerType())]
        )
        rows = [[e[c] for c in columns] + [e["event_timestamp"], 0] for e in events]
        spark.createDataFrame(rows, schema).createOrReplaceTempView(name)

    view("bookings", BOOKINGS, MAIN_BOOKINGS)
    view("pings", PINGS, MAIN_PINGS)

    def query(sql: str) -> list[tuple[Any, ...]]:
        return sorted((tuple(r) for r in spark.sql(translate(sql, TABLES).spark_sql).collect()), key=repr)

    yield query
    for name in ("bookings", "pings"):
        spark.catalog.dropTempView(name)


def test_integer_division_sign_mod_and_avg(run: Any) -> None:
    assert run(
        "SELECT order_number, fare_idr / 1000 AS a, city_id / 2 AS b, -7 / 2 AS c, fare_idr / 7000 AS d, "
        "SIGN(fare_idr) AS s, SIGN(city_id - 2) AS s2, fare_idr % 7 AS m FROM bookings"
    ) == [
        ("o1", 25, 0, -3, 3, 1, -1, 3),
        ("o2", 0, 1, -3, 0, 0, 0, 0),
        ("o3", 18, 0, -3, 2, 1, -1, 3),
        ("o4", 12, 0, -3, 1, 1, -1, 2),
        ("o5", 0, 1, -3, 0, 0, 0, 0),
        ("o6", 40, 0, -3, 5, 1, -1, 2),
        ("o7", 0, 1, -3, 0, 0, 0, 0),
    ]
    assert run(
        "SELECT AVG(fare_idr) AS a, AVG(city_id) AS b, AVG(-city_id) AS c FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTE)"
    ) == [(13571, 1, -1)]


def test_greatest_least_null_and_distinct_aggregates(run: Any) -> None:
    assert run(
        "SELECT order_number, GREATEST(city_id, NULLIF(city_id, 1), 0) AS g, "
        "LEAST(fare_idr, CAST(NULL AS BIGINT)) AS l FROM bookings WHERE order_number < 'o4'"
    ) == [("o1", None, None), ("o2", 2, None), ("o3", None, None)]
    assert run(
        "SELECT SUM(DISTINCT city_id) AS a, AVG(DISTINCT fare_idr) AS b, MAX(DISTINCT fare_idr) AS c, "
        "MIN(DISTINCT vehicle_type) AS d, SUM(DISTINCT CAST(fare_idr AS DECIMAL(10, 2))) AS f FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTE)"
    ) == [(3, 19000, 40000, "BIKE", Decimal("95000.00"))]


def test_times_and_their_text(run: Any) -> None:
    assert run(
        "SELECT order_number, EXTRACT(SECOND FROM rowtime) AS s, EXTRACT(MINUTE FROM rowtime) AS m, "
        "EXTRACT(DOW FROM rowtime) AS dow, EXTRACT(WEEK FROM rowtime) AS w, SECOND(rowtime) AS s2, "
        "WEEK(rowtime) AS w2, EXTRACT(MILLISECOND FROM rowtime) AS ms, EXTRACT(DOY FROM rowtime) AS doy "
        "FROM bookings WHERE order_number IN ('o3', 'o7')"
    ) == [("o3", 59, 0, 2, 10, 59, 10, 999, 61), ("o7", 50, 4, 2, 10, 50, 10, 500, 61)]
    assert run(
        "SELECT CAST(rowtime AS VARCHAR) AS a, CAST(city_id = 1 AS VARCHAR) AS c, "
        "CAST(CAST(rowtime AS TIMESTAMP(0)) AS VARCHAR) AS d, CAST(CAST(rowtime AS TIMESTAMP) AS VARCHAR) AS e "
        "FROM bookings WHERE order_number IN ('o1', 'o7')"
    ) == [
        ("2026-03-02 10:00:05.000", "TRUE", "2026-03-02 10:00:05", "2026-03-02 10:00:05.000000"),
        ("2026-03-02 10:04:50.500", "FALSE", "2026-03-02 10:04:50", "2026-03-02 10:04:50.500000"),
    ]
    assert run(
        "SELECT CAST(TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS VARCHAR) AS f, COUNT(*) AS n FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)"
    ) == [("2026-03-02 10:01:00.000", 3), ("2026-03-02 10:02:00.000", 2), ("2026-03-02 10:05:00.000", 2)]


def test_floor_ceil_truncate_and_float(run: Any) -> None:
    assert (
        run(
            "SELECT FLOOR(lat) AS a, CEIL(lat) AS b, FLOOR(speed_kmh) AS c, CEIL(CAST(-0.5 AS DOUBLE)) AS d, "
            "FLOOR(CAST(-2.5 AS DOUBLE)) AS e, FLOOR(CAST(1e20 AS DOUBLE)) AS f, "
            "FLOOR(CAST(12.345 AS DECIMAL(10, 3))) AS g FROM pings WHERE driver_id = 'd3'"
        )
        == [(-7.0, -6.0, 20.0, 0.0, -3.0, 1e20, Decimal("12"))] * 2
    )
    assert run(
        "SELECT order_number, TRUNCATE(pickup_lat, 1) AS a, TRUNCATE(CAST(fare_idr AS DECIMAL(12, 3)) / 7, 2) "
        "AS b, TRUNCATE(fare_idr, -3) AS c, TRUNCATE(-fare_idr / 7, -2) AS d, TRUNCATE(pickup_long) AS e, "
        "TRUNCATE(CAST(-12.345 AS DECIMAL(10, 3)), 2) AS f FROM bookings WHERE order_number IN ('o1', 'o2', 'o6')"
    ) == [
        ("o1", -6.2, Decimal("3571.42"), 25000, -3500, 106.0, Decimal("-12.34")),
        ("o2", -6.2, Decimal("0.00"), 0, 0, 106.0, Decimal("-12.34")),
        ("o6", -6.3, Decimal("5714.28"), 40000, -5700, 106.0, Decimal("-12.34")),
    ]
    rows = run(
        "SELECT CAST(speed_kmh / 3 AS DOUBLE) AS a, AVG(CAST(lat * 3.3 AS FLOAT)) AS b FROM pings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTE), speed_kmh"
    )
    assert rows[0][0] == 6.666666507720947  # FLOAT division, as Flink
    assert np.float32(rows[0][1]) == np.float32(-20.46)


def test_split_index_case_values_and_the_comma_join(run: Any) -> None:
    assert run(
        "SELECT SPLIT_INDEX('a,b,,c', ',', 2) AS a, SPLIT_INDEX('a,b,,c', ',', 4) AS b, "
        "SPLIT_INDEX('a,b,,c', ',', -1) AS c, SPLIT_INDEX('', ',', 0) AS d, SPLIT_INDEX('a.b', '.', 1) AS e, "
        "SPLIT_INDEX('a::b::c', '::', 2) AS f, SPLIT_INDEX('a,', ',', 1) AS g, SPLIT_INDEX(order_number, 'o', 1) "
        "AS h FROM bookings WHERE order_number = 'o1'"
    ) == [("", None, None, None, "b", "c", "", "1")]
    assert run(
        "SELECT order_number, CASE status WHEN 'COMPLETED', 'DRIVER_FOUND' THEN 'ok' WHEN 'CANCELLED' "
        "THEN 'lost' ELSE 'open' END AS st FROM bookings"
    ) == [
        ("o1", "ok"),
        ("o2", "lost"),
        ("o3", "ok"),
        ("o4", "ok"),
        ("o5", "open"),
        ("o6", "ok"),
        ("o7", "ok"),
    ]
    assert run(
        "SELECT b.order_number, p.driver_status FROM bookings b, pings p WHERE b.driver_id = p.driver_id "
        "AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE AND b.city_id = 1"
    ) == [
        ("o1", "ON_TRIP"),
        ("o1", "ON_TRIP"),
        ("o1", "ON_TRIP"),
        ("o3", "AVAILABLE"),
        ("o3", "ON_TRIP"),
        ("o4", "ON_TRIP"),
        ("o6", "ON_TRIP"),
    ]


def test_a_spark_error_is_one_line_without_a_position_in_the_spark_sql(
    spark: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from job.cli.common import quiet_spark_errors
    from job.query.runner import explain_failure

    quiet_spark_errors()  # as `daggers run` and `daggers sql translate --explain` do
    capfd.readouterr()
    with pytest.raises(Exception) as info:
        spark.sql("SELECT 1 AS a, nosuchfunction(2) AS b")
    message = explain_failure(info.value).message
    assert message.startswith(
        "the streaming query failed: [UNRESOLVED_ROUTINE] Cannot resolve routine "
        "`nosuchfunction` on search path"
    )
    assert message.endswith("SQLSTATE: 42883")  # not '; line 1 pos 15'
    out, err = capfd.readouterr()
    assert "at org.apache.spark" not in out + err and "SQLQueryContextLogger" not in err
