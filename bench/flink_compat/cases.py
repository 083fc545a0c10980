"""The events and the queries of the Flink compatibility harness: small event sets chosen to hit the edges.

Two tables, as a dagger sees them: ``bookings`` (``daggers.events.BookingLog``) and ``pings``
(``daggers.events.DriverLocationPing``), with ``rowtime`` the event time (``event_timestamp``) and a
watermark :data:`WATERMARK_DELAY_S` behind the newest event. Flink reads them as JSON lines from files
(a filesystem table with the same columns, ``rowtime AS event_timestamp`` and a ``WATERMARK``); Daggers
reads them as protobuf from a broker.

Data sets (each is one file per table for Flink, one topic per table for Daggers):

* ``main``: events in event-time order (nothing late), with windows on their bounds (10:00:59.999 and
  10:01:00.000), a gap of three empty minutes (10:02-10:04), and pings at the interval join's bounds
  (the booking's time, exactly; 1 ms before; the upper bound, exactly; 1 ms after);
* ``late``: bookings out of order, some behind the watermark: two whose window has closed (dropped by
  both engines), one behind the watermark whose window is still open (kept by both);
* ``closing-batch``: a late booking right after the one that moved the watermark past its window (Flink
  drops it; Daggers, closing windows per micro-batch, counts it: a difference the case spells out).

Each data set ends with a *closer* per table, an hour ahead, whose ids are ``closer``: its watermark
closes every window before it (Flink's end of input closes them too, Daggers' streaming run does not).
Rows that carry the closer (a ``closer`` value, or a time at or after :data:`CUT`) are left out of
every comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

#: The delay of the watermark behind the newest event time, on both engines.
WATERMARK_DELAY_S = 10
#: The closers' event time; rows at or after it (or naming ``closer``) are not compared.
CUT = datetime(2026, 3, 2, 11, 0, tzinfo=UTC)
CLOSER = "closer"
TABLES = {"bookings": "daggers.events.BookingLog", "pings": "daggers.events.DriverLocationPing"}


def at(minute: int, second: int, milli: int = 0) -> datetime:
    """2026-03-02 10:``minute``:``second``.``milli`` UTC."""
    return datetime(2026, 3, 2, 10, minute, second, milli * 1000, tzinfo=UTC)


def booking(
    order: str,
    t: datetime,
    customer: str,
    driver: str,
    city: int,
    vehicle: str,
    status: str,
    fare: int,
    lat: float = -6.2,
    lng: float = 106.8,
) -> dict[str, Any]:
    """One BookingLog event as a dict of its fields (enums by name)."""
    return {
        "order_number": order,
        "customer_id": customer,
        "driver_id": driver,
        "city_id": city,
        "vehicle_type": vehicle,
        "status": status,
        "pickup_lat": lat,
        "pickup_long": lng,
        "event_timestamp": t,
        "fare_idr": fare,
    }


def ping(
    driver: str, t: datetime, status: str, service: str = "GO_RIDE", lat: float = -6.2, lng: float = 106.8
) -> dict[str, Any]:
    """One DriverLocationPing event as a dict of its fields (enums by name)."""
    return {
        "driver_id": driver,
        "lat": lat,
        "long": lng,
        "driver_status": status,
        "service_type": service,
        "event_timestamp": t,
        "accuracy_m": 5.0,
        "speed_kmh": 20.0,
    }


def _closers() -> dict[str, dict[str, Any]]:
    return {
        "bookings": booking(CLOSER, CUT, CLOSER, CLOSER, 99, "CAR", "CREATED", 0),
        "pings": ping(CLOSER, CUT, "AVAILABLE"),
    }


MAIN_BOOKINGS = [
    booking("o1", at(0, 5), "c1", "d1", 1, "CAR", "COMPLETED", 25000),
    booking("o2", at(0, 40), "c2", "d2", 2, "BIKE", "CANCELLED", 0, -6.25, 106.85),
    booking("o3", at(0, 59, 999), "c1", "d1", 1, "CAR", "COMPLETED", 18000),  # the last ms of 10:00
    booking("o4", at(1, 0), "c3", "d3", 1, "BIKE", "COMPLETED", 12000),  # the first ms of 10:01
    booking("o5", at(1, 30), "c1", "d2", 2, "CAR", "CREATED", 0),
    # 10:02, 10:03: no bookings (empty windows)
    booking("o6", at(4, 10), "c4", "d3", 1, "CAR", "COMPLETED", 40000, -6.3, 106.9),
    booking("o7", at(4, 50, 500), "c2", "d1", 2, "BIKE", "DRIVER_FOUND", 0),
]
MAIN_PINGS = [
    ping("d1", at(0, 4, 999), "AVAILABLE"),  # 1 ms before o1: outside its join interval
    ping("d1", at(0, 5), "ON_TRIP"),  # o1's time exactly: inside
    ping("d2", at(0, 20), "AVAILABLE", "GO_FOOD"),
    ping("d1", at(0, 30), "ON_TRIP"),
    ping("d3", at(0, 45), "AVAILABLE", "GO_SEND"),
    ping("d2", at(1, 10), "ON_TRIP", "GO_FOOD"),
    ping("d2", at(1, 50), "ON_TRIP", "GO_FOOD"),
    ping("d1", at(5, 5), "ON_TRIP"),  # o1 + 5 minutes exactly: inside
    ping("d1", at(5, 5, 1), "AVAILABLE"),  # o1 + 5 minutes + 1 ms: outside o1's, inside o3's and o7's
    ping("d3", at(5, 30), "ON_TRIP", "GO_SEND"),
]
LATE_BOOKINGS = [  # in this order on the topic and in the file
    booking("l1", at(0, 5), "c1", "d1", 1, "CAR", "COMPLETED", 100),
    booking("l2", at(0, 50), "c2", "d1", 1, "CAR", "COMPLETED", 200),
    booking("l3", at(1, 15), "c3", "d2", 1, "BIKE", "COMPLETED", 300),  # watermark 10:01:05: 10:00 closes
    booking("l4", at(1, 20), "c4", "d2", 1, "BIKE", "COMPLETED", 400),  # watermark 10:01:10
    booking("l5", at(0, 58), "c5", "d2", 2, "BIKE", "COMPLETED", 500),  # late: its window (10:00) has closed
    booking("l6", at(1, 2), "c1", "d3", 2, "CAR", "COMPLETED", 600),  # behind the watermark, its window open
    booking("l7", at(2, 30), "c2", "d1", 2, "BIKE", "COMPLETED", 700),  # watermark 10:02:20: 10:01 closes
    booking("l8", at(2, 35), "c3", "d1", 2, "BIKE", "COMPLETED", 800),  # watermark 10:02:25
    booking("l9", at(1, 59, 999), "c4", "d1", 1, "CAR", "COMPLETED", 900),  # late by 1 ms of its window
]
#: Late events in the micro-batch that closes their window (see the case ``late-in-the-closing-batch``).
CLOSING_BATCH_BOOKINGS = [
    booking("m1", at(0, 5), "c1", "d1", 1, "CAR", "COMPLETED", 100),
    booking("m2", at(1, 15), "c2", "d1", 1, "CAR", "COMPLETED", 200),  # watermark 10:01:05: 10:00 closes
    booking("m3", at(0, 58), "c3", "d2", 2, "BIKE", "COMPLETED", 300),  # late, in the next record
    booking("m4", at(1, 30), "c4", "d2", 1, "BIKE", "COMPLETED", 400),
]

DATASETS: dict[str, dict[str, list[dict[str, Any]]]] = {
    "main": {
        "bookings": [*MAIN_BOOKINGS, _closers()["bookings"]],
        "pings": [*MAIN_PINGS, _closers()["pings"]],
    },
    "late": {"bookings": [*LATE_BOOKINGS, _closers()["bookings"]], "pings": [_closers()["pings"]]},
    "closing-batch": {
        "bookings": [*CLOSING_BATCH_BOOKINGS, _closers()["bookings"]],
        "pings": [_closers()["pings"]],
    },
}


@dataclass(frozen=True)
class Case:
    """One query run on both engines.

    ``sql`` is the Dagger SQL; ``flink_sql`` is what Flink runs when the two differ on purpose (else
    the same text), and ``differs`` says how. ``dataset`` names the events; ``one_record_batches``
    makes Daggers read one record per micro-batch, so its watermark moves after every event as
    Flink's does (Flink's watermark is emitted after every record here: ``pipeline.auto-watermark-
    interval`` is 0); without it the order of the events on the topic does not matter.
    ``daggers_rows``: where the engines give different rows on purpose, the rows Daggers gives
    (comparable form, worked out by hand from the events; the closers' rows left out).
    ``daggers_error``: the dagger stops with this error (one line) instead of giving rows; Flink's golden file
    holds its rows (the engines differ on purpose) or its error (both stop).
    """

    id: str
    what: str
    sql: str
    flink_sql: str | None = None
    differs: str = ""
    dataset: str = "main"
    one_record_batches: bool = False
    daggers_rows: tuple[tuple[Any, ...], ...] | None = None
    daggers_error: str = ""

    @property
    def flink_text(self) -> str:
        """The SQL Flink runs."""
        return self.flink_sql or self.sql

    @property
    def tables(self) -> list[str]:
        """The tables the query reads (those of :data:`TABLES` its text names)."""
        text = f"{self.sql}\n{self.flink_text}"
        return [t for t in TABLES if t in text]


CASES: list[Case] = [
    Case(
        "tumble-start-end",
        "TUMBLE with TUMBLE_START/TUMBLE_END; windows on their bounds; empty minutes",
        """SELECT city_id, COUNT(*) AS n, SUM(fare_idr) AS fare,
  TUMBLE_START(rowtime, INTERVAL '1' MINUTE) AS window_start,
  TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id""",
    ),
    Case(
        "hop-start-end",
        "HOP (slide 1 min, size 2 min) with HOP_START/HOP_END; empty windows in the gap",
        """SELECT vehicle_type, COUNT(*) AS n, MAX(fare_idr) AS top_fare,
  HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS window_start,
  HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS window_end
FROM bookings
GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE), vehicle_type""",
    ),
    Case(
        "session-window",
        "SESSION with SESSION_START/SESSION_END: a 1-minute gap, sessions of one and of three",
        """SELECT customer_id, COUNT(*) AS n, SUM(fare_idr) AS fare,
  SESSION_START(rowtime, INTERVAL '1' MINUTE) AS session_start,
  SESSION_END(rowtime, INTERVAL '1' MINUTE) AS session_end
