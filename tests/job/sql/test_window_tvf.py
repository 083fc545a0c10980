"""Flink's window table-valued functions, deduplication and SELECT DISTINCT within windows, as the Spark SQL they
become (job.sql.window_tvf, job.sql.dedup, job.sql.distinct), and what is refused before Spark starts. The rows
they give are compared with Flink's in bench/flink_compat (cases_syntax.py)."""

from __future__ import annotations

import pytest

from job.errors import SqlError
from job.sql import translate
from job.sql.dedup import Deduplication
from tests.job.sql.test_flink_values import TABLES

TUMBLE = "TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))"


def spark(sql: str) -> str:
    return translate(sql, TABLES).spark_sql


def refused(sql: str) -> SqlError:
    with pytest.raises(SqlError) as info:
        translate(sql, TABLES)
    return info.value


# ---- window aggregations ------------------------------------------------------------------------------


def test_a_tumble_tvf_aggregation_is_a_group_window() -> None:
    t = translate(
        f"SELECT window_start, window_end, window_time, city_id, COUNT(*) AS n FROM {TUMBLE} "
        "GROUP BY window_start, window_end, window_time, city_id",
        TABLES,
    )
    assert t.spark_sql == (
        "SELECT window.start AS window_start, window.end AS window_end, window.end - INTERVAL "
        "'0.001' SECOND AS window_time, city_id, COUNT(*) AS n FROM bookings "
        "GROUP BY city_id, window(rowtime, '1 minutes')"
    )
    assert t.window == ("1 minutes", None)
    assert t.output_columns == ["window_start", "window_end", "window_time", "city_id", "n"]


def test_the_same_query_as_the_group_window_form() -> None:
    tvf = spark(
        f"SELECT city_id, window_end AS e, SUM(fare_idr) AS f FROM {TUMBLE} "
        "GROUP BY city_id, window_start, window_end"
    )
    legacy = spark(
        "SELECT city_id, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS e, SUM(fare_idr) AS f FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id"
    )
    assert tvf == legacy


def test_hop_with_named_arguments_in_any_order() -> None:
    got = spark(
        "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(DATA => TABLE bookings, "
        "SIZE => INTERVAL '2' MINUTES, TIMECOL => DESCRIPTOR(rowtime), SLIDE => INTERVAL '1' MINUTES)) "
        "GROUP BY window_start, window_end"
    )
    assert got == (
        "SELECT window.start AS window_start, window.end AS window_end, COUNT(*) AS n FROM bookings "
        "GROUP BY window(rowtime, '2 minutes', '1 minutes')"
    )


def test_cumulate_keeps_the_hopping_windows_that_end_in_the_rows_period() -> None:
    t = translate(
        "SELECT w.city_id, window_start, window_end, SUM(w.fare_idr) AS fare FROM TABLE(CUMULATE("
        "TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES)) AS w "
        "WHERE w.status <> 'CREATED' GROUP BY window_start, window_end, w.city_id",
        TABLES,
    )
    assert t.spark_sql == (
        "SELECT w.city_id, timestamp_micros(UNIX_MICROS(window.end) - 1 - pmod(UNIX_MICROS(window.end) - 1, "
        "360000000)) AS window_start, window.end AS window_end, SUM(w.fare_idr) AS fare "
        "FROM (SELECT *, window(rowtime, '6 minutes', '2 minutes') AS window FROM bookings AS w "
        "WHERE w.status <> 'CREATED' AND w.__dagger_wm >= 0) AS w "
        "WHERE UNIX_MICROS(window.end) <= UNIX_MICROS(rowtime) - pmod(UNIX_MICROS(rowtime), 360000000) + 360000000 "
        "GROUP BY w.city_id, window"
    )


def test_window_time_of_a_subquery_is_an_event_time_an_outer_window_groups_by() -> None:
    got = spark(
        f"WITH m AS (SELECT window_time AS rowtime, city_id, COUNT(*) AS n FROM {TUMBLE} "
        "GROUP BY window_start, window_end, window_time, city_id) "
        "SELECT window_start, SUM(n) AS n FROM TABLE(TUMBLE(TABLE m, DESCRIPTOR(rowtime), "
        "INTERVAL '5' MINUTES)) GROUP BY window_start, window_end"
    )
    assert got == (
        "WITH m AS (SELECT window_time(__dagger_window) AS rowtime, city_id, n FROM (SELECT window AS "
        "__dagger_window, city_id, COUNT(*) AS n FROM bookings GROUP BY city_id, window(rowtime, "
        "'1 minutes')) AS __dagger_rowtime) SELECT window.start AS window_start, SUM(n) AS n FROM m "
        "GROUP BY window(rowtime, '5 minutes')"
    )


