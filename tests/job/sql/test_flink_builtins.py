"""Flink's built-ins and aggregates where Spark's differ (job.sql.flink_builtins, job.sql.flink_aggregates, and
the type rules of job.sql.values they extend): golden Spark SQL of each rewrite. What the rewritten queries give
is checked against Flink 2.3's values by bench/flink_compat's function groups (tests/bench/test_flink_compat.py)."""

from __future__ import annotations

import pytest

from job.errors import SqlError
from job.sql import translate
from tests.job.sql.test_flink_values import TABLES, WINDOW, spark


@pytest.mark.parametrize(
    ("select", "want"),
    [
        ("SHA256(order_number) AS h", "sha2(order_number, 256) AS h"),
        ("SHA512(status) AS h", "sha2(status, 512) AS h"),
        ("IS_DIGIT(order_number) AS d", "COALESCE(order_number RLIKE '^\\\\p{Nd}+$', FALSE) AS d"),
        ("IS_ALPHA(status) AS a", "COALESCE(status RLIKE '^\\\\p{L}+$', FALSE) AS a"),
        ("IS_DIGIT(city_id) AS n", "NOT city_id IS NULL AS n"),
        ("TO_TIMESTAMP_LTZ(fare_idr, 3) AS t", "timestamp_millis(fare_idr) AS t"),
        ("TO_TIMESTAMP_LTZ(fare_idr, 0) AS t", "timestamp_seconds(fare_idr) AS t"),
        ("TO_TIMESTAMP_LTZ(fare_idr) AS t", "timestamp_millis(fare_idr) AS t"),
        ("LOG10(fare_idr) AS l, LOG(10, fare_idr) AS q", "log10(fare_idr) AS l, LOG(10, fare_idr) AS q"),
        (
            "REGEXP_EXTRACT(status, '(C)(O)') AS d",
            "CASE WHEN status RLIKE '(C)(O)' THEN regexp_extract(status, '(C)(O)', 0) END AS d",
        ),
        (
            "REGEXP_EXTRACT(status, '(C)', 1) AS e",
            "CASE WHEN NOT status RLIKE '(C)' THEN NULL WHEN regexp_extract(status, '(C)', 1) <> '' OR 1 = 0 OR "
            "status RLIKE '(?:(C))\\\\1' THEN regexp_extract(status, '(C)', 1) END AS e",
        ),
        ("TO_TIMESTAMP(status) AS t", "try_to_timestamp(status, 'yyyy-MM-dd HH:mm:ss') AS t"),
        ("TO_TIMESTAMP(status, 'dd/MM/yyyy') AS t", "try_to_timestamp(status, 'dd/MM/yyyy') AS t"),
        ("FROM_BASE64(status) AS b", "CAST(UNBASE64(status) AS STRING) AS b"),
        (
            "INITCAP(status) AS i",
            "ARRAY_JOIN(TRANSFORM(split(status, '(?<=[^A-Za-z0-9])', -1), __w -> CONCAT(TRANSLATE(SUBSTRING(__w, 1, 1), "
            "'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'), TRANSLATE(SUBSTRING(__w, 2), "
            "'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'))), '') AS i",
        ),
        ("FLOOR(city_id) AS f, CEIL(fare_idr) AS c", "city_id AS f, fare_idr AS c"),
    ],
)
def test_flink_builtins(select: str, want: str) -> None:
    assert spark(select) == want


def test_float_with_a_double_is_a_float_and_so_is_its_sign() -> None:
    assert spark("SIGN(speed_kmh) AS s, speed_kmh * lat AS p", "pings") == (
        "CAST(SIGN(speed_kmh) AS FLOAT) AS s, CAST(speed_kmh * CAST(lat AS FLOAT) AS FLOAT) AS p"
    )


@pytest.mark.parametrize(
    ("select", "want"),
    [
        ("SUM(city_id) AS s", "CAST(SUM(city_id) AS INT) AS s"),
        ("SUM(fare_idr) AS s", "SUM(fare_idr) AS s"),
        ("COUNT(*) FILTER (WHERE city_id = 1) AS c", "COUNT(CASE WHEN city_id = 1 THEN 1 END) AS c"),
        (
            "AVG(fare_idr) FILTER (WHERE city_id = 1) AS a",
            "SUM(CASE WHEN city_id = 1 THEN fare_idr END) DIV COUNT(CASE WHEN city_id = 1 THEN fare_idr END) AS a",
        ),
        (
            "SUM(city_id) FILTER (WHERE status = 'COMPLETED') AS s",
            "CAST(SUM(CASE WHEN status = 'COMPLETED' THEN city_id END) AS INT) AS s",
        ),
        ("AVG(NULLIF(fare_idr, 0)) AS a", "SUM(NULLIF(fare_idr, 0)) DIV COUNT(NULLIF(fare_idr, 0)) AS a"),
        (
            "VAR_POP(fare_idr) AS v, STDDEV_SAMP(city_id) AS d",
            "CAST(VAR_POP(fare_idr) AS BIGINT) AS v, CAST(STDDEV_SAMP(city_id) AS INT) AS d",
        ),
        ("STDDEV_SAMP(pickup_lat) AS d", "STDDEV_SAMP(pickup_lat) AS d"),
    ],
)
def test_flink_aggregates(select: str, want: str) -> None:
    assert spark(select, tail=WINDOW) == want


@pytest.mark.parametrize(
    ("select", "col", "reason"),
    [
        (
            "REGEXP_EXTRACT(status, '(C)', 2) AS e",
            31,
            "REGEXP_EXTRACT: the regular expression '(C)' has 1 group(s), so the index must be 0 to 1, found 2",
        ),
        (
            "TO_TIMESTAMP_LTZ(fare_idr, 6) AS t",
            28,
            "TO_TIMESTAMP_LTZ(n, precision): the precision must be 0 (epoch seconds) or 3 (epoch milliseconds)",
        ),
        ("IS_ALPHA(city_id) AS a", 10, "IS_ALPHA takes a string, found INT"),
        ("SHA256(status, 1) AS h", 1, "SHA256(s) takes 1 argument, found 2"),
    ],
)
def test_what_cannot_run_is_refused_at_its_place(select: str, col: int, reason: str) -> None:
    with pytest.raises(SqlError) as info:
        translate(f"SELECT order_number,\n{select} FROM bookings", TABLES)
    assert (info.value.line, info.value.col, info.value.reason) == (2, col, reason)
    assert info.value.hint or "SHA256" in reason
