"""Flink's values where Spark's differ (job.sql.values, job.sql.infer): golden Spark SQL of each rewrite.

The tables are typed as the Flink compatibility harness's (bench/flink_compat: BookingLog and
DriverLocationPing as job.schema.sql_types gives them). What the rewritten queries give on Spark is checked
against Flink's values in test_flink_values_spark.py.
"""

from __future__ import annotations

import pytest
import sqlglot

from job.errors import SqlError
from job.sql import translate
from job.sql.infer import TYPE_META, infer
from job.sql.parse import parse
from job.sql.scope import resolve

BOOKINGS = {
    "order_number": "STRING",
    "customer_id": "STRING",
    "driver_id": "STRING",
    "city_id": "INT",
    "vehicle_type": "STRING",
    "status": "STRING",
    "pickup_lat": "DOUBLE",
    "pickup_long": "DOUBLE",
    "event_timestamp": "TIMESTAMP",
    "fare_idr": "BIGINT",
}
PINGS = {
    "driver_id": "STRING",
    "lat": "DOUBLE",
    "long": "DOUBLE",
    "driver_status": "STRING",
    "service_type": "STRING",
    "event_timestamp": "TIMESTAMP",
    "accuracy_m": "FLOAT",
    "speed_kmh": "FLOAT",
}
TABLES = {"bookings": BOOKINGS, "pings": PINGS}
WINDOW = " GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)"


def spark(select: str, table: str = "bookings", tail: str = "") -> str:
    """The Spark SQL of ``SELECT <select> FROM <table><tail>``, without its FROM and what follows."""
    got = translate(f"SELECT {select} FROM {table}{tail}", TABLES).spark_sql
    assert got.startswith("SELECT ")
    return got[len("SELECT ") : got.index(f" FROM {table}")]


# ---- types ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("city_id", "INT"),
        ("fare_idr", "BIGINT"),
        ("speed_kmh", "FLOAT"),
        ("rowtime", "TIMESTAMP"),
        ("1", "INT"),
        ("3000000000", "BIGINT"),
        ("2.50", "DECIMAL(3, 2)"),
        ("1e3", "DOUBLE"),
        ("'a'", "STRING"),
        ("city_id + fare_idr", "BIGINT"),
        ("-city_id * 2", "INT"),
        ("city_id / 2", "INT"),
        ("fare_idr % 7", "INT"),
        ("speed_kmh / 100", "FLOAT"),
        ("speed_kmh * lat", "FLOAT"),
        ("lat - 1", "DOUBLE"),
        ("lat + 1.5", "DOUBLE"),  # Flink: a DOUBLE with a DECIMAL is a DOUBLE
        ("speed_kmh * 0.5", "DOUBLE"),  # and a FLOAT with a DECIMAL too
        ("CAST(city_id AS BIGINT)", "BIGINT"),
        ("COUNT(*)", "BIGINT"),
        ("SUM(city_id)", "INT"),
        ("SUM(fare_idr)", "BIGINT"),
        ("AVG(city_id)", "INT"),
        ("MAX(fare_idr)", "BIGINT"),
        ("EXTRACT(HOUR FROM rowtime)", "BIGINT"),
        ("CASE WHEN city_id = 1 THEN city_id ELSE fare_idr END", "BIGINT"),
        ("COALESCE(city_id, NULL)", "INT"),
        ("CASE WHEN city_id = 1 THEN city_id ELSE lat END", "DOUBLE"),
        ("city_id = 1", "BOOLEAN"),
        ("UPPER(status)", "STRING"),
        ("order_number || 'x'", "STRING"),
        ("CHAR_LENGTH(status)", "INT"),
        ("TUMBLE_END(rowtime, INTERVAL '1' MINUTE)", "TIMESTAMP"),
        ("nosuch(city_id)", None),
    ],
)
def test_infer(expr: str, want: str | None) -> None:
    tree = parse(f"SELECT {expr} AS x FROM bookings")
    resolve(tree, {"bookings": {**BOOKINGS, "lat": "DOUBLE", "speed_kmh": "FLOAT"}})
    kind = infer(tree.expressions[0])
    assert (kind.sql(dialect="spark") if kind is not None else None) == want


def test_a_subquerys_columns_carry_the_type_of_their_expression() -> None:
    tree = parse(
        "SELECT n, k FROM (SELECT COUNT(*) AS n, city_id / 2 AS k FROM bookings"
        " GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id / 2) AS s"
    )
    resolve(tree, TABLES)
    assert [c.meta[TYPE_META].sql() for c in tree.expressions] == ["BIGINT", "INT"]


def test_untyped_tables_leave_the_query_as_it_is() -> None:
    got = translate("SELECT fare_idr / 1000 AS k FROM bookings", {"bookings": set(BOOKINGS)}).spark_sql
    assert got == "SELECT fare_idr / 1000 AS k FROM bookings"


