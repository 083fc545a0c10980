"""Flink constructs that run after a rewrite, and those refused before Spark starts (line, column, what to
write instead): job.sql.flink, job.sql.dialect, job.sql.parse, job.sql.validate.check_spark_functions."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlglot import exp

from bench.flink_compat.cases import CASES, REFUSED, Refusal
from bench.flink_compat.cases_functions import GROUPS
from job.errors import SqlError
from job.sql import translate
from job.sql.validate import check_spark_functions
from tests.job.sql.test_flink_values import TABLES


def refused(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    return info.value


# ---- the comma-form interval join -------------------------------------------------------------------


def test_a_comma_join_becomes_a_join_on_its_conditions() -> None:
    t = translate(
        "SELECT b.order_number, p.driver_status\nFROM bookings b, pings p\n"
        "WHERE b.driver_id = p.driver_id AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE"
        " AND b.city_id = 1",
        TABLES,
    )
    assert t.spark_sql == (
        "SELECT b.order_number, p.driver_status FROM bookings AS b JOIN pings AS p ON b.driver_id = p.driver_id "
        "AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE "
        "WHERE b.city_id = 1 AND b.__dagger_wm >= 0 AND p.__dagger_wm >= 0"
    )
    assert t.join_lag_ms == 300_000  # as the JOIN ... ON form's


def test_a_comma_join_with_every_condition_in_on_has_no_where() -> None:
    t = translate(
        "SELECT b.order_number FROM bookings AS b, pings AS p WHERE b.driver_id = p.driver_id "
        "AND p.rowtime BETWEEN b.rowtime - INTERVAL '1' MINUTE AND b.rowtime",
        TABLES,
    )
    assert t.spark_sql == (
        "SELECT b.order_number FROM bookings AS b JOIN pings AS p ON b.driver_id = p.driver_id "
        "AND p.rowtime BETWEEN b.rowtime - INTERVAL '1' MINUTE AND b.rowtime"
    )


def test_a_comma_join_with_nothing_linking_the_tables_is_refused() -> None:
    err = refused("SELECT b.order_number\nFROM bookings b, pings p\nWHERE b.city_id = 1")
    assert (err.line, err.col) == (2, 18)
    assert (
        err.reason
        == "p is joined with no condition linking it to b: a cross join of streams is not supported"
    )
    assert err.hint == (
        "name both tables in a condition: WHERE b.k = p.k AND p.rowtime BETWEEN b.rowtime AND "
        "b.rowtime + INTERVAL '5' MINUTE"
    )


# ---- simple CASE with several values ----------------------------------------------------------------


def test_simple_case_with_several_values_in_a_when() -> None:
    got = translate(
        "SELECT CASE status WHEN 'COMPLETED', 'DRIVER_FOUND' THEN 'ok' WHEN 'CANCELLED' THEN 'lost' "
        "ELSE 'open' END AS state, CASE city_id + 1 WHEN 2, 3 THEN 'x' END AS c, "
        "CASE vehicle_type WHEN 'CAR' THEN 4 ELSE 2 END AS wheels FROM bookings",
        TABLES,
    ).spark_sql
    assert got == (
        "SELECT CASE WHEN status IN ('COMPLETED', 'DRIVER_FOUND') THEN 'ok' WHEN status = 'CANCELLED' "
        "THEN 'lost' ELSE 'open' END AS state, CASE WHEN (city_id + 1) IN (2, 3) THEN 'x' END AS c, "
        "CASE vehicle_type WHEN 'CAR' THEN 4 ELSE 2 END AS wheels FROM bookings"
    )


@pytest.mark.parametrize(
    ("sql", "col", "reason"),
    [
        (
            "SELECT CASE status WHEN 'A', THEN 1 END AS x FROM bookings",
            30,
            "Expected a value after the comma in WHEN (near 'THEN')",
        ),
        (
            "SELECT CASE status WHEN THEN 1 END AS x FROM bookings",
            25,
            "Expected a value or a condition after WHEN (near 'THEN')",
        ),
    ],
)
def test_a_when_without_a_value_says_so(sql: str, col: int, reason: str) -> None:
    err = refused(sql)
    assert (err.line, err.col, err.reason) == (1, col, reason)


# ---- refused, with what to write instead -------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "line", "col", "reason", "hint_starts"),
    [
        (
            "SELECT order_number,\n  ROW_NUMBER() OVER (PARTITION BY order_number ORDER BY rowtime) AS rn FROM bookings",
            2,
            3,
            "ROW_NUMBER() OVER (...) (Top-N, deduplication) is not supported on streams: it retracts rows it has "
            "emitted",
            "to keep each key's first row in event time: SELECT ... FROM (SELECT *, ROW_NUMBER() OVER",
        ),
        (
            "SELECT * FROM (\n  SELECT order_number, ROW_NUMBER() OVER (PARTITION BY order_number ORDER BY rowtime) AS rn"
            "\n  FROM bookings) WHERE rn = 1",
            2,
            10,
            "a deduplication's subquery must output rowtime, the event time it "
            "orders by, when the query selects * from it",
            "SELECT ... FROM (SELECT *, ROW_NUMBER() OVER",
        ),
        (
            "SELECT order_number, SUM(fare_idr) OVER (PARTITION BY customer_id ORDER BY rowtime\n"
            "  RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS s FROM bookings",
            1,
            22,
            "OVER aggregations are not supported on streams; use a window in GROUP BY",
            "GROUP BY TUMBLE(rowtime, ",
        ),
        (
            "SELECT order_number FROM bookings\nWHERE driver_id IN (SELECT driver_id FROM pings WHERE driver_status = 'X')",
            2,
            7,
            "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported: streaming "
            "subqueries are not supported",
            "join the streams instead",
        ),
        (
            "SELECT order_number FROM bookings WHERE EXISTS (SELECT 1 FROM pings)",
            1,
            56,
            "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported: streaming "
            "subqueries are not supported",
            "join the streams instead",
        ),
        (
            "SELECT order_number, (SELECT MAX(lat) FROM pings) AS m FROM bookings",
            1,
            30,
            "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported: streaming "
            "subqueries are not supported",
            "join the streams instead",
        ),
        (
            "SELECT DISTINCT vehicle_type FROM bookings",
            1,
            17,
            "SELECT DISTINCT is not supported on streams",
            "GROUP BY the columns within a window",
        ),
        (
            "SELECT window_start, COUNT(*) AS n\nFROM TABLE(\n  TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), "
            "INTERVAL '1' MINUTES, INTERVAL '10' SECONDS))\nGROUP BY window_start, window_end",
            3,
            78,
            "the OFFSET of a TUMBLE window is not supported: windows start at whole multiples of their size (UTC)",
            "leave out the offset",
        ),
        (
            "SELECT * FROM TABLE(SESSION(TABLE bookings PARTITION BY driver_id, DESCRIPTOR(rowtime), "
            "INTERVAL '10' MINUTES))",
            1,
            21,
            "SESSION without aggregation is not supported: a row's session is known only when it closes",
            "aggregate per session: GROUP BY window_start, window_end and the PARTITION BY keys",
        ),
    ],
)
def test_refused_with_line_column_and_what_to_write(
    sql: str, line: int, col: int, reason: str, hint_starts: str
) -> None:
    err = refused(sql)
    assert (err.line, err.col, err.reason) == (line, col, reason)
    assert err.hint is not None and err.hint.startswith(hint_starts)


def test_week_is_the_iso_week() -> None:
    assert (
        translate("SELECT WEEK(rowtime) AS w FROM bookings", TABLES).spark_sql
        == "SELECT CAST(weekofyear(rowtime) AS BIGINT) AS w FROM bookings"
    )


def test_a_function_spark_has_not_is_refused_at_the_users_call() -> None:
    tree = translate("SELECT order_number,\n  WEEK(rowtime) AS w FROM bookings", TABLES)  # rewritten: passes
    assert "weekofyear" in tree.spark_sql
    week = exp.Week(this=exp.column("rowtime"))
    week.meta.update(line=2, col=6, start=0, end=3)
    with pytest.raises(SqlError) as info:
        check_spark_functions(exp.select(week).from_("bookings"))
    assert (info.value.line, info.value.col, info.value.reason) == (
        2,
        3,
        "WEEK is not a function Spark SQL has",
    )


@pytest.mark.parametrize("refusal", REFUSED, ids=[r.id for r in REFUSED])
def test_the_harness_refusals_are_clear(refusal: Refusal) -> None:
    """Each query of bench/flink_compat's REFUSED (Flink runs them) is refused by the SQL check, at its line and
    column, saying what is not supported and what to write instead (docs/flink-compat.md counts them)."""
    err = refused(refusal.sql)
    assert (err.line, err.col) == (refusal.line, refusal.col)
    assert err.reason.startswith(refusal.reason)
    assert err.hint


def test_the_compat_page_counts_the_harness() -> None:
    """docs/flink-compat.md's counts and lists are the harness's: every case and every refusal is named."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "flink-compat.md").read_text()
    whole = [c for c in CASES if c.id not in {g.id for g in GROUPS}]  # a function group counts per expression
    differ = [c for c in whole if c.differs]
    assert (
        f"**Counts**: {len(whole)} cases: {len(whole) - len(differ)} give the same rows; {len(differ)} differ "
        f"on purpose"
    ) in page
    assert f"{len(REFUSED)} more queries that Flink 2.3 runs are refused clearly" in page
    for c in whole:
        assert f"| `{c.id}` |" in page, c.id
        assert ("**differs" in page.split(f"| `{c.id}` |")[1].split("\n")[0]) == bool(c.differs), c.id
    for r in REFUSED:
        assert f"| `{r.id}`: " in page, r.id
