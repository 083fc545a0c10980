"""Flink/Calcite constructs → Spark SQL: golden strings for each rewrite of job.sql.flink, the read
dialect (job.sql.dialect), and no warning printed by sqlglot."""

from __future__ import annotations

import logging

import pytest

from job.errors import SqlError
from job.sql import translate
from job.sql.flink import (
    rewrite_casts,
    rewrite_constructors,
    rewrite_datetime,
    rewrite_subscripts,
    rewrite_unnest,
)
from job.sql.parse import parse
from job.sql.rewrite import render
from job.sql.scope import resolve

BOOKING = {
    "order_number": "STRING",
    "customer_id": "STRING",
    "service_type": "STRING",
    "status": "STRING",
    "event_timestamp": "TIMESTAMP",
    "tags": "ARRAY<STRING>",
    "metadata": "MAP<STRING, STRING>",
    "items": "ARRAY<STRUCT<`id`: STRING, `quantity`: INT, `name`: STRING>>",
    "route": "STRUCT<`pickup`: STRUCT<`lat`: DOUBLE, `lng`: DOUBLE>, `km`: DOUBLE>",
}
PAYMENT = {
    "order_id": "STRING",
    "customer_id": "STRING",
    "order_amount": "BIGINT",
    "event_timestamp": "TIMESTAMP",
}
TABLES = {"booking": BOOKING, "payment": PAYMENT}


def rw(fn, sql: str) -> str:  # type: ignore[no-untyped-def]
    tree = parse(sql)
    resolve(tree, TABLES)
    before = repr(tree)
    out = render(fn(tree))
    assert repr(tree) == before  # pure: the input is not changed
    return out


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        (
            "SELECT m.`key`, m.`value` FROM booking, UNNEST(booking.metadata) AS m (`key`, `value`)",
            "SELECT m.`key`, m.`value` FROM booking LATERAL VIEW explode(booking.metadata) m AS `key`, `value`",
        ),
        (
            "SELECT i.name FROM booking CROSS JOIN UNNEST(booking.items) AS i (id, quantity, name)",
            "SELECT i.name FROM booking LATERAL VIEW inline(booking.items) i AS id, quantity, name",
        ),
        (
            "SELECT tag FROM booking CROSS JOIN UNNEST(tags) AS tag",
            "SELECT tag FROM booking LATERAL VIEW explode(tags) tag AS tag",
        ),
        (
            "SELECT t.x FROM booking LEFT JOIN UNNEST(tags) AS t (x) ON TRUE",
            "SELECT t.x FROM booking LATERAL VIEW OUTER explode(tags) t AS x",
        ),
        (
            "SELECT k FROM booking, UNNEST(metadata) AS m (k, v), UNNEST(tags) AS t (tag)",
            "SELECT k FROM booking LATERAL VIEW explode(metadata) m AS k, v LATERAL VIEW explode(tags) t AS tag",
        ),
    ],
)
def test_unnest_golden(sql: str, want: str) -> None:
    assert rw(rewrite_unnest, sql) == want


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        ("SELECT CAST(status AS INT) FROM booking", "SELECT TRY_CAST(status AS INT) FROM booking"),
        ("SELECT CAST(status AS VARCHAR) FROM booking", "SELECT TRY_CAST(status AS STRING) FROM booking"),
        ("SELECT CAST(status AS VARCHAR(10)) FROM booking", "SELECT TRY_CAST(status AS STRING) FROM booking"),
        ("SELECT CAST(status AS BYTES) FROM booking", "SELECT TRY_CAST(status AS BINARY) FROM booking"),
        (
            "SELECT CAST(CAST(status AS DOUBLE) AS DECIMAL(10, 2)) FROM booking",
            "SELECT TRY_CAST(TRY_CAST(status AS DOUBLE) AS DECIMAL(10, 2)) FROM booking",
        ),
        (
            "SELECT CAST(status AS TIMESTAMP(3)) FROM booking",
            "SELECT date_trunc('MILLISECOND', TRY_CAST(status AS TIMESTAMP)) FROM booking",
        ),
        (
            "SELECT CAST(status AS TIMESTAMP(0)) FROM booking",
            "SELECT date_trunc('SECOND', TRY_CAST(status AS TIMESTAMP)) FROM booking",
        ),
        (
            "SELECT CAST(status AS BOOLEAN), CAST(1 AS BIGINT) FROM booking",
            "SELECT TRY_CAST(status AS BOOLEAN), TRY_CAST(1 AS BIGINT) FROM booking",
        ),
    ],
)
def test_cast_golden(sql: str, want: str) -> None:
    assert rw(rewrite_casts, sql) == want


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        (
            "SELECT tags[1], metadata['k'], items[2].name FROM booking",
            "SELECT try_element_at(tags, 1), try_element_at(metadata, 'k'), try_element_at(items, 2).name FROM booking",
        ),
    ],
)
def test_subscript_golden(sql: str, want: str) -> None:
    assert rw(rewrite_subscripts, sql) == want