def test_a_subquerys_window_time_is_output_to_the_millisecond() -> None:
    got = spark(
        f"SELECT rt, n AS bookings FROM (SELECT window_time AS rt, COUNT(*) AS n FROM {TUMBLE} "
        "GROUP BY window_start, window_end, window_time) WHERE n > 1"
    )
    assert got == (
        "SELECT date_trunc('MILLISECOND', rt) AS rt, n AS bookings FROM (SELECT window_time(__dagger_window) "
        "AS rt, n FROM (SELECT window AS __dagger_window, COUNT(*) AS n FROM bookings GROUP BY "
        "window(rowtime, '1 minutes')) AS __dagger_rowtime) WHERE n > 1"
    )


def test_session_partitioned_by_its_group_keys() -> None:
    got = spark(
        "SELECT window_start, window_end, driver_id, COUNT(*) AS n FROM TABLE(SESSION(TABLE bookings "
        "PARTITION BY driver_id, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES)) "
        "GROUP BY window_start, window_end, driver_id"
    )
    assert got == (
        "SELECT session_window.start AS window_start, session_window.end AS window_end, driver_id, "
        "COUNT(*) AS n FROM bookings GROUP BY driver_id, session_window(rowtime, '1 minutes')"
    )


# ---- each row with its windows ------------------------------------------------------------------------


def test_a_tumble_without_aggregation_gives_each_row_its_window() -> None:
    got = spark(
        f"SELECT order_number, window_start, window_time FROM {TUMBLE} "
        "WHERE window_end > TIMESTAMP '2026-03-02 10:01:00'"
    )
    start = "UNIX_MICROS(rowtime) - pmod(UNIX_MICROS(rowtime), 60000000)"
    assert got == (
        f"SELECT order_number, timestamp_micros({start}) AS window_start, timestamp_micros({start} + "
        f"60000000) - INTERVAL '0.001' SECOND AS window_time FROM bookings WHERE timestamp_micros({start} "
        "+ 60000000) > CAST('2026-03-02 10:01:00' AS TIMESTAMP) AND bookings.__dagger_wm >= 0"
    )


def test_a_hop_without_aggregation_gives_a_row_per_window() -> None:
    got = spark(
        "SELECT order_number, window_start FROM TABLE(HOP(TABLE bookings, DESCRIPTOR(rowtime), "
        "INTERVAL '1' MINUTES, INTERVAL '3' MINUTES))"
    )
    assert got == (
        "SELECT order_number, timestamp_micros(UNIX_MICROS(rowtime) - pmod(UNIX_MICROS(rowtime), 60000000) "
        "- __dagger_w.__dagger_k * 60000000) AS window_start FROM bookings "
        "LATERAL VIEW explode(SEQUENCE(0, 2)) __dagger_w AS __dagger_k"
    )


def test_a_cumulate_without_aggregation_gives_a_row_per_window_that_includes_it() -> None:
    got = spark(
        "SELECT order_number, window_end FROM TABLE(CUMULATE(TABLE bookings, DESCRIPTOR(rowtime), "
        "INTERVAL '2' MINUTES, INTERVAL '6' MINUTES))"
    )
    assert got == (
        "SELECT order_number, timestamp_micros(UNIX_MICROS(rowtime) - pmod(UNIX_MICROS(rowtime), 360000000)"
        " + __dagger_w.__dagger_k * 120000000) AS window_end FROM bookings LATERAL VIEW explode(SEQUENCE("
        "pmod(UNIX_MICROS(rowtime), 360000000) DIV 120000000 + 1, 3)) __dagger_w AS __dagger_k"
    )


# ---- SELECT DISTINCT ----------------------------------------------------------------------------------


def test_select_distinct_over_a_tvf_is_a_window_aggregation() -> None:
    assert spark(f"SELECT DISTINCT window_start, window_end, vehicle_type FROM {TUMBLE}") == (
        "SELECT window.start AS window_start, window.end AS window_end, vehicle_type FROM bookings "
        "GROUP BY vehicle_type, window(rowtime, '1 minutes')"
    )


def test_select_distinct_over_a_group_window_groups_by_what_it_outputs() -> None:
    assert spark(
        "SELECT DISTINCT city_id, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS e FROM bookings "
        "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id, vehicle_type"
    ) == ("SELECT city_id, window.end AS e FROM bookings GROUP BY city_id, window(rowtime, '1 minutes')")


def test_select_distinct_over_aggregates_of_every_key_is_left_out() -> None:
    assert spark(
        "SELECT DISTINCT city_id, COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS e "
        "FROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id"
    ) == (
        "SELECT city_id, COUNT(*) AS n, window.end AS e FROM bookings GROUP BY city_id, window(rowtime, '1 minutes')"
    )


# ---- deduplication ------------------------------------------------------------------------------------


