"""Flink's values at the edges (job.sql.flink_numbers, job.sql.flink_builtins, job.sql.flink): golden Spark SQL of
each rewrite, and the refusals at their line and column. What the rewritten queries give is checked against Flink
2.3's values by bench/flink_compat's ``fn-edges`` and ``fn-edge-aggregates`` groups (tests/bench/test_flink_compat.py).
"""

from __future__ import annotations

import pytest

from job.errors import SqlError
from job.sql import translate
from tests.job.sql.test_flink_values import TABLES, WINDOW, spark

_SATURATED_INT = (
    "CASE WHEN ISNAN(pickup_lat) THEN CAST(0 AS INT) WHEN pickup_lat >= 2.147483647E9 THEN "
    "CAST(2147483647 AS INT) WHEN pickup_lat <= -2.147483648E9 THEN CAST((-2147483648) AS INT) "
    "ELSE CAST(pickup_lat AS INT) END"
)


@pytest.mark.parametrize(
    ("select", "want"),
    [
        # a narrower integer keeps the low bits (Java's cast); Spark's ANSI cast fails, its TRY_CAST is NULL
        ("CAST(fare_idr AS INT) AS i", "CAST(SHIFTRIGHT(SHIFTLEFT(fare_idr, 32), 32) AS INT) AS i"),
        ("TRY_CAST(fare_idr AS INT) AS i", "CAST(SHIFTRIGHT(SHIFTLEFT(fare_idr, 32), 32) AS INT) AS i"),
        (
            "CAST(city_id AS TINYINT) AS i",
            "CAST(SHIFTRIGHT(SHIFTLEFT(CAST(city_id AS BIGINT), 56), 56) AS TINYINT) AS i",
        ),
        ("CAST(city_id AS BIGINT) AS i", "TRY_CAST(city_id AS BIGINT) AS i"),
        # a DOUBLE saturates, NaN is 0
        ("CAST(pickup_lat AS INT) AS i", f"{_SATURATED_INT} AS i"),
        (
            "CAST(pickup_lat AS BIGINT) AS i",
            "CASE WHEN ISNAN(pickup_lat) THEN CAST(0 AS BIGINT) WHEN pickup_lat >= 9.223372036854775807E18 THEN "
            "CAST(9223372036854775807 AS BIGINT) WHEN pickup_lat <= -9.223372036854775808E18 THEN "
            "CAST((-9223372036854775807 - 1) AS BIGINT) ELSE CAST(pickup_lat AS BIGINT) END AS i",
        ),
        (
            "CAST(pickup_lat AS SMALLINT) AS i",
            f"CAST(SHIFTRIGHT(SHIFTLEFT(CAST({_SATURATED_INT} AS BIGINT), 48), 48) AS SMALLINT) AS i",
        ),
        (
            "CAST(CAST(fare_idr AS DECIMAL(20, 0)) AS INT) AS i",
            "CAST(SHIFTRIGHT(SHIFTLEFT(CAST(TRY_CAST(fare_idr AS DECIMAL(20, 0)) AS BIGINT), 32), 32) AS INT) AS i",
        ),
        # a string with a fraction: the whole part
        (
            "CAST(status AS INT) AS i",
            "CASE WHEN status RLIKE '^ *[+-]?([0-9]+[.][0-9]*|[.][0-9]+) *$' THEN TRY_CAST(CONCAT(REGEXP_EXTRACT(status, "
            "'^ *([+-]?)'), '0', REGEXP_EXTRACT(status, '([0-9]*)[.]')) AS INT) ELSE TRY_CAST(status AS INT) END AS i",
        ),
        # a rewrite's own cast (its value fits) is left alone
        ("city_id / 2 AS k", "CAST(city_id DIV 2 AS INT) AS k"),
        # IEEE division: ±Infinity, NaN for a zero divisor
        (
            "pickup_lat / (city_id - 1) AS q",
            "IF((city_id - 1) = 0, pickup_lat * POWER((city_id - 1), -1), pickup_lat / (city_id - 1)) AS q",
        ),
        (
            "fare_idr / pickup_lat AS q",
            "IF(pickup_lat = 0, fare_idr * POWER(pickup_lat, -1), fare_idr / pickup_lat) AS q",
        ),
        ("pickup_lat / 0 AS q", "IF(0 = 0, pickup_lat * POWER(0, -1), pickup_lat / 0) AS q"),
        ("pickup_lat / 2 AS q", "pickup_lat / 2 AS q"),
        ("fare_idr / 2.5 AS q", "fare_idr / 2.5 AS q"),
    ],
)
def test_number_edges(select: str, want: str) -> None:
    assert spark(select) == want