def test_constructors_golden() -> None:
    assert (
        rw(rewrite_constructors, "SELECT MAP['a', 1, 'b', 2] FROM booking")
        == "SELECT map('a', 1, 'b', 2) FROM booking"
    )


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        (
            "SELECT DATE_FORMAT(rowtime, 'yyyy-MM-dd''T''HH:mm:ss.SSS') FROM booking",
            "SELECT DATE_FORMAT(rowtime, 'yyyy-MM-dd\\'T\\'HH:mm:ss.SSS') FROM booking",
        ),
        (
            "SELECT DATE_FORMAT(rowtime, 'EEE, d MMM yyyy hh a') FROM booking",
            "SELECT DATE_FORMAT(rowtime, 'EEE, d MMM yyyy hh a') FROM booking",
        ),
        (
            "SELECT FROM_UNIXTIME(1700000000), FROM_UNIXTIME(1700000000, 'HH:mm') FROM booking",
            "SELECT FROM_UNIXTIME(1700000000), FROM_UNIXTIME(1700000000, 'HH:mm') FROM booking",
        ),
        (
            "SELECT UNIX_TIMESTAMP(), CURRENT_TIMESTAMP FROM booking",
            "SELECT UNIX_TIMESTAMP(CURRENT_TIMESTAMP()), CURRENT_TIMESTAMP() FROM booking",
        ),
        (
            "SELECT UNIX_TIMESTAMP(status, 'yyyy-MM-dd') FROM booking",
            "SELECT CASE WHEN status IS NULL THEN CAST(NULL AS BIGINT) ELSE COALESCE(UNIX_TIMESTAMP(try_to_timestamp("
            "status, 'yyyy-MM-dd')), -CAST(9223372036854775807 AS BIGINT) - CAST(1 AS BIGINT)) END FROM booking",
        ),
        ("SELECT FLOOR(rowtime TO HOUR) FROM booking", "SELECT date_trunc('HOUR', rowtime) FROM booking"),
        (
            "SELECT CEIL(rowtime TO DAY) FROM booking",
            "SELECT IF(date_trunc('DAY', rowtime) = rowtime, rowtime, date_trunc('DAY', rowtime) + INTERVAL '1' DAY) "
            "FROM booking",
        ),
    ],
)
def test_datetime_golden(sql: str, want: str) -> None:
    assert rw(rewrite_datetime, sql) == want


@pytest.mark.parametrize(
    ("sql", "needle", "col"),
    [
        ("SELECT DATE_FORMAT(rowtime, 'YYYY-ww') FROM booking", "'Y' (week-based year)", 8),
        ("SELECT UNIX_TIMESTAMP(status, 'HH:mm:ss.S') FROM booking", "use SSS", 8),
        ("SELECT CAST(status AS TIME) FROM booking", "CAST to TIME is not supported", 13),
        (
            "SELECT x FROM booking, UNNEST(booking.items) AS i (a, b)",
            "gives 3 column(s) (id, quantity, name)",
            52,
        ),
        ("SELECT x FROM booking, UNNEST(booking.status) AS s (a)", "UNNEST needs an array or a map", 31),
    ],
)
def test_dialect_errors(sql: str, needle: str, col: int) -> None:
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    assert needle in str(info.value)
    assert (info.value.line, info.value.col) == (1, col)


def test_calcite_strings() -> None:
    """'' is a quote and a backslash is itself, as in Calcite; Spark's output escapes both."""
    got = translate("SELECT status FROM booking WHERE status LIKE 'it''s\\_%' ESCAPE '\\'", TABLES).spark_sql
    assert got.startswith("SELECT status FROM booking WHERE status LIKE 'it\\'s\\\\_%' ESCAPE '\\\\'")


def test_nothing_is_printed(capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    """sqlglot warns (on stderr, through logging) about constructs its Spark generator rewrites itself,
    e.g. an UNNEST without column names; no translation prints anything."""
    caplog.set_level(logging.DEBUG)
    for sql in [
        "SELECT tag FROM booking CROSS JOIN UNNEST(tags) AS tag",
        "SELECT m.`key` FROM booking, UNNEST(booking.metadata) AS m (`key`, `value`)",
        "SELECT i.name FROM booking, UNNEST(booking.items) AS i (id, quantity, name)",
    ]:
        translate(sql, TABLES)
    # TRUNCATE(x, n) is Flink's (job.sql.values), not sqlglot's silent CAST(... AS BIGINT)
    assert (
        translate("SELECT TRUNCATE(order_amount, -2) AS t FROM payment", TABLES).spark_sql
        == "SELECT CAST(IF(order_amount < 0, CEIL(order_amount, -2), FLOOR(order_amount, -2)) AS BIGINT) AS t FROM payment"
    )
    out, err = capsys.readouterr()
    assert (out, err) == ("", "")
    assert [r for r in caplog.records if r.name.startswith("sqlglot") and r.levelno >= logging.WARNING] == []
