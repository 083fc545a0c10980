"""Golden translations for what an outside check of Flink's documented queries found (bench/flink_compat/
cases_outsider.py): a window TVF called without TABLE(...), HAVING's columns, the rowtime of a window as an output
column (end - 1 ms, SESSION_ROWTIME too), Flink's EXPR$n names, deduplication whose subquery leaves out rowtime,
QUALIFY, and refusals inside a window TVF's subquery at the user's line and column."""

from __future__ import annotations

import pytest
import sqlglot

from job.errors import SqlError
from job.sql import translate
from job.sql.flink_names import name_outputs
from tests.job.sql.test_flink_values import TABLES

TUMBLE_2 = "TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES)"


def refused(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    return info.value


def test_a_window_tvf_without_table_is_the_same_window() -> None:
    bare = translate(
        f"SELECT window_start, COUNT(*) AS n FROM {TUMBLE_2} GROUP BY window_start, window_end", TABLES
    )
    wrapped = translate(
        f"SELECT window_start, COUNT(*) AS n FROM TABLE({TUMBLE_2}) GROUP BY window_start, window_end", TABLES
    )
    assert (
        bare.spark_sql
        == wrapped.spark_sql
        == (
            "SELECT window.start AS window_start, COUNT(*) AS n FROM bookings GROUP BY window(rowtime, '2 minutes')"
        )
    )


def test_having_reads_its_columns_and_refuses_an_unknown_one() -> None:
    t = translate(
        "SELECT window_end FROM HOP(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES, "
        "INTERVAL '2' MINUTES) GROUP BY window_start, window_end HAVING SUM(fare_idr) > 0",
        TABLES,
    )
    assert t.columns["bookings"] == ["fare_idr"]  # the source decodes it: Spark needs it for HAVING
    assert (
        translate(
            "SELECT COUNT(*) AS n FROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE) HAVING n > 1",
            TABLES,
        ).columns["bookings"]
        == []
    )  # an output column, not the stream's
    err = refused(
        "SELECT COUNT(*) AS n\nFROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)\n"
        "HAVING SUM(fares) > 0"
    )
    assert (err.line, err.col, err.reason) == (3, 12, "unknown column fares")


def test_a_windows_rowtime_output_is_its_end_less_1_ms() -> None:
    got = translate(
        "SELECT city_id, TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id",
        TABLES,
    ).spark_sql
    assert got == (
        "SELECT city_id, date_trunc('MILLISECOND', window_time(__dagger_window)) AS rt FROM (SELECT "
        "city_id, window AS __dagger_window FROM bookings GROUP BY city_id, window(rowtime, '1 minutes')) "
        "AS __dagger_rowtime"
    )
    nested = translate(
        "SELECT rt, n FROM (SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt, COUNT(*) AS n "
        "FROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)) WHERE n > 1",
        TABLES,
    ).spark_sql
    assert nested.startswith(
        "SELECT date_trunc('MILLISECOND', rt) AS rt, n FROM (SELECT window_time(__dagger_window) "
        "AS rt, n FROM (SELECT window AS __dagger_window"
    )  # inside: an event time, as it is


def test_session_rowtime() -> None:
    got = translate(
        "SELECT driver_id, SESSION_ROWTIME(rowtime, INTERVAL '30' SECOND) AS rt FROM pings "
        "GROUP BY SESSION(rowtime, INTERVAL '30' SECOND), driver_id",
        TABLES,
    ).spark_sql
    assert got == (
        "SELECT driver_id, date_trunc('MILLISECOND', window_time(__dagger_window)) AS rt FROM (SELECT "
        "driver_id, session_window AS __dagger_window FROM pings GROUP BY driver_id, "
        "session_window(rowtime, '30 seconds')) AS __dagger_rowtime"
    )


def test_unnamed_outputs_get_flinks_names() -> None:
    t = translate(
        "SELECT order_number, fare_idr + 1, b.city_id, CAST(city_id AS BIGINT), fare_idr AS f "
        "FROM bookings AS b",
        TABLES,
    )
    assert t.output_columns == ["order_number", "EXPR$1", "city_id", "EXPR$3", "f"]
    assert t.spark_sql == (
        "SELECT order_number, fare_idr + 1 AS `EXPR$1`, b.city_id, TRY_CAST(city_id AS BIGINT) AS "
        "`EXPR$3`, fare_idr AS f FROM bookings AS b"
    )
    agg = translate(
        "SELECT customer_id, SUM(fare_idr) FROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), "
        "customer_id",
        TABLES,
    )
    assert agg.output_columns == ["customer_id", "EXPR$1"]


def test_naming_is_pure_and_leaves_subqueries_and_named_queries_alone() -> None:
    tree = sqlglot.parse_one("SELECT a + 1 FROM (SELECT b + 1 FROM t) UNION ALL SELECT c * 2 FROM u")
    before = tree.sql()
    assert name_outputs(tree).sql() == (
        'SELECT a + 1 AS "EXPR$0" FROM (SELECT b + 1 FROM t) UNION ALL SELECT c * 2 AS "EXPR$0" FROM u'
    )
    assert tree.sql() == before
    named = sqlglot.parse_one("SELECT a, t.b, * FROM t")
    assert name_outputs(named) is named


def test_a_deduplication_whose_subquery_leaves_out_rowtime() -> None:
    t = translate(
        "SELECT order_number FROM (SELECT order_number, driver_id, ROW_NUMBER() OVER (PARTITION BY "
        "driver_id ORDER BY rowtime) AS rn FROM bookings) WHERE rn <= 1",
        TABLES,
    )
    assert t.spark_sql == "SELECT order_number FROM __dagger_dedup_0"
    assert [(d.spark_sql, d.keys) for d in t.dedups] == [
        ("SELECT order_number, driver_id, rowtime FROM bookings", ["driver_id"])
    ]


def test_a_window_deduplication_keys_on_the_windows_columns() -> None:
    t = translate(
        "SELECT order_number, window_start FROM (SELECT order_number, window_start, window_end, "
        "ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY rowtime) AS rn "
        f"FROM TABLE({TUMBLE_2})) WHERE rn = 1",
        TABLES,
    )
    start = "timestamp_micros(UNIX_MICROS(rowtime) - pmod(UNIX_MICROS(rowtime), 120000000))"
    end = "timestamp_micros(UNIX_MICROS(rowtime) - pmod(UNIX_MICROS(rowtime), 120000000) + 120000000)"
    assert [(d.spark_sql, d.keys) for d in t.dedups] == [
        (
            f"SELECT order_number, {start} AS window_start, {end} AS window_end, rowtime FROM bookings",
            ["window_start", "window_end"],
        )
    ]


def test_qualify_is_the_deduplication_subquery() -> None:
    t = translate(
        "SELECT order_number, b.rowtime FROM bookings AS b WHERE city_id = 1\n"
        "QUALIFY ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime) = 1",
        TABLES,
    )
    assert t.spark_sql == "SELECT order_number, b.rowtime FROM __dagger_dedup_0 AS b"
    assert [(d.spark_sql, d.keys) for d in t.dedups] == [
        ("SELECT * FROM bookings AS b WHERE city_id = 1 AND b.__dagger_wm >= 0", ["customer_id"])
    ]
    err = refused(
        "SELECT order_number\nFROM bookings\nQUALIFY ROW_NUMBER() OVER (PARTITION BY city_id "
        "ORDER BY fare_idr DESC) <= 2"
    )
    assert (err.line, err.col) == (3, 9)
    assert err.reason.startswith("ROW_NUMBER() OVER (...) orders by the event time only")


def test_a_session_over_the_whole_stream_is_refused_before_spark() -> None:
    for sql, at in [
        ("SELECT COUNT(*) AS n\nFROM bookings\nGROUP BY SESSION(rowtime, INTERVAL '1' MINUTE)", (3, 10)),
        (
            "SELECT window_start, COUNT(*) AS n\nFROM SESSION(TABLE bookings, DESCRIPTOR(rowtime), "
            "INTERVAL '1' MINUTES)\nGROUP BY window_start, window_end",
            (2, 6),
        ),
    ]:
        err = refused(
            sql
        )  # Spark: "Global aggregation with session window in streaming query is not supported"
        assert (err.line, err.col) == at
        assert err.reason == (
            "a SESSION window over the whole stream (no key in GROUP BY) is not supported: Spark "
            "keeps sessions per key"
        )
        assert err.hint is not None and err.hint.startswith("GROUP BY SESSION(rowtime, INTERVAL gap), k")


@pytest.mark.parametrize(
    ("sql", "line", "col"),
    [
        (
            f"SELECT * FROM (\n  SELECT order_number,\n    ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
            f"ORDER BY fare_idr DESC) AS rownum\n  FROM TABLE({TUMBLE_2}))\nWHERE rownum <= 2",
            3,
            5,
        ),
        (
            f"SELECT b.order_number\nFROM (SELECT * FROM TABLE({TUMBLE_2})) b\nWHERE b.driver_id IN (SELECT driver_id "
            "FROM pings)",
            3,
            7,
        ),
    ],
)
def test_a_refusal_inside_a_window_tvfs_subquery_is_at_the_users_line_and_column(
    sql: str, line: int, col: int
) -> None:
    err = refused(sql)
    assert (err.line, err.col) == (line, col)
