"""An outside check: 40 queries written afresh from Flink 2.3's documentation of queries
(``docs/content/docs/sql/reference/queries/``: window TVFs and window aggregation, window Top-N, window
deduplication, window joins, group window functions, OVER aggregation, joins, deduplication, Top-N, set
operations, WITH, SELECT and LIMIT), each adapted onto the harness's ``bookings`` and ``pings`` as a team
migrating from Flink would, and not chosen to pass.

Those Daggers runs are cases (compared with Flink's rows); those it refuses are refusals (refused by ``daggers
sql check`` at a line and column, with what to write instead). Flink 2.3 runs every one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.flink_compat.cases import Case, Refusal


def _tvf(table: str, size: str = "1") -> str:
    return f"TABLE(TUMBLE(TABLE {table}, DESCRIPTOR(rowtime), INTERVAL '{size}' MINUTES))"


def _queries() -> list[Case]:
    """The 40 queries, in the order of Flink's pages."""
    from bench.flink_compat.cases import Case

    return [
        Case(
            "out-tvf-from-without-table",
            "a TUMBLE window TVF called in FROM without TABLE(...), as Flink's "
            "window aggregation page writes it",
            """SELECT window_start, window_end, SUM(fare_idr) AS total_fare
FROM TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES)
GROUP BY window_start, window_end""",
        ),
        Case(
            "out-tvf-tumble-named-size",
            "TUMBLE with named arguments DATA, TIMECOL, SIZE; a key",
            """SELECT window_start, window_end, vehicle_type, COUNT(*) AS n, MIN(order_number) AS first_order
FROM TABLE(TUMBLE(DATA => TABLE bookings, TIMECOL => DESCRIPTOR(rowtime), SIZE => INTERVAL '2' MINUTES))
GROUP BY window_start, window_end, vehicle_type""",
        ),
        Case(
            "out-tvf-star-window-time",
            "SELECT * of a TUMBLE TVF: the columns and window_time (end - 1 ms)",
            """WITH b AS (SELECT order_number, city_id, rowtime FROM bookings)
SELECT * FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))""",
        ),
        Case(
            "out-tvf-hop-key-first",
            "HOP without TABLE(...), GROUP BY a key before window_start, window_end",
            """SELECT vehicle_type, window_start, window_end, SUM(fare_idr) AS total_fare
FROM HOP(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '4' MINUTES)
GROUP BY vehicle_type, window_start, window_end""",
        ),
        Case(
            "out-tvf-cumulate-named",
            "CUMULATE with named arguments DATA, TIMECOL, STEP, SIZE",
            """SELECT window_start, window_end, SUM(fare_idr) AS total_fare
FROM TABLE(CUMULATE(DATA => TABLE bookings, TIMECOL => DESCRIPTOR(rowtime), STEP => INTERVAL '2' MINUTES,
  SIZE => INTERVAL '10' MINUTES))
GROUP BY window_start, window_end""",
        ),
        Case(
            "out-tvf-window-end-only",
            "a HOP TVF aggregation that outputs window_end only, with HAVING",
            """SELECT window_end, COUNT(*) AS n
FROM TABLE(HOP(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES, INTERVAL '2' MINUTES))
GROUP BY window_start, window_end
HAVING SUM(fare_idr) > 0""",
        ),
        Case(
            "out-tvf-session-named-gap",
            "SESSION with named arguments and PARTITION BY (DATA, TIMECOL, GAP)",
            """SELECT window_start, window_end, customer_id, SUM(fare_idr) AS total_fare
FROM TABLE(SESSION(DATA => TABLE bookings PARTITION BY customer_id, TIMECOL => DESCRIPTOR(rowtime),
  GAP => INTERVAL '1' MINUTES))
GROUP BY window_start, window_end, customer_id""",
        ),
        Case(
            "out-tvf-session-global",
            "SESSION without PARTITION BY, grouped by the window only",
            """SELECT window_start, window_end, SUM(fare_idr) AS total_fare
FROM SESSION(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES)
GROUP BY window_start, window_end""",
        ),
        Case(
            "out-tvf-rollup",
            "a TUMBLE TVF aggregation with ROLLUP",
            f"""SELECT window_start, window_end, city_id, SUM(fare_idr) AS total_fare
FROM {_tvf("bookings", "5")}
GROUP BY window_start, window_end, ROLLUP (city_id)""",
        ),
        Case(
            "out-tvf-cube",
            "a TUMBLE TVF aggregation with CUBE of two columns",
            f"""SELECT window_start, window_end, city_id, vehicle_type, COUNT(*) AS n
FROM {_tvf("bookings", "5")}
GROUP BY window_start, window_end, CUBE (city_id, vehicle_type)""",
        ),
        Case(
            "out-tvf-cascade-view",
            "cascading windows as Flink's page writes them: window_time AS rowtime, the "
            "inner window's bounds aliased, the key first in GROUP BY",
            f"""WITH window1 AS (
  SELECT window_start AS w1_start, window_end AS w1_end, window_time AS rowtime, SUM(fare_idr) AS partial_fare
  FROM {_tvf("bookings")}
  GROUP BY city_id, window_start, window_end, window_time)
SELECT window_start, window_end, SUM(partial_fare) AS total_fare, COUNT(*) AS parts, MIN(w1_start) AS first_start
FROM TABLE(TUMBLE(TABLE window1, DESCRIPTOR(rowtime), INTERVAL '5' MINUTES))
GROUP BY window_start, window_end""",
        ),
        Case(
            "out-window-topn-agg",
            "window Top-N after a window aggregation (the top city of each window)",
            f"""SELECT window_start, window_end, city_id, fare, n
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY fare DESC) AS rownum
  FROM (
    SELECT window_start, window_end, city_id, SUM(fare_idr) AS fare, COUNT(*) AS n
    FROM {_tvf("bookings", "5")}
    GROUP BY window_start, window_end, city_id))
WHERE rownum <= 1""",
        ),
        Case(
            "out-window-topn-rows",
            "window Top-N right after a TUMBLE TVF (the two dearest bookings a window)",
            f"""SELECT *
FROM (
  SELECT order_number, fare_idr, window_start, window_end,
    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY fare_idr DESC) AS rownum
  FROM {_tvf("bookings", "2")})
WHERE rownum <= 2""",
        ),
        Case(
            "out-window-dedup-last",
            "window deduplication: the last booking of each minute (ORDER BY rowtime DESC, rownum <= 1)",
            f"""SELECT *
FROM (
  SELECT order_number, city_id, window_start, window_end,
    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY rowtime DESC) AS rownum
  FROM {_tvf("bookings")})
WHERE rownum <= 1""",
        ),
        Case(
            "out-window-dedup-first",
            "window deduplication: the first booking per window and city (rownum < 2)",
            f"""SELECT order_number, city_id, window_start, window_end
FROM (
  SELECT order_number, city_id, window_start, window_end,
    ROW_NUMBER() OVER (PARTITION BY window_start, window_end, city_id ORDER BY rowtime ASC) AS rownum
  FROM {_tvf("bookings", "2")})
WHERE rownum < 2""",
        ),
        Case(
            "out-window-join-inner",
            "a window join: the same driver in the same minute",
            f"""SELECT b.order_number, p.driver_status, b.window_start, b.window_end
FROM (SELECT * FROM {_tvf("bookings")}) b
JOIN (SELECT * FROM {_tvf("pings")}) p
ON b.driver_id = p.driver_id AND b.window_start = p.window_start AND b.window_end = p.window_end""",
        ),
        Case(
            "out-window-join-full",
            "a FULL OUTER window join, COALESCE of the windows",
            f"""SELECT b.order_number, p.driver_id AS ping_driver, p.driver_status,
  COALESCE(b.window_start, p.window_start) AS window_start, COALESCE(b.window_end, p.window_end) AS window_end
FROM (SELECT * FROM {_tvf("bookings")}) b
FULL JOIN (SELECT * FROM {_tvf("pings")}) p
ON b.driver_id = p.driver_id AND b.window_start = p.window_start AND b.window_end = p.window_end""",
        ),
        Case(
            "out-window-semi-in",
            "a semi window join written with IN (a correlated subquery)",
            f"""SELECT b.order_number, b.window_start, b.window_end
FROM (SELECT * FROM {_tvf("bookings")}) b
WHERE b.driver_id IN (
  SELECT p.driver_id FROM (SELECT * FROM {_tvf("pings")}) p
  WHERE b.window_start = p.window_start AND b.window_end = p.window_end)""",
        ),
        Case(
            "out-tumble-rowtime-top",
            "TUMBLE_ROWTIME as an output column (the window's end - 1 ms)",
            """SELECT city_id, COUNT(*) AS n, TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id""",
        ),
        Case(
            "out-hop-rowtime-top",
            "HOP_ROWTIME as an output column",
            """SELECT vehicle_type, SUM(fare_idr) AS fare,
  HOP_ROWTIME(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS rt
FROM bookings
GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE), vehicle_type""",
        ),
        Case(
            "out-session-rowtime-top",
            "SESSION_ROWTIME and SESSION_START of pings per driver",
            """SELECT driver_id, COUNT(*) AS n, SESSION_START(rowtime, INTERVAL '30' SECOND) AS s,
  SESSION_ROWTIME(rowtime, INTERVAL '30' SECOND) AS rt
FROM pings
GROUP BY SESSION(rowtime, INTERVAL '30' SECOND), driver_id""",
        ),
        Case(
            "out-tumble-unnamed-agg",
            "the group window page's example: a camel-case alias and an aggregate without an alias",
            """SELECT customer_id, TUMBLE_START(rowtime, INTERVAL '30' MINUTE) AS wStart, SUM(fare_idr)
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '30' MINUTE), customer_id""",
        ),
        Case(
            "out-except",
            "EXCEPT of two streams (the set operations page)",
            """(SELECT driver_id FROM bookings)
EXCEPT
(SELECT driver_id FROM pings WHERE driver_status = 'ON_TRIP')""",
        ),
        Case(
            "out-over-rows",
            "an OVER aggregation over ROWS (the booking and the one before, per customer)",
            """SELECT order_number, customer_id, fare_idr,
  SUM(fare_idr) OVER (PARTITION BY customer_id ORDER BY rowtime ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS last_two
FROM bookings""",
        ),
        Case(
            "out-over-window-clause",
            "OVER aggregations through a WINDOW clause (RANGE of one minute)",
            """SELECT order_number, fare_idr, SUM(fare_idr) OVER w AS sum_fare, COUNT(*) OVER w AS n
FROM bookings
WINDOW w AS (PARTITION BY city_id ORDER BY rowtime RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND CURRENT ROW)""",
        ),
        Case(
            "out-count-distinct-tvf",
            "COUNT(DISTINCT) in a TUMBLE TVF aggregation",
            f"""SELECT window_start, window_end, driver_status, COUNT(DISTINCT driver_id) AS drivers
FROM {_tvf("pings")}
GROUP BY window_start, window_end, driver_status""",
        ),
        Case(
            "out-interval-join-doc-orientation",
            "the joins page's interval join: comma form, the bound on the "
            "first table's time (b.rowtime BETWEEN p.rowtime - 4 min AND p.rowtime)",
            """SELECT b.order_number, p.driver_status, p.event_timestamp AS ping_time
FROM pings p, bookings b
WHERE b.driver_id = p.driver_id
AND b.rowtime BETWEEN p.rowtime - INTERVAL '4' MINUTE AND p.rowtime""",
        ),
        Case(
            "out-interval-join-half-open",
            "an interval join with >= and < (the upper bound excluded)",
            """SELECT b.order_number, p.event_timestamp AS ping_time
FROM bookings b JOIN pings p
ON b.driver_id = p.driver_id AND p.rowtime >= b.rowtime AND p.rowtime < b.rowtime + INTERVAL '5' MINUTE""",
        ),
        Case(
            "out-interval-join-equal-times",
            "an interval join on equal event times (ltime = rtime)",
            """SELECT b.order_number, p.driver_status
FROM bookings b JOIN pings p
ON b.driver_id = p.driver_id AND p.rowtime = b.rowtime""",
        ),
        Case(
            "out-interval-join-seconds",
            "an interval join from 10 s before to 5 s after",
            """SELECT b.order_number, p.event_timestamp AS ping_time
FROM bookings b JOIN pings p
ON b.driver_id = p.driver_id
AND p.rowtime BETWEEN b.rowtime - INTERVAL '10' SECOND AND b.rowtime + INTERVAL '5' SECOND""",
        ),
        Case(
            "out-interval-join-left",
            "a LEFT interval join: bookings without a ping in the minute get NULLs",
            """SELECT b.order_number, p.driver_status, p.event_timestamp AS ping_time
FROM bookings b LEFT JOIN pings p
ON b.driver_id = p.driver_id AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '1' MINUTE""",
        ),
        Case(
            "out-regular-join",
            "a regular join of two streams (no time bound)",
            """SELECT b.order_number, p.driver_status
FROM bookings b JOIN pings p ON b.driver_id = p.driver_id
WHERE p.service_type = 'GO_SEND'""",
        ),
        Case(
            "out-union-parenthesized",
            "UNION ALL of two parenthesized SELECTs",
            """(SELECT order_number AS id, city_id FROM bookings WHERE fare_idr > 20000)
UNION ALL
(SELECT driver_id AS id, 0 AS city_id FROM pings WHERE driver_status = 'AVAILABLE')""",
        ),
        Case(
            "out-exists",
            "a correlated EXISTS subquery over another stream",
            """SELECT b.order_number
FROM bookings b
WHERE EXISTS (SELECT 1 FROM pings p WHERE p.driver_id = b.driver_id AND p.driver_status = 'ON_TRIP')""",
        ),
        Case(
            "out-with-column-list",
            "a WITH item with a column list",
            """WITH trips (id, fare, city) AS (SELECT order_number, fare_idr, city_id FROM bookings)
SELECT id, fare FROM trips WHERE city = 1""",
        ),
        Case(
            "out-select-unaliased",
            "expressions without aliases in SELECT (Flink names them EXPR$n)",
            """SELECT order_number, fare_idr + city_id, status = 'COMPLETED'
FROM bookings""",
        ),
        Case(
            "out-qualify-dedup",
            "deduplication written with QUALIFY, as Flink's deduplication page does",
            """SELECT order_number, customer_id, rowtime
FROM bookings
QUALIFY ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime ASC) = 1""",
        ),
        Case(
            "out-dedup-rownum-le",
            "deduplication on two keys with row_num <= 1",
            """SELECT order_number, driver_id, city_id
FROM (
  SELECT order_number, driver_id, city_id,
    ROW_NUMBER() OVER (PARTITION BY driver_id, city_id ORDER BY rowtime) AS row_num
  FROM bookings)
WHERE row_num <= 1""",
        ),
        Case(
            "out-limit",
            "LIMIT on a stream",
            "SELECT order_number, status FROM bookings WHERE city_id = 1 LIMIT 2",
        ),
        Case(
            "out-values-join",
            "a stream joined with inline VALUES",
            """SELECT b.order_number, c.city_name
FROM bookings AS b
JOIN (VALUES (1, 'Jakarta'), (2, 'Bandung')) AS c (city, city_name) ON b.city_id = c.city""",
        ),
    ]