FROM bookings
GROUP BY SESSION(rowtime, INTERVAL '1' MINUTE), customer_id""",
    ),
    Case(
        "tumble-rowtime-nested",
        "a 5-minute TUMBLE over a 1-minute windowed subquery, through TUMBLE_ROWTIME",
        """SELECT TUMBLE_END(rt, INTERVAL '5' MINUTE) AS window_end, SUM(n) AS bookings, COUNT(*) AS city_minutes,
  MAX(n) AS busiest
FROM (
  SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt, city_id, COUNT(*) AS n
  FROM bookings
  GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id
) AS per_minute
GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE)""",
    ),
    Case(
        "group-by-keys-having",
        "GROUP BY a window and three keys, with HAVING on two aggregates",
        """SELECT city_id, vehicle_type, status, COUNT(*) AS n, SUM(fare_idr) AS fare, MIN(customer_id) AS first_customer,
  TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), city_id, vehicle_type, status
HAVING COUNT(*) > 1 OR SUM(fare_idr) > 30000""",
    ),
    Case(
        "interval-join-bounds",
        "an interval join: pings at its bounds, 1 ms inside and outside",
        """SELECT b.order_number, p.driver_status, p.event_timestamp AS ping_time
FROM bookings AS b
JOIN pings AS p
  ON b.driver_id = p.driver_id
 AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE""",
    ),
    Case(
        "interval-join-window",
        "a TUMBLE window over an interval join, with a filter on the joined side",
        """SELECT b.vehicle_type, COUNT(*) AS pings_on_trip,
  TUMBLE_END(b.rowtime, INTERVAL '5' MINUTE) AS window_end
