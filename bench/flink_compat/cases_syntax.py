"""Flink's modern streaming syntax: window table-valued functions (TUMBLE, HOP, CUMULATE, SESSION; with and
without aggregation; named arguments; cascading windows), deduplication by ``ROW_NUMBER()`` and ``SELECT
DISTINCT`` within windows, in the forms of Flink 2.3's documentation (``docs/content/docs/dev/table/sql/queries/
window-tvf.md``, ``window-agg.md``, ``deduplication.md``), over the harness's events, and the forms Daggers
refuses (each at its line and column, with what to write instead).

The ``dedup`` data set has duplicates out of event-time order: a key's later-stamped row first, its earlier row
next, within the watermark's delay (Flink keeps the earlier, Daggers the first to arrive), late duplicates and a
duplicate minutes later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.flink_compat.cases import Case, Refusal

_TUMBLE = "TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))"


def dedup_bookings() -> list[dict[str, object]]:
    """The ``dedup`` data set's bookings, in the order they are read (``c`` the customer, the key)."""
    from bench.flink_compat.cases import at, booking

    return [
        booking("a1", at(0, 10), "c1", "d1", 1, "CAR", "CREATED", 100),
        booking(
            "a2", at(0, 5), "c1", "d1", 1, "CAR", "COMPLETED", 200
        ),  # earlier, within the delay: not late
        booking("a3", at(0, 20), "c2", "d2", 2, "BIKE", "CREATED", 300),  # watermark 10:00:10
        booking("a4", at(0, 4), "c1", "d1", 1, "CAR", "CANCELLED", 400),  # late
        booking("a5", at(0, 30), "c3", "d3", 1, "BIKE", "CREATED", 500),
        booking("a6", at(0, 30), "c3", "d3", 1, "BIKE", "COMPLETED", 600),  # same time: the first one stays
        booking("a7", at(0, 19), "c2", "d2", 2, "BIKE", "CANCELLED", 700),  # late
        booking("a8", at(0, 40), "c4", "d1", 2, "CAR", "CREATED", 800),
        booking("a9", at(5, 0), "c2", "d2", 2, "BIKE", "COMPLETED", 900),  # a duplicate minutes later
    ]