# ---- integer arithmetic ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("select", "want"),
    [
        ("fare_idr / 1000 AS k", "fare_idr DIV 1000 AS k"),  # BIGINT / INT: BIGINT
        ("city_id / 2 AS k", "CAST(city_id DIV 2 AS INT) AS k"),  # INT / INT: INT
        ("-7 / 2 AS k", "CAST(-7 DIV 2 AS INT) AS k"),
        ("fare_idr / 1000 / city_id AS k", "fare_idr DIV 1000 DIV city_id AS k"),
        ("(fare_idr + 1) / city_id AS k", "(fare_idr + 1) DIV city_id AS k"),
        ("fare_idr / 2.0 AS k", "fare_idr / 2.0 AS k"),  # DECIMAL: as it is
        ("pickup_lat / 2 AS k", "pickup_lat / 2 AS k"),
        ("fare_idr % 7 AS m", "CAST(fare_idr % 7 AS INT) AS m"),  # MOD has its divisor's type
        ("city_id % fare_idr AS m", "city_id % fare_idr AS m"),
        ("SIGN(fare_idr) AS s", "CAST(SIGN(fare_idr) AS BIGINT) AS s"),
        (
            "SIGN(CAST(pickup_lat AS DECIMAL(5, 2))) AS s",
            "CAST(SIGN(TRY_CAST(pickup_lat AS DECIMAL(5, 2))) AS DECIMAL(5, 2)) AS s",
        ),
        ("SIGN(pickup_lat) AS s", "SIGN(pickup_lat) AS s"),
    ],
)
def test_integer_arithmetic(select: str, want: str) -> None:
    assert spark(select) == want


def test_avg_of_an_integer_is_an_integer_truncated() -> None:
    assert spark(
        "AVG(city_id) AS a, AVG(fare_idr) AS b, AVG(pickup_lat) AS c, AVG(city_id / 2) AS d", tail=WINDOW
    ) == (
        "CAST(SUM(city_id) DIV COUNT(city_id) AS INT) AS a, SUM(fare_idr) DIV COUNT(fare_idr) AS b, "
        "AVG(pickup_lat) AS c, CAST(SUM(CAST(city_id DIV 2 AS INT)) DIV COUNT(CAST(city_id DIV 2 AS INT)) AS INT) AS d"
    )


def test_a_division_of_a_subquerys_count_divides_integers() -> None:
    got = translate(
        "SELECT n / 2 AS half FROM (SELECT COUNT(*) AS n FROM bookings" + WINDOW + ") AS s", TABLES
    ).spark_sql
    assert got.startswith("SELECT n DIV 2 AS half FROM (SELECT COUNT(*) AS n")


# ---- NULLs, times, strings -------------------------------------------------------------------------


def test_greatest_and_least_are_null_when_an_argument_is() -> None:
    assert spark(
        "GREATEST(city_id, 0) AS g, LEAST(pickup_lat, pickup_long, 1.5) AS l, GREATEST(1, 2) AS k"
    ) == (
        "CASE WHEN city_id IS NULL THEN NULL ELSE GREATEST(city_id, 0) END AS g, "
        "CASE WHEN pickup_lat IS NULL OR pickup_long IS NULL THEN NULL ELSE LEAST(pickup_lat, pickup_long, 1.5) END "
        "AS l, GREATEST(1, 2) AS k"
    )


def test_extract_and_the_parts_of_a_time_are_bigint() -> None:
    assert spark(
        "EXTRACT(SECOND FROM rowtime) AS s, EXTRACT(MILLISECOND FROM rowtime) AS ms, "
        "EXTRACT(ISODOW FROM rowtime) AS d, HOUR(rowtime) AS h, WEEK(rowtime) AS w, "
        "TIMESTAMPDIFF(SECOND, rowtime, rowtime) AS t"
    ) == (
        "CAST(EXTRACT(SECOND FROM rowtime) AS BIGINT) AS s, CAST(EXTRACT(SECOND FROM rowtime) * 1000 AS BIGINT) % 1000 "
        "AS ms, CAST(EXTRACT(DAYOFWEEK_ISO FROM rowtime) AS BIGINT) AS d, CAST(HOUR(rowtime) AS BIGINT) AS h, "
        "CAST(weekofyear(rowtime) AS BIGINT) AS w, CAST(TIMESTAMPDIFF(SECOND, rowtime, rowtime) AS INT) AS t"
    )


def test_extract_of_a_unit_spark_has_not_is_refused() -> None:
    with pytest.raises(SqlError) as info:
        translate("SELECT order_number,\n  EXTRACT(EPOCH FROM rowtime) AS e FROM bookings", TABLES)
    assert (info.value.line, info.value.col) == (2, 22)
    assert info.value.reason.startswith("EXTRACT(EPOCH FROM ...) is not supported; units: YEAR, ")