FROM bookings AS b
JOIN pings AS p
  ON b.driver_id = p.driver_id
 AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE
WHERE p.driver_status = 'ON_TRIP'
GROUP BY TUMBLE(b.rowtime, INTERVAL '5' MINUTE), b.vehicle_type""",
    ),
    Case(
        "union-all-cte",
        "a CTE over UNION ALL of two streams, windowed",
        """WITH actors AS (
  SELECT customer_id AS who, 'booking' AS kind, rowtime FROM bookings
  UNION ALL
  SELECT driver_id AS who, 'ping' AS kind, rowtime FROM pings
)
SELECT who, kind, COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_end
FROM actors
GROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), who, kind""",
    ),
    Case(
        "union-all-projection",
        "UNION ALL of two projections",
        """SELECT order_number AS id, status AS state, event_timestamp FROM bookings WHERE city_id = 1
UNION ALL
SELECT driver_id AS id, driver_status AS state, event_timestamp FROM pings WHERE service_type = 'GO_FOOD'""",
    ),
    Case(
        "case-cast-in-strings",
        "CASE, CAST, IN and string functions in a projection",
        """SELECT order_number,
  CASE WHEN status IN ('COMPLETED', 'DRIVER_FOUND') THEN 'ok' WHEN status = 'CANCELLED' THEN 'lost'
       ELSE 'open' END AS state,
  CASE vehicle_type WHEN 'CAR' THEN 4 ELSE 2 END AS wheels,
  CAST(city_id AS VARCHAR) || '-' || LOWER(vehicle_type) AS city_vehicle,
  CAST(fare_idr AS DOUBLE) / 1000 AS fare_k,
  CAST(pickup_lat AS INT) AS lat_int,
  UPPER(SUBSTRING(customer_id FROM 1 FOR 1)) || CAST(CHAR_LENGTH(order_number) AS VARCHAR) AS code,
  CONCAT(driver_id, '/', customer_id) AS pair,
  TRIM(BOTH 'o' FROM order_number) AS num,
  POSITION('E' IN status) AS e_at,
  REPLACE(status, '_', ' ') AS status_text,
  city_id NOT IN (2, 3) AS city_one