def syntax_cases() -> list[Case]:
    """The cases (each a query run on both engines and compared)."""
    from bench.flink_compat.cases import Case

    return [
        Case(
            "tvf-tumble",
            "TUMBLE window TVF, GROUP BY window_start, window_end, window_time and a key; "
            "SUM(DISTINCT), MAX(DISTINCT)",
            f"""SELECT window_start, window_end, window_time, city_id, COUNT(*) AS n, SUM(DISTINCT fare_idr) AS fare,
  MAX(DISTINCT vehicle_type) AS vehicle
FROM {_TUMBLE}
GROUP BY window_start, window_end, window_time, city_id""",
        ),
        Case(
            "tvf-hop-named",
            "HOP window TVF with named arguments (DATA =>, TIMECOL =>, SLIDE =>, SIZE =>)",
            """SELECT window_start, window_end, COUNT(*) AS n, MIN(order_number) AS first_order
FROM TABLE(HOP(DATA => TABLE bookings, TIMECOL => DESCRIPTOR(rowtime), SLIDE => INTERVAL '1' MINUTES,
  SIZE => INTERVAL '2' MINUTES))
GROUP BY window_start, window_end""",
        ),
        Case(
            "tvf-cumulate",
            "CUMULATE window TVF (step 2 minutes, size 6), a key, HAVING, an alias",
            """SELECT w.city_id, window_start, window_end, SUM(w.fare_idr) AS fare, COUNT(*) AS n
FROM TABLE(CUMULATE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES)) AS w
WHERE w.status <> 'CREATED'
GROUP BY window_start, window_end, w.city_id
HAVING COUNT(*) >= 1""",
        ),
        Case(
            "tvf-cumulate-late",
            "CUMULATE with late events: a late event counts in the windows not yet closed",
            """SELECT window_start, window_end, SUM(fare_idr) AS fare, COUNT(*) AS n
FROM TABLE(CUMULATE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES))
GROUP BY window_start, window_end""",
            dataset="late",
            one_record_batches=True,
        ),
        Case(
            "tvf-tumble-rows",
            "TUMBLE window TVF without aggregation: each row with its window, filtered on it",
            f"""SELECT order_number, window_start, window_end, window_time
FROM {_TUMBLE}
WHERE window_start >= TIMESTAMP '2026-03-02 10:01:00'""",
        ),
        Case(
            "tvf-hop-rows",
            "HOP window TVF without aggregation: a row per window (2 per booking)",
            """SELECT order_number, window_start, window_end, window_time
FROM TABLE(HOP(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES, INTERVAL '2' MINUTES))""",
        ),
        Case(
            "tvf-cumulate-rows",
            "CUMULATE window TVF without aggregation: a row per window that includes it",
            """SELECT order_number, window_start, window_end
FROM TABLE(CUMULATE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '6' MINUTES))""",
        ),
        Case(
            "tvf-cascade",
            "cascading window aggregation: a 5-minute TUMBLE TVF over a 1-minute one's window_time",
            f"""WITH per_minute AS (
  SELECT window_time AS rowtime, city_id, SUM(fare_idr) AS fare
  FROM {_TUMBLE}
  GROUP BY window_start, window_end, window_time, city_id)
SELECT window_start, window_end, city_id, SUM(fare) AS fare, COUNT(*) AS minutes
FROM TABLE(TUMBLE(TABLE per_minute, DESCRIPTOR(rowtime), INTERVAL '5' MINUTES))
GROUP BY window_start, window_end, city_id""",
        ),
        Case(
            "tvf-window-time-out",
            "a windowed subquery's window_time (an event time) as an output column",
            f"""SELECT rt, city_id, n
FROM (
  SELECT window_time AS rt, city_id, COUNT(*) AS n
  FROM {_TUMBLE}
  GROUP BY window_start, window_end, window_time, city_id)
WHERE n >= 1""",
        ),
        Case(
            "tvf-grouping-sets",
            "a TUMBLE TVF aggregation with GROUPING SETS: per city and for all (a NULL city)",
            f"""SELECT window_start, window_end, city_id, COUNT(*) AS n, SUM(fare_idr) AS fare
FROM {_TUMBLE}
GROUP BY window_start, window_end, GROUPING SETS ((city_id), ())""",
        ),
        Case(
            "tvf-session",
            "SESSION window TVF partitioned by the key it groups by (a session per driver)",
            """SELECT window_start, window_end, driver_id, COUNT(*) AS n
FROM TABLE(SESSION(TABLE bookings PARTITION BY driver_id, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))
GROUP BY window_start, window_end, driver_id""",
        ),
        Case(
            "tvf-select-distinct",
            "SELECT DISTINCT window_start, window_end and a column over a TUMBLE TVF",
            f"SELECT DISTINCT window_start, window_end, vehicle_type FROM {_TUMBLE}",
        ),
        Case(
            "select-distinct-window",
            "SELECT DISTINCT over a windowed GROUP BY that outputs the window's end",
            """SELECT DISTINCT city_id, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id, vehicle_type""",
        ),
        Case(
            "dedup-first-row",
            "deduplication: each customer's first booking (ROW_NUMBER() ... ORDER BY rowtime ASC = 1)",
            """SELECT order_number, customer_id, rowtime
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime ASC) AS rn
  FROM bookings)
WHERE rn = 1""",
        ),
        Case(
            "dedup-late",
            "deduplication with late events: a late row is dropped, not kept as a key's first",
            """SELECT order_number, driver_id, fare_idr
FROM (
  SELECT order_number, driver_id, fare_idr, rowtime,
    ROW_NUMBER() OVER (PARTITION BY driver_id ORDER BY rowtime) AS row_num
  FROM bookings
  WHERE city_id > 0)
WHERE row_num = 1""",
            dataset="late",
            one_record_batches=True,
        ),
        Case(
            "dedup-out-of-order",
            "deduplication when a key's earlier row comes second, within the delay",
            """SELECT order_number, customer_id, status
FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime ASC) AS rn
  FROM bookings)
WHERE rn = 1""",
            dataset="dedup",
            one_record_batches=True,
            differs="Flink buffers a key's rows until the watermark passes them and keeps the earliest (a2, "
            "10:00:05, read after a1, 10:00:10); Daggers keeps the first to arrive (a1)",
            daggers_rows=(
                ("a1", "c1", "CREATED"),
                ("a3", "c2", "CREATED"),
                ("a5", "c3", "CREATED"),
                ("a8", "c4", "CREATED"),
            ),
        ),
    ]


def syntax_refusals() -> list[Refusal]:
    """Flink queries in these forms that Daggers refuses before Spark starts (Flink runs each)."""
    from bench.flink_compat.cases import Refusal

    return [
        Refusal(
            "dedup-last-row",
            """SELECT order_number, customer_id FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY rowtime DESC) AS rn FROM bookings)
WHERE rn = 1""",
            2,
            13,
            "ROW_NUMBER() OVER (... ORDER BY rowtime DESC) (the last row per key) is not supported",
        ),
        Refusal(
            "tvf-offset",
            """SELECT window_start, window_end, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '2' MINUTES, INTERVAL '1' MINUTES))
GROUP BY window_start, window_end""",
            2,
            87,
            "the OFFSET of a TUMBLE window is not supported",
        ),
        Refusal(
            "tvf-session-unpartitioned",
            """SELECT window_start, window_end, driver_id, COUNT(*) AS n
FROM TABLE(SESSION(TABLE bookings, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))
GROUP BY window_start, window_end, driver_id""",
            2,
            12,
            "a SESSION window aggregation is supported when its sessions are per GROUP BY key",
        ),
        Refusal(
            "tvf-group-by-start-only",
            f"""SELECT window_start, COUNT(*) AS n
FROM {_TUMBLE}
GROUP BY window_start""",
            3,
            10,
            "a window aggregation over a window table-valued function groups by window_start and window_end",
        ),
        Refusal(
            "distinct-without-window-column",
            """SELECT DISTINCT city_id
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id""",
            1,
            17,
            "SELECT DISTINCT over a windowed GROUP BY needs the window among its columns",
        ),
    ]