def test_a_timestamp_as_text_shows_its_digits_of_second() -> None:
    assert spark(
        "CAST(rowtime AS VARCHAR) AS a, CAST(CAST(rowtime AS TIMESTAMP(0)) AS STRING) AS b, "
        "CAST(CAST(rowtime AS TIMESTAMP) AS VARCHAR) AS c, CAST(status = 'COMPLETED' AS VARCHAR) AS d, "
        "CAST(city_id AS VARCHAR) AS e"
    ) == (
        "date_format(rowtime, 'yyyy-MM-dd HH:mm:ss.SSS') AS a, "
        "date_format(date_trunc('SECOND', TRY_CAST(rowtime AS TIMESTAMP)), 'yyyy-MM-dd HH:mm:ss') AS b, "
        "date_format(TRY_CAST(rowtime AS TIMESTAMP), 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS c, "
        "UPPER(TRY_CAST(status = 'COMPLETED' AS STRING)) AS d, TRY_CAST(city_id AS STRING) AS e"
    )


# ---- FLOAT and DOUBLE ------------------------------------------------------------------------------


def test_floor_and_ceil_of_a_double_stay_double() -> None:
    assert spark(
        "FLOOR(lat) AS a, CEIL(speed_kmh) AS b, FLOOR(CAST(lat AS DECIMAL(6, 2))) AS c", "pings"
    ) == (
        "IF(ABS(lat) >= 4.503599627370496E15, lat, CAST(FLOOR(lat) AS DOUBLE)) AS a, "
        "CAST(IF(ABS(speed_kmh) >= 4.503599627370496E15, speed_kmh, CAST(CEIL(speed_kmh) AS DOUBLE)) AS FLOAT) AS b, "
        "FLOOR(TRY_CAST(lat AS DECIMAL(6, 2))) AS c"
    )


def test_float_arithmetic_is_float() -> None:
    assert spark(
        "speed_kmh / 100 AS a, EXP(speed_kmh * accuracy_m) AS b, speed_kmh + lat AS c, "
        "SUM(speed_kmh) AS d, AVG(speed_kmh) AS e",
        "pings",
        WINDOW + ", speed_kmh, accuracy_m, lat",
    ) == (
        "CAST(speed_kmh / 100 AS FLOAT) AS a, EXP(CAST(speed_kmh * accuracy_m AS FLOAT)) AS b, "
        "CAST(speed_kmh + CAST(lat AS FLOAT) AS FLOAT) AS c, "
        "CAST(SUM(speed_kmh) AS FLOAT) AS d, CAST(AVG(speed_kmh) AS FLOAT) AS e"
    )


@pytest.mark.parametrize(
    ("select", "want"),
    [
        (
            "TRUNCATE(pickup_lat, 1) AS t",
            "IF(ABS(pickup_lat) >= 4.503599627370496E15, pickup_lat, "
            "CAST(IF(pickup_lat < 0, CEIL(pickup_lat, 1), FLOOR(pickup_lat, 1)) AS DOUBLE)) AS t",
        ),
        (
            "TRUNCATE(pickup_long) AS t",
            "IF(ABS(pickup_long) >= 4.503599627370496E15, pickup_long, "
            "CAST(IF(pickup_long < 0, CEIL(pickup_long, 0), FLOOR(pickup_long, 0)) AS DOUBLE)) AS t",
        ),
        (
            "TRUNCATE(pickup_lat, -1) AS t",
            "CAST(IF(pickup_lat < 0, CEIL(pickup_lat, -1), FLOOR(pickup_lat, -1)) AS DOUBLE) AS t",
        ),
        (
            "TRUNCATE(CAST(fare_idr AS DECIMAL(12, 3)), 2) AS t",
            "IF(TRY_CAST(fare_idr AS DECIMAL(12, 3)) < 0, CEIL(TRY_CAST(fare_idr AS DECIMAL(12, 3)), 2), "
            "FLOOR(TRY_CAST(fare_idr AS DECIMAL(12, 3)), 2)) AS t",
        ),
        (
            "TRUNCATE(fare_idr, -3) AS t",
            "CAST(IF(fare_idr < 0, CEIL(fare_idr, -3), FLOOR(fare_idr, -3)) AS BIGINT) AS t",
        ),
        ("TRUNCATE(fare_idr, 2) AS t", "fare_idr AS t"),
    ],
)
def test_truncate(select: str, want: str) -> None:
    assert spark(select) == want


def test_truncate_needs_whole_places() -> None:
    with pytest.raises(SqlError) as info:
        translate("SELECT TRUNCATE(pickup_lat, 1.5) AS t FROM bookings", TABLES)
    assert (info.value.line, info.value.col, info.value.reason) == (
        1,
        29,
        "TRUNCATE(x, n): n must be a whole number of decimal places",
    )