FROM bookings""",
    ),
    Case(
        "cast-invalid-string",
        "CAST of a string that is not a number",
        "SELECT order_number, CAST(order_number AS INT) AS as_int, CAST(SUBSTRING(order_number FROM 2) AS INT) AS n\n"
        "FROM bookings",
        flink_sql="SELECT order_number, TRY_CAST(order_number AS INT) AS as_int, "
        "TRY_CAST(SUBSTRING(order_number FROM 2) AS INT) AS n\nFROM bookings",
        differs="Dagger SQL follows Flink 1.14 (the original platform's): CAST of a value that does not convert "
        "is NULL. Flink 2.x fails the job instead, so Flink runs TRY_CAST here; the values match.",
    ),
    Case(
        "count-distinct",
        "COUNT(DISTINCT) on Flink against Daggers' DistinctCount",
        """SELECT driver_status, DistinctCount(driver_id) AS drivers, COUNT(*) AS pings,
  TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM pings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), driver_status""",
        flink_sql="""SELECT driver_status, COUNT(DISTINCT driver_id) AS drivers, COUNT(*) AS pings,
  TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM pings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), driver_status""",
        differs="DistinctCount is the original platform's UDF; Flink has no such function and runs COUNT(DISTINCT).",
    ),
    Case(
        "late-events",
        "late events under a 10 s watermark delay: one dropped, one behind the watermark kept",
        """SELECT city_id, COUNT(*) AS n, SUM(fare_idr) AS fare,
  TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id""",
        dataset="late",
        one_record_batches=True,
    ),
    Case(
        "late-in-the-closing-batch",
        "a late event read in the micro-batch that closes its window",
        """SELECT city_id, COUNT(*) AS n, SUM(fare_idr) AS fare,
  TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id""",
        dataset="closing-batch",
        one_record_batches=True,
        differs="Flink drops an event once the watermark has passed its window's end. Spark (so Daggers) closes "
        "windows per micro-batch and drops by the watermark of the batch before: an event read in the "
        "micro-batch that closes its window is still counted (m3 here, one record after m2 moved the "
        "watermark). One micro-batch later, it is dropped as in Flink (case late-events).",
        daggers_rows=(
            (1, 1, 100, "2026-03-02 10:01:00.000000"),
            (2, 1, 300, "2026-03-02 10:01:00.000000"),
            (1, 2, 600, "2026-03-02 10:02:00.000000"),
        ),
    ),
    Case(
        "decimal-division",
        "DECIMAL divided by an INT",
        "SELECT order_number, CAST(fare_idr AS DECIMAL(12, 2)) / 3 AS fare_third FROM bookings",
        flink_sql="SELECT order_number, CAST(CAST(fare_idr AS DECIMAL(12, 2)) / 3 AS DECIMAL(38, 6)) AS fare_third\n"
        "FROM bookings",
        differs="Spark types DECIMAL(12, 2) / INT with 6 digits of scale, Flink with 13 (8333.333333 against "
        "8333.3333333333333). Flink's result is cast to 6 digits here; the values then match.",
    ),
    Case(
        "empty-after-filter",
        "windows whose every event is filtered out give no row (no zero counts)",
        """SELECT COUNT(*) AS cancelled, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_end