@pytest.mark.parametrize(
    ("select", "want"),
    [
        ("LOCATE('E', status, 0) AS l", "LOCATE('E', status, 1) AS l"),
        ("LOCATE('E', status, 3) AS l", "LOCATE('E', status, 3) AS l"),
        (
            "LOCATE('E', status, city_id) AS l",
            "CASE WHEN city_id IS NULL THEN CAST(NULL AS INT) ELSE LOCATE('E', status, IF(city_id < 1, 1, city_id)) END AS l",
        ),
        ("SUBSTRING(status, 2, -1) AS s", "CAST(NULL AS STRING) AS s"),
        (
            "SUBSTRING(status, 2, city_id) AS s",
            "CASE WHEN city_id < 0 THEN CAST(NULL AS STRING) ELSE SUBSTRING(status, 2, city_id) END AS s",
        ),
        ("SUBSTRING(status, -3) AS s", "SUBSTRING(status, -3) AS s"),
        ("TO_DATE(status) AS d", "try_to_date(status) AS d"),
        ("TO_DATE(status, 'dd/MM/yyyy') AS d", "try_to_date(status, 'dd/MM/yyyy') AS d"),
        (
            "STR_TO_MAP(status) AS m",
            "AGGREGATE(SLICE(split(status, ',', -1), 1, COALESCE(ARRAY_MAX(TRANSFORM(split(status, ',', -1), (__x, __i) -> "
            "IF(__x = '', 0, __i + 1))), 0)), CAST(MAP() AS MAP<STRING, STRING>), (__m, __p) -> map_concat(map_filter(__m, "
            "(__k, __v) -> __k <> try_element_at(split(__p, '=', 2), 1)), MAP(try_element_at(split(__p, '=', 2), 1), "
            "try_element_at(split(__p, '=', 2), 2)))) AS m",
        ),
        (
            "REGEXP_EXTRACT(status, '(X)?(C)', 1) AS e",
            "CASE WHEN NOT status RLIKE '(X)?(C)' THEN NULL WHEN regexp_extract(status, '(X)?(C)', 1) <> '' OR 1 = 0 OR "
            "status RLIKE '(?:(X)?(C))\\\\1' THEN regexp_extract(status, '(X)?(C)', 1) END AS e",
        ),
        (
            "FLOOR(rowtime TO WEEK) AS w",
            "DATE_TRUNC('WEEK', rowtime + INTERVAL '1' DAY) - INTERVAL '1' DAY AS w",
        ),
        (
            "CEIL(rowtime TO QUARTER) AS q",
            "IF(date_trunc('QUARTER', rowtime) = rowtime, rowtime, date_trunc('QUARTER', rowtime) + INTERVAL '3' MONTH) AS q",
        ),
        (
            "FLOOR(CAST(rowtime AS DATE) TO MONTH) AS m",
            "CAST(date_trunc('MONTH', TRY_CAST(rowtime AS DATE)) AS DATE) AS m",
        ),
        ("DATE_FORMAT(rowtime, 'uuuu-MM ''u''') AS y", "DATE_FORMAT(rowtime, 'yyyy-MM \\'u\\'') AS y"),
        ("DATE_FORMAT(rowtime, 'ss.SS') AS s", "DATE_FORMAT(rowtime, 'ss.SS') AS s"),
        (
            "DATE_FORMAT(status, 'HH:mm') AS t",
            "DATE_FORMAT(try_to_timestamp(SUBSTRING(status, 1, 19), 'yyyy-MM-dd HH:mm:ss'), 'HH:mm') AS t",
        ),
    ],
)
def test_function_edges(select: str, want: str) -> None:
    assert spark(select) == want


def test_first_and_last_value_skip_nulls() -> None:
    assert spark("FIRST_VALUE(fare_idr) AS f, LAST_VALUE(status) AS l", tail=WINDOW) == (
        "first_value(fare_idr, TRUE) AS f, last_value(status, TRUE) AS l"
    )


@pytest.mark.parametrize(
    ("select", "col", "reason", "hint"),
    [
        ("TYPEOF(city_id) AS t", 1, "TYPEOF is not supported", "CAST(x AS t)"),
        ("PROCTIME() > rowtime AS p", 1, "PROCTIME() is not supported", "CURRENT_TIMESTAMP"),
        ("JSON_VALUE(status, '$.a') AS j", 1, "JSON_VALUE is not supported", "JsonQuery(json, path)"),
        ("JSON_QUERY(status, '$.a') AS j", 1, "JSON_QUERY is not supported", "JsonQuery(json, path)"),
        (
            "JSON_EXISTS(status, '$.a') AS j",
            1,
            "JSON_EXISTS is not supported",
            "JsonQuery(json, path) IS NOT NULL",
        ),
        (
            "DATE_FORMAT(rowtime, 'HH:mm Z') AS t",
            1,
            "DATE_FORMAT pattern 'HH:mm Z': 'Z' (a time zone) is not supported",
            "FormatTimeInZone",
        ),
        ("UNIX_TIMESTAMP(status, 'HH:mm:ss.S') AS t", 1, "datetime pattern 'HH:mm:ss.S': use SSS", None),
        ("DATE_FORMAT(status, 'u') AS t", 1, "datetime pattern 'u': 'u' (day number of week)", "DAYOFWEEK"),
    ],
)
def test_what_cannot_run_is_refused_at_its_place(
    select: str, col: int, reason: str, hint: str | None
) -> None:
    with pytest.raises(SqlError) as info:
        translate(f"SELECT order_number,\n{select} FROM bookings", TABLES)
    assert (info.value.line, info.value.col) == (2, col)
    assert info.value.reason.startswith(reason)
    assert hint is None or hint in (info.value.hint or "")