# ---- SPLIT_INDEX -----------------------------------------------------------------------------------


def test_split_index() -> None:
    assert spark("SPLIT_INDEX(order_number, '.', 1) AS a, SPLIT_INDEX(customer_id, '||', city_id) AS b") == (
        "CASE WHEN 1 < 0 OR order_number = '' THEN NULL "
        "ELSE try_element_at(split(order_number, '\\\\.', -1), 1 + 1) END AS a, "
        "CASE WHEN city_id < 0 OR customer_id = '' THEN NULL "
        "ELSE try_element_at(split(customer_id, '\\\\|\\\\|', -1), city_id + 1) END AS b"
    )


@pytest.mark.parametrize(
    ("call", "col", "reason"),
    [
        (
            "SPLIT_INDEX(order_number, driver_id, 1)",
            34,
            "SPLIT_INDEX: the separator must be a string literal of one or more characters, such as ','",
        ),
        (
            "SPLIT_INDEX(order_number, '', 1)",
            34,
            "SPLIT_INDEX: the separator must be a string literal of one or more characters, such as ','",
        ),
        (
            "SPLIT_INDEX(order_number, ',')",
            8,
            "SPLIT_INDEX takes 3 arguments (string, separator, index), found 2",
        ),
        ("SPLIT_INDEX(order_number, ',', 'a')", 39, "SPLIT_INDEX: the index must be a whole number (from 0)"),
    ],
)
def test_split_index_refuses_what_it_cannot_split(call: str, col: int, reason: str) -> None:
    with pytest.raises(SqlError) as info:
        translate(f"SELECT {call} AS p FROM bookings", TABLES)
    assert (info.value.line, info.value.col, info.value.reason) == (1, col, reason)


# ---- DISTINCT aggregates ---------------------------------------------------------------------------


def test_distinct_aggregates_that_are_exact() -> None:
    assert spark(
        "MAX(DISTINCT fare_idr) AS a, MIN(DISTINCT status) AS b, SUM(DISTINCT city_id) AS c, "
        "AVG(DISTINCT city_id) AS d, SUM(DISTINCT CAST(fare_idr AS DECIMAL(10, 2))) AS e",
        tail=WINDOW,
    ) == (
        "MAX(fare_idr) AS a, MIN(status) AS b, "
        "IF(SIZE(COLLECT_SET(city_id)) = 0, NULL, AGGREGATE(COLLECT_SET(city_id), CAST(0 AS BIGINT), "
        "(__acc, __v) -> CAST(__acc + __v AS BIGINT))) AS c, "
        "CAST(AGGREGATE(COLLECT_SET(city_id), CAST(0 AS BIGINT), (__acc, __v) -> __acc + __v) "
        "DIV NULLIF(SIZE(COLLECT_SET(city_id)), 0) AS INT) AS d, "
        "IF(SIZE(COLLECT_SET(TRY_CAST(fare_idr AS DECIMAL(10, 2)))) = 0, NULL, "
        "AGGREGATE(COLLECT_SET(TRY_CAST(fare_idr AS DECIMAL(10, 2))), CAST(0 AS DECIMAL(20, 2)), "
        "(__acc, __v) -> CAST(__acc + __v AS DECIMAL(20, 2)))) AS e"
    )


@pytest.mark.parametrize(
    ("select", "col", "reason", "hint"),
    [
        (
            "SUM(DISTINCT pickup_lat)",
            8,
            "SUM(DISTINCT x) is supported for integers and DECIMAL only; x is DOUBLE",
            "SUM(DISTINCT CAST(x AS DECIMAL(p, s))) is exact",
        ),
        (
            "AVG(DISTINCT CAST(fare_idr AS DECIMAL(10, 2)))",
            8,
            "AVG(DISTINCT x) is supported for integers only; x is DECIMAL(10, 2)",
            "compute SUM(DISTINCT x) / DistinctCount(x) with the types you want",
        ),
    ],
)
def test_distinct_aggregates_that_are_not_exact_are_refused(
    select: str, col: int, reason: str, hint: str
) -> None:
    with pytest.raises(SqlError) as info:
        translate(f"SELECT {select} AS x FROM bookings{WINDOW}", TABLES)
    assert (info.value.line, info.value.col, info.value.reason, info.value.hint) == (1, col, reason, hint)


def test_rewrites_leave_the_input_tree_alone() -> None:
    tree = sqlglot.parse_one("SELECT GREATEST(a, b) FROM t", read="spark")
    before = tree.sql()
    from job.sql.values import VALUE_REWRITES

    for rewrite in VALUE_REWRITES:
        rewrite(tree)
    assert tree.sql() == before