FROM bookings
WHERE status = 'CANCELLED'
GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)""",
    ),
    Case(
        "event-timestamp-row",
        "a protobuf Timestamp field",
        "SELECT order_number, event_timestamp FROM bookings",
        flink_sql="SELECT order_number, CAST(TO_TIMESTAMP_LTZ(event_ts_row.seconds * 1000 + event_ts_row.nanos / 1000000, 3)"
        " AS TIMESTAMP(3)) AS event_timestamp\nFROM bookings",
        differs="Upstream Dagger (Flink over protobuf) reads a google.protobuf.Timestamp as ROW<seconds, nanos>; "
        "Daggers reads it as a TIMESTAMP. Flink's table carries the ROW as event_ts_row and the query "
        "converts it; the instants match.",
    ),
]


# Flink's values where Spark's differ (job.sql.values), and Flink syntax that is rewritten (issue 52)
CASES += [
    Case(
        "integer-division",
        "INT/BIGINT division truncates toward zero; MOD, SIGN, TRUNCATE of integers",
        """SELECT order_number, fare_idr / 1000 AS fare_k, (0 - fare_idr) / 7000 AS minus_sevenths,
  city_id / 2 AS half_city, fare_idr % 7 AS fare_mod, SIGN(fare_idr) AS fare_sign, SIGN(city_id - 2) AS city_sign,
  TRUNCATE(fare_idr, -4) AS fare_tens_k
FROM bookings""",
    ),
    Case(
        "avg-and-distinct-aggregates",
        "AVG of integers (an integer, truncated), SUM/AVG/MAX/MIN(DISTINCT), a window bound as text",
        """SELECT vehicle_type, AVG(fare_idr) AS avg_fare, AVG(city_id - 3) AS avg_city, SUM(DISTINCT city_id) AS cities,
  AVG(DISTINCT fare_idr) AS avg_distinct_fare, MAX(DISTINCT fare_idr) AS top_fare, MIN(DISTINCT status) AS first_status,
  CAST(TUMBLE_START(rowtime, INTERVAL '5' MINUTE) AS VARCHAR) AS window_text,
  TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_end
FROM bookings
GROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), vehicle_type""",
    ),
    Case(
        "greatest-least-null",
        "GREATEST/LEAST are NULL when an argument is NULL",
        """SELECT order_number, GREATEST(city_id, NULLIF(city_id, 1), 0) AS g, LEAST(pickup_lat, NULLIF(pickup_long, 106.8)) AS l,
  GREATEST(fare_idr, city_id) AS g2
FROM bookings""",
    ),
    Case(
        "extract-week-timestampdiff",
        "EXTRACT (whole seconds, milliseconds of the second), HOUR, WEEK, TIMESTAMPDIFF",
        """SELECT order_number, EXTRACT(SECOND FROM rowtime) AS s, EXTRACT(MILLISECOND FROM rowtime) AS ms,
  EXTRACT(MINUTE FROM rowtime) AS m, EXTRACT(DOW FROM rowtime) AS dow, EXTRACT(DOY FROM rowtime) AS doy,
  HOUR(rowtime) AS h, WEEK(rowtime) AS w, TIMESTAMPDIFF(MINUTE, TIMESTAMP '2026-03-02 10:00:00', rowtime) AS minutes_in
FROM bookings""",
    ),
    Case(
        "timestamp-boolean-as-text",
        "CAST of TIMESTAMP(3), TIMESTAMP(0) and BOOLEAN to VARCHAR",
        """SELECT order_number, CAST(rowtime AS VARCHAR) AS t, CAST(CAST(rowtime AS TIMESTAMP(0)) AS VARCHAR) AS t0,
  CAST(status = 'COMPLETED' AS VARCHAR) AS done, 'at ' || CAST(event_timestamp AS STRING) AS at_text
FROM bookings""",
    ),
    Case(
        "floor-ceil-truncate",
        "FLOOR/CEIL of a DOUBLE stay DOUBLE; TRUNCATE of DOUBLE and DECIMAL",
        """SELECT order_number, FLOOR(pickup_lat) AS lat_floor, CEIL(pickup_long) AS long_ceil,
  TRUNCATE(pickup_lat, 1) AS lat_1, TRUNCATE(pickup_long) AS long_0,
  TRUNCATE(CAST(fare_idr AS DECIMAL(12, 3)) / 7, 2) AS fare_7th