#: The queries of :func:`_queries` that Daggers refuses: (line, column, the start of the reason).
REFUSALS: dict[str, tuple[int, int, str]] = {
    "out-tvf-session-global": (
        2,
        6,
        "a SESSION window over the whole stream (no key in GROUP BY) is not supported",
    ),
    "out-window-topn-agg": (3, 13, "ROW_NUMBER() OVER (...) orders by the event time only"),
    "out-window-topn-rows": (4, 5, "ROW_NUMBER() OVER (...) orders by the event time only"),
    "out-window-dedup-last": (
        4,
        5,
        "ROW_NUMBER() OVER (... ORDER BY rowtime DESC) (the last row per key) is not supported",
    ),
    "out-window-join-full": (
        4,
        45,
        "a FULL JOIN of streams needs an interval on their event times in its ON",
    ),
    "out-window-semi-in": (
        3,
        7,
        "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported",
    ),
    "out-over-rows": (2, 3, "OVER aggregations are not supported on streams"),
    "out-over-window-clause": (3, 8, "OVER aggregations are not supported on streams"),
    "out-count-distinct-tvf": (1, 49, "COUNT(DISTINCT ...) is not available on streams"),
    "out-except": (3, 9, "EXCEPT is not supported on streams"),
    "out-exists": (
        3,
        22,
        "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported",
    ),
}


def outsider_cases() -> list[Case]:
    """The queries Daggers runs, each compared with Flink's rows."""
    return [c for c in _queries() if c.id not in REFUSALS]


def outsider_refusals() -> list[Refusal]:
    """The queries Daggers refuses before Spark starts, at a line and column (Flink runs each)."""
    from bench.flink_compat.cases import Refusal

    return [Refusal(c.id, c.sql, *REFUSALS[c.id]) for c in _queries() if c.id in REFUSALS]