def test_first_row_deduplication_reads_a_view_of_the_subquery_without_duplicates() -> None:
    t = translate(
        "SELECT d.order_number, d.rowtime FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id, "
        "city_id ORDER BY rowtime ASC) AS rn FROM bookings WHERE fare_idr > 0) AS d "
        "WHERE rn = 1 AND d.status <> 'X'",
        TABLES,
    )
    assert t.spark_sql == "SELECT d.order_number, d.rowtime FROM __dagger_dedup_0 AS d WHERE d.status <> 'X'"
    assert t.dedups == [
        Deduplication(
            "__dagger_dedup_0",
            "SELECT * FROM bookings WHERE fare_idr > 0 AND bookings.__dagger_wm >= 0",
            ["customer_id", "city_id"],
        )
    ]
    assert t.output_columns == ["order_number", "rowtime"]


def test_a_window_over_deduplicated_rows() -> None:
    t = translate(
        "SELECT COUNT(*) AS n FROM (SELECT order_number, rowtime, ROW_NUMBER() OVER (PARTITION BY "
        "order_number ORDER BY rowtime) AS row_num FROM bookings) WHERE row_num <= 1 "
        "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
        TABLES,
    )
    assert t.spark_sql == "SELECT COUNT(*) AS n FROM __dagger_dedup_0 GROUP BY window(rowtime, '1 minutes')"
    assert t.dedups[0].spark_sql == "SELECT order_number, rowtime FROM bookings"


# ---- refused, with what to write ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "line", "col", "reason", "hint_starts"),
    [
        (
            f"SELECT window_start, COUNT(*) AS n FROM {TUMBLE}\nGROUP BY window_start",
            2,
            10,
            "a window aggregation over a window table-valued function groups by window_start and window_end",
            "SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(TUMBLE(",
        ),
        (
            f"SELECT COUNT(*) AS n FROM {TUMBLE} WHERE window_start > TIMESTAMP '2026-03-02 10:00:00'\n"
            "GROUP BY window_start, window_end",
            1,
            106,
            "window_start is known only after the rows are grouped: filter on it in HAVING",
            None,
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), SIZE => INTERVAL '1' MINUTES,\n"
            "  STEP => INTERVAL '1' MINUTES))",
            2,
            20,
            "TUMBLE has no parameter STEP; its parameters: DATA, TIMECOL, SIZE, OFFSET",
            "TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL size)",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(rowtime)))",
            1,
            21,
            "TUMBLE needs SIZE",
            None,
        ),
        (
            "SELECT COUNT(*) AS n FROM TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(event_timestamp), INTERVAL '1' MINUTES))\n"
            "GROUP BY window_start, window_end",
            1,
            67,
            "the event time of stream bookings is rowtime: a window over event_timestamp would never close",
            "DESCRIPTOR(rowtime)",
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))",
            1,
            28,
            "the first argument of TUMBLE is the table it windows: TABLE t",
            None,
        ),
        (
            "SELECT * FROM TABLE(HOP(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '3' MINUTES))",
            1,
            93,
            "the SIZE of a HOP window must be a whole multiple of its SLIDE",
            None,
        ),
        (
            f"SELECT b.order_number FROM {TUMBLE} AS w\nJOIN pings AS p ON w.driver_id = p.driver_id",
            2,
            6,
            "a window table-valued function joined with another table (a window join) is not supported",
            "join the streams on an interval of event time",
        ),
        (
            "SELECT DISTINCT city_id, COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS e FROM bookings\n"
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id, status",
            2,
            57,
            "SELECT DISTINCT over aggregates is supported when every GROUP BY key is a column of the output; status is not",
            "output the key",
        ),
        (
            "SELECT order_number FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime) AS rn\n"
            "  FROM bookings) WHERE rn <= 3",
            1,
            37,
            "ROW_NUMBER() OVER (...) is supported for deduplication, kept by WHERE rn = 1 (Top-N retracts rows it has "
            "emitted)",
            "for each key's first row in event time write SELECT",
        ),
        (
            "SELECT order_number, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime) AS rn\n"
            "  FROM bookings) WHERE rn = 1",
            1,
            22,
            "rn is 1 on every kept row: leave it out",
            None,
        ),
        (
            "SELECT order_number FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY rowtime) AS rn FROM bookings) WHERE rn = 1",
            1,
            37,
            "ROW_NUMBER() OVER (ORDER BY rowtime) needs PARTITION BY the key to deduplicate on",
            "SELECT ... FROM",
        ),
    ],
)
def test_refused_with_line_column_and_what_to_write(
    sql: str, line: int, col: int, reason: str, hint_starts: str | None
) -> None:
    err = refused(sql)
    assert (err.line, err.col, err.reason) == (line, col, reason)
    if hint_starts is not None:
        assert err.hint is not None and err.hint.startswith(hint_starts)