FROM bookings""",
    ),
    Case(
        "float-arithmetic",
        "FLOAT / INT and FLOAT * FLOAT are FLOAT (computed in FLOAT, then EXP in DOUBLE)",
        """SELECT driver_id, event_timestamp, speed_kmh / 3 AS speed_third, speed_kmh * accuracy_m AS product,
  EXP(speed_kmh / 3) AS e, FLOOR(speed_kmh / 3) AS third_floor
FROM pings""",
    ),
    Case(
        "float-sum",
        "SUM and AVG of a FLOAT are FLOAT",
        """SELECT SUM(CAST(lat * 3.3 AS FLOAT)) AS total, AVG(CAST(lat * 3.3 AS FLOAT)) AS mean,
  TUMBLE_END(rowtime, INTERVAL '10' MINUTE) AS window_end
FROM pings
GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTE)""",
        differs="Flink adds FLOATs in FLOAT, one by one; Spark adds them in DOUBLE and Daggers casts the sum to "
        "FLOAT: the type is Flink's and the sum is the closer one to the exact sum; it can differ from "
        "Flink's in the last digit (-204.59999 against -204.59998 for ten times -20.46).",
        daggers_rows=((-204.59999, -20.46, "2026-03-02 10:10:00.000000"),),
    ),
    Case(
        "split-index",
        "SPLIT_INDEX: empty parts, out of range, a separator of several characters, regex characters",
        """SELECT order_number,
  SPLIT_INDEX(CONCAT(order_number, ',', customer_id, ',,', driver_id), ',', 0) AS p0,
  SPLIT_INDEX(CONCAT(order_number, ',', customer_id, ',,', driver_id), ',', 2) AS p2,
  SPLIT_INDEX(CONCAT(order_number, ',', customer_id, ',,', driver_id), ',', 3) AS p3,
  SPLIT_INDEX(CONCAT(order_number, ',', customer_id, ',,', driver_id), ',', 4) AS p4,
  SPLIT_INDEX(status, '_', 1) AS status_2, SPLIT_INDEX(CONCAT(status, '.', vehicle_type), '.', 1) AS after_dot,
  SPLIT_INDEX(CONCAT(vehicle_type, '||', status), '||', city_id - 1) AS by_city
FROM bookings""",
    ),
    Case(
        "case-several-values",
        "a simple CASE with several values in a WHEN",
        """SELECT order_number,
  CASE status WHEN 'COMPLETED', 'DRIVER_FOUND' THEN 'ok' WHEN 'CANCELLED' THEN 'lost' ELSE 'open' END AS state,
  CASE city_id WHEN 1, 3 THEN 'odd' ELSE 'even' END AS parity
FROM bookings""",
    ),
    Case(
        "interval-join-comma",
        "the interval join in Flink's comma form (FROM b, p WHERE ...)",
        """SELECT b.order_number, p.driver_status, p.event_timestamp AS ping_time
FROM bookings AS b, pings AS p
WHERE b.driver_id = p.driver_id
  AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE
  AND b.city_id = 1""",
    ),
]


@dataclass(frozen=True)
class Refusal:
    """A Flink query that Daggers refuses before Spark starts: at ``line``/``col``, with a reason that starts
    with ``reason`` and a hint (what to write instead). Flink runs each of them."""

    id: str
    sql: str
    line: int
    col: int
    reason: str


#: Flink queries Daggers cannot run (streaming retractions, versioned tables, subqueries over streams), each
#: refused by ``daggers sql check`` (tests/job/sql/test_flink_syntax.py checks every one).
REFUSED: list[Refusal] = [
    Refusal(
        "top-n",
        """SELECT * FROM (
  SELECT order_number, fare_idr, ROW_NUMBER() OVER (PARTITION BY city_id ORDER BY fare_idr DESC) AS row_num
  FROM bookings)
WHERE row_num <= 2""",
        2,
        34,
        "ROW_NUMBER() OVER (...) orders by the event time only, for deduplication",
    ),
    Refusal(
        "over-aggregation",
        """SELECT order_number, fare_idr,
  SUM(fare_idr) OVER (PARTITION BY customer_id ORDER BY rowtime
    RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS one_hour_fare
FROM bookings""",
        2,
        3,
        "OVER aggregations are not supported on streams; use a window in GROUP BY",
    ),
    Refusal(
        "in-subquery",
        """SELECT order_number FROM bookings
WHERE driver_id IN (SELECT driver_id FROM pings WHERE driver_status = 'ON_TRIP')""",
        2,
        7,
        "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported",
    ),
    Refusal(
        "select-distinct",
        "SELECT DISTINCT vehicle_type FROM bookings",
        1,
        17,
        "SELECT DISTINCT is not supported on streams",
    ),
    Refusal(
        "count-distinct",
        """SELECT COUNT(DISTINCT driver_id) AS drivers
FROM pings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)""",
        1,
        8,
        "COUNT(DISTINCT ...) is not available on streams",
    ),
    Refusal(
        "sum-distinct-double",
        """SELECT SUM(DISTINCT pickup_lat) AS lat
FROM bookings GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)""",
        1,
        8,
        "SUM(DISTINCT x) is supported for integers and DECIMAL only",
    ),
    Refusal(
        "cross-join",
        "SELECT b.order_number, p.driver_id\nFROM bookings AS b, pings AS p\nWHERE b.city_id = 1",
        2,
        21,
        "p is joined with no condition linking it to b",
    ),
    Refusal(
        "aggregate-without-window",
        "SELECT city_id, COUNT(*) AS n\nFROM bookings\nGROUP BY city_id",
        3,
        10,
        "an aggregation over a stream needs a window in GROUP BY",
    ),
    Refusal(
        "extract-epoch",
        "SELECT order_number, EXTRACT(EPOCH FROM rowtime) AS e FROM bookings",
        1,
        41,
        "EXTRACT(EPOCH FROM ...) is not supported",
    ),
    Refusal(
        "union-distinct",
        "SELECT customer_id AS who FROM bookings\nUNION\nSELECT driver_id AS who FROM pings",
        3,
        8,
        "UNION (without ALL) is not supported on streams unless it outputs rowtime",
    ),
    Refusal(
        "intersect",
        "SELECT driver_id FROM bookings\nINTERSECT\nSELECT driver_id FROM pings",
        3,
        8,
        "INTERSECT is not supported on streams",
    ),
    Refusal(
        "order-by-time",
        "SELECT order_number, rowtime FROM bookings\nORDER BY rowtime",
        2,
        10,
        "ORDER BY is not supported on streams",
    ),
    Refusal(
        "left-join-no-interval",
        """SELECT b.order_number, p.driver_status
FROM bookings AS b LEFT JOIN pings AS p ON b.driver_id = p.driver_id""",
        2,
        30,
        "a LEFT JOIN of streams needs an interval on their event times in its ON",
    ),
]


def case(case_id: str) -> Case:
    """Return the case named ``case_id``; raises KeyError for an unknown one."""
    for c in CASES:
        if c.id == case_id:
            return c
    raise KeyError(case_id)


def to_json_event(event: dict[str, Any]) -> dict[str, Any]:
    """Return ``event`` as Flink's JSON format reads it: the time as 'yyyy-MM-dd HH:mm:ss.SSS' (UTC) and,
    for upstream Dagger's reading, as ``event_ts_row`` {seconds, nanos}."""
    out = dict(event)
    t: datetime = event["event_timestamp"]
    out["event_timestamp"] = t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"
    seconds = int((t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(seconds=1))
    out["event_ts_row"] = {"seconds": seconds, "nanos": t.microsecond * 1000}
    return out


# Flink's built-in functions, one expression a case, run in groups (bench/flink_compat/cases_functions.py)
from bench.flink_compat.cases_functions import function_cases  # noqa: E402

CASES += function_cases()

# Flink's streaming syntax: window TVFs, deduplication, SELECT DISTINCT (bench/flink_compat/cases_syntax.py)
from bench.flink_compat.cases_syntax import dedup_bookings, syntax_cases, syntax_refusals  # noqa: E402

DATASETS["dedup"] = {"bookings": [*dedup_bookings(), _closers()["bookings"]], "pings": [_closers()["pings"]]}
CASES += syntax_cases()
REFUSED += syntax_refusals()

# An outside check: 40 queries written afresh from Flink's documentation (bench/flink_compat/cases_outsider.py)
from bench.flink_compat.cases_outsider import outsider_cases, outsider_refusals  # noqa: E402

CASES += outsider_cases()
REFUSED += outsider_refusals()
