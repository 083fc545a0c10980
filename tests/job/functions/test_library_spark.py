"""The Dagger function library on Spark: exact values, NULLs and bad arguments, for every function.

Expected values come from independent references (s2sphere, zoneinfo, a plain-Python haversine and
percentile, Python's json), never from the code under test. All scalar cases of a test run as one
Spark query.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import s2sphere

from job.errors import SqlError
from job.sql import translate
from job.sql.parse import parse
from job.sql.rewrite import render, to_spark
from job.sql.validate import check_functions
from tests.helpers import s2_signed

pytestmark = pytest.mark.integration


def run_cases(spark, cases: list[tuple[str, Any]], source: str = "") -> None:  # type: ignore[no-untyped-def]
    """Evaluate every Dagger SQL expression of ``cases`` in one SELECT; each must equal its expected value."""
    from job.functions.spark_udfs import register_functions

    register_functions(spark)
    items = ", ".join(f"{expr} AS c{i}" for i, (expr, _) in enumerate(cases))
    tree = parse(f"SELECT {items} {source}")
    check_functions(tree)
    row = spark.sql(render(to_spark(tree))).collect()[0]
    for i, (expr, want) in enumerate(cases):
        got = row[f"c{i}"]
        if isinstance(want, float) and not math.isnan(want) and isinstance(got, float):
            assert got == pytest.approx(want, rel=1e-12, abs=0), expr
        else:
            assert got == want, expr


def query(spark, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    from job.functions.spark_udfs import register_functions

    register_functions(spark)
    tree = parse(sql)
    check_functions(tree)
    return [tuple(r) for r in spark.sql(render(to_spark(tree))).collect()]


def _area(lat: float, lng: float, level: int) -> float:
    cell = s2sphere.Cell(s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level))
    return cell.exact_area() * 510072000 / (4 * math.pi)  # the original's S2AreaInKm2


def _area_of(cell_id: str) -> float:
    return s2sphere.Cell(s2sphere.CellId(int(cell_id))).exact_area() * 510072000 / (4 * math.pi)


def _haversine(l1: float, o1: float, l2: float, o2: float) -> float:
    def rad(v: float) -> float:
        return v * math.pi / 180

    a = math.sin(rad(l2 - l1) / 2) * math.sin(rad(l2 - l1) / 2) + math.cos(rad(l1)) * math.cos(
        rad(l2)
    ) * math.sin(rad(o2 - o1) / 2) * math.sin(rad(o2 - o1) / 2)
    return 6371 * (2 * math.atan2(math.sqrt(a), math.sqrt(1 - a)))


def test_geo_functions(spark) -> None:  # type: ignore[no-untyped-def]
    jakarta_id = s2_signed(-6.2, 106.816666, 13)
    south = s2_signed(-89.5, 10.0, 20)
    assert south.startswith("-")  # face 5: negative as a Java long
    unsigned = str(int(jakarta_id) % (1 << 64))
    run_cases(
        spark,
        [
            ("S2Id(-6.2D, 106.816666D, 13)", jakarta_id),
            ("S2Id(-89.5D, 10.0D, 20)", south),
            ("S2Id(0.0D, 0.0D, 0)", s2_signed(0.0, 0.0, 0)),
            ("S2Id(-6.2D, 106.816666D, 30)", s2_signed(-6.2, 106.816666, 30)),
            ("S2Id(CAST(NULL AS DOUBLE), 1.0D, 13)", None),
            ("S2Id(1.0D, CAST('NaN' AS DOUBLE), 13)", None),
            ("S2Id(1.0D, 1.0D, level)", None),  # 31 from a column: NULL, not an error
            ("S2AreaInKm2(S2Id(-6.2D, 106.816666D, 13))", _area(-6.2, 106.816666, 13)),
            (f"S2AreaInKm2('{unsigned}')", _area(-6.2, 106.816666, 13)),
            ("S2AreaInKm2(S2Id(-89.5D, 10.0D, 20))", _area(-89.5, 10.0, 20)),
            ("S2AreaInKm2('3267730965564227584')", _area_of("3267730965564227584")),
            ("round(S2AreaInKm2('3267730965564227584'), 5)", 909.97058),  # the original's own test value
            ("S2AreaInKm2('not an id')", None),
            ("S2AreaInKm2('0')", None),
            ("S2AreaInKm2('99999999999999999999')", None),  # above 2**64 - 1
            ("S2AreaInKm2(CAST(NULL AS STRING))", None),
            ("GeoHash(57.64911D, 10.40744D, 11)", "u4pruydqqvj"),
            ("GeoHash(0.0D, 0.0D, 1)", "s"),
            ("GeoHash(-90.0D, -180.0D, 3)", "000"),
            ("GeoHash(90.0D, 180.0D, 3)", "zzz"),
            ("GeoHash(91.0D, 0.0D, 5)", None),
            ("GeoHash(CAST(NULL AS DOUBLE), 0.0D, 5)", None),
            ("GeoHash(1.0D, 1.0D, level)", None),  # 31 characters: NULL
            ("Distance(-6.2D, 106.8D, -6.2D, 106.8D)", 0.0),
            ("Distance(90.0D, 0.0D, -90.0D, 0.0D)", 6371 * math.pi),
            (
                "Distance(-6.2D, 106.816666D, -6.914744D, 107.60981D)",
                _haversine(-6.2, 106.816666, -6.914744, 107.60981),
            ),
            ("Distance(CAST(NULL AS DOUBLE), 0.0D, 0.0D, 0.0D)", None),
        ],
        "FROM VALUES (31) AS t(level)",
    )


def test_collection_functions(spark) -> None:  # type: ignore[no-untyped-def]
    run_cases(
        spark,
        [
            ("ElementAt(array('a', 'b', 'c'), 0)", "a"),
            ("ElementAt(array('a', 'b', 'c'), -1)", "c"),
            ("ElementAt(array('a', 'b', 'c'), -3)", "a"),
            ("ElementAt(array('a', 'b', 'c'), -4)", None),
            ("ElementAt(array('a', 'b', 'c'), 3)", None),
            ("ElementAt(array(1, 2), 1)", "2"),
            ("ElementAt(CAST(NULL AS ARRAY<STRING>), 0)", None),
            ("ElementAt(array('a'), CAST(NULL AS INT))", None),
            ("ElementAt(array(named_struct('loc', named_struct('lat', 1.5D))), 'x', 0, 'loc.lat')", "1.5"),
            ("ElementAt(array(named_struct('loc', named_struct('lat', 1.5D))), 'x', 1, 'loc.lat', 't')", ""),
            ("MapGet(map('a', 1, 'b', 2), 'b')", 2),
            ("MapGet(map('a', 1), 'z')", None),
            ("MapGet(CAST(NULL AS MAP<STRING, INT>), 'a')", None),
            ("ListContains(array('x', 'y'), 'y')", True),
            ("ListContains(array('x', 'y'), 'z')", False),
            ("ListContains(CAST(NULL AS ARRAY<STRING>), 'z')", False),
            ("ListContains(array('x', NULL), 'z')", False),
            ("Split('a,b,,c,,', ',')", ["a", "b", "", "c"]),
            ("Split('', ',')", [""]),
            ("Split(',,', ',')", []),
            ("Split('abc', ',')", ["abc"]),
            ("Split('a.b', '\\.')", ["a", "b"]),  # Calcite's strings: a backslash is itself
            ("Split(',a', ',')", ["", "a"]),
            ("Split(CAST(NULL AS STRING), ',')", None),
            ("split('a,,', ',', -1)", ["a", "", ""]),  # Spark's own three-argument split is untouched
            ("ArrayAggregate(array(1, 2, 2, 3), 'sum', 'int')", 8),
            ("ArrayAggregate(array(1, 2, 2, 3), 'distinct.sum', 'int')", 6),
            ("ArrayAggregate(array(1, 2), 'average', 'int')", 1.5),
            ("ArrayAggregate(array(1.5D, 2.5D, NULL), 'average', 'double')", 2.0),
            ("ArrayAggregate(array(4, 9, 1), 'max', 'long')", 9),
            ("ArrayAggregate(array(4.5D, 9.0D, 1.25D), 'min', 'double')", 1.25),
            ("ArrayAggregate(array(4, 9, 4), 'distinct.count', 'int')", 2),
            ("ArrayAggregate(array('b', 'a', 'b'), 'count', 'other')", 3),
            ("ArrayAggregate(array('b', 'a', 'b'), 'findFirst', 'other')", "b"),
            ("ArrayAggregate(array('b', 'a', 'b'), 'sort.findFirst', 'other')", "a"),
            ("ArrayAggregate(array(3, 1), 'distinct.sort.findFirst', 'int')", 1),
            ("ArrayAggregate(CAST(array() AS ARRAY<INT>), 'sum', 'int')", 0),
            ("ArrayAggregate(CAST(array() AS ARRAY<DOUBLE>), 'average', 'double')", 0.0),
            ("ArrayAggregate(CAST(array() AS ARRAY<INT>), 'max', 'int')", 0),
            ("ArrayAggregate(CAST(array() AS ARRAY<INT>), 'findFirst', 'int')", None),
            ("ArrayAggregate(CAST(NULL AS ARRAY<INT>), 'sum', 'int')", None),
            ("ArrayOperate(array(3, 1, 3, NULL, 2), 'distinct', 'int')", [3, 1, 2]),
            ("ArrayOperate(array(3, 1, 3, 2), 'sorted', 'int')", [1, 2, 3, 3]),
            ("ArrayOperate(array('b', 'a', 'b'), 'distinct.sorted', 'other')", ["a", "b"]),
            ("ArrayOperate(CAST(NULL AS ARRAY<INT>), 'sorted', 'int')", None),
            ("ByteToString(X'4A616B61727461')", "Jakarta"),
            ("ByteToString(X'48FF')", "H\ufffd"),
            ("ByteToString(CAST(NULL AS BINARY))", None),
        ],
    )


def _epoch(local: datetime) -> int:
    return int(local.timestamp())


def test_time_functions(spark) -> None:  # type: ignore[no-untyped-def]
    jkt, nyc = ZoneInfo("Asia/Jakarta"), ZoneInfo("America/New_York")
    monday = 1772442000  # 2026-03-02 09:00 UTC, Monday 16:00 in Jakarta
    sunday_late = _epoch(datetime(2026, 3, 8, 23, 30, tzinfo=jkt))  # Sunday: still the week of Monday the 2nd
    dst = _epoch(datetime(2026, 3, 20, 12, 0, tzinfo=nyc))  # New York moved to EDT on 8 March
    run_cases(
        spark,
        [
            ("StartOfWeek(1772442000L, 'Asia/Jakarta')", _epoch(datetime(2026, 3, 2, tzinfo=jkt))),
            (f"StartOfWeek({sunday_late}L, 'Asia/Jakarta')", _epoch(datetime(2026, 3, 2, tzinfo=jkt))),
            (
                f"EndOfWeek({sunday_late}L, 'Asia/Jakarta')",
                _epoch(datetime(2026, 3, 8, 23, 59, 59, tzinfo=jkt)),
            ),
            ("StartOfWeek(1772442000L, '+07:00')", _epoch(datetime(2026, 3, 2, tzinfo=jkt))),
            ("StartOfWeek(1772442000L, 'UTC')", _epoch(datetime(2026, 3, 2, tzinfo=UTC))),
            (f"StartOfMonth({dst}L, 'America/New_York')", _epoch(datetime(2026, 3, 1, tzinfo=nyc))),  # EST
            (
                f"EndOfMonth({dst}L, 'America/New_York')",
                _epoch(datetime(2026, 3, 31, 23, 59, 59, tzinfo=nyc)),
            ),  # EDT
            (f"EndOfWeek({monday}L, 'Asia/Jakarta')", _epoch(datetime(2026, 3, 8, 23, 59, 59, tzinfo=jkt))),
            ("EndOfMonth(1772442000L, 'UTC')", _epoch(datetime(2026, 3, 31, 23, 59, 59, tzinfo=UTC))),
            ("StartOfWeek(CAST(NULL AS BIGINT), 'UTC')", None),
            # milliseconds (magnitude >= 1e11): the values the original's StartOfWeekTest/EndOfWeekTest assert
            ("StartOfWeek(1562224758000L, 'Asia/Kolkata')", 1561919400000),
            ("StartOfWeek(1562224758000L, 'Asia/Jakarta')", 1561914000000),
            ("StartOfWeek(1562224758000L, 'UTC')", 1561939200000),
            ("StartOfWeek(1561939200000L, 'UTC')", 1561939200000),
            ("EndOfWeek(1562224758000L, 'Asia/Kolkata')", 1562524199999),
            ("EndOfWeek(1562224758000L, 'Asia/Jakarta')", 1562518799999),
            ("EndOfWeek(1562224758000L, 'UTC')", 1562543999999),
            ("EndOfWeek(1561939200000L, 'UTC')", 1562543999999),
            # the same instants in seconds give the same weeks in seconds
            ("StartOfWeek(1562224758L, 'Asia/Jakarta')", 1561914000),
            ("EndOfWeek(1562224758L, 'Asia/Jakarta')", 1562518799),
            # either side of the threshold: 99999999999 s is in the year 5138, 1e11 ms is 1973-03-03 09:46:40 UTC
            ("StartOfWeek(99999999999L, 'UTC')", _epoch(datetime(5138, 11, 14, tzinfo=UTC))),
            ("StartOfWeek(100000000000L, 'UTC')", _epoch(datetime(1973, 2, 26, tzinfo=UTC)) * 1000),
            (
                "EndOfWeek(-100000000000L, 'UTC')",
                _epoch(datetime(1966, 11, 6, 23, 59, 59, tzinfo=UTC)) * 1000 + 999,
            ),
            ("EndOfWeek(CAST(NULL AS BIGINT), 'UTC')", None),
            ("StartOfMonth(1772442000L, CAST(NULL AS STRING))", None),
            ("TimeInDate(1772442000L, 10, 30)", _epoch(datetime(2026, 3, 2, 10, 30, tzinfo=UTC))),
            (
                "TimeInDate(1772442000L, 10, 30, 'Asia/Jakarta')",
                _epoch(datetime(2026, 3, 2, 10, 30, tzinfo=jkt)),
            ),
            (
                "TimeInDate(1772442000L, 24, 0, 'Asia/Jakarta')",
                _epoch(datetime(2026, 3, 3, 0, 0, tzinfo=jkt)),
            ),
            ("TimeInDate(CAST(NULL AS BIGINT), 1, 0)", None),
            ("TimestampFromUnix(1772442000L) = TIMESTAMP '2026-03-02 09:00:00'", True),
            ("TimestampFromUnix(CAST(NULL AS BIGINT))", None),
            (
                "FormatTimeInZone(TIMESTAMP '2026-03-02 09:00:00', 'Asia/Jakarta', 'yyyy-MM-dd HH:mm:ss')",
                "2026-03-02 16:00:00",
            ),
            ("FormatTimeInZone(TIMESTAMP '2026-07-01 12:00:00', 'America/New_York', 'HH:mm')", "08:00"),
            ("FormatTimeInZone(CAST(NULL AS TIMESTAMP), 'UTC', 'HH')", None),
        ],
    )


def test_time_function_bad_runtime_arguments(spark) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="qqqqq"):
        query(spark, "SELECT FormatTimeInZone(TIMESTAMP '2026-03-02 09:00:00', 'UTC', 'qqqqqq')")
    with pytest.raises(Exception, match="Nowhere/Zone"):  # a zone from a column cannot be checked statically
        query(spark, "SELECT StartOfWeek(1772442000L, z) FROM VALUES ('Nowhere/Zone') AS t(z)")


def test_json_functions(spark) -> None:  # type: ignore[no-untyped-def]
    doc = '{"a":{"b":[1,2,{"c":"x"}]},"s":"text","n":null}'

    def compact(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"))

    updated = json.loads(doc)
    updated["a"]["b"][2]["c"] = 7
    added = json.loads(doc)
    added["a"]["new"] = True
    deleted = json.loads(doc)
    del deleted["a"]["b"][0]
    run_cases(
        spark,
        [
            (f"JsonQuery('{doc}', '$.a.b')", '[1,2,{"c":"x"}]'),
            (f"JsonQuery('{doc}', '$.a.b[2].c')", "x"),
            (f"JsonQuery('{doc}', '$.s')", "text"),
            (f"JsonQuery('{doc}', '$.missing')", None),
            ("JsonQuery('not json', '$.a')", None),
            ("JsonQuery(CAST(NULL AS STRING), '$.a')", None),
            (f"JsonUpdate('{doc}', '$.a.b[2].c', 7)", compact(updated)),
            (f"JsonUpdate('{doc}', \"$['a']['new']\", true)", compact(added)),
            (f"JsonUpdate('{doc}', '$.missing.deeper', 1)", None),
            (f"JsonUpdate('{doc}', '$.a.b[9]', 1)", None),
            ("JsonUpdate('not json', '$.a', 1)", None),
            ("JsonUpdate(CAST(NULL AS STRING), '$.a', 1)", None),
            (f"JsonUpdate('{doc}', '$.s', CAST(NULL AS STRING))", compact({**json.loads(doc), "s": None})),
            (f"JsonDelete('{doc}', '$.a.b[0]')", compact(deleted)),
            (f"JsonDelete('{doc}', '$.nothing')", compact(json.loads(doc))),
            ("JsonDelete('[1,2]', '$[5]')", "[1,2]"),
            ("JsonDelete('not json', '$.a')", None),
            ("JsonDelete(CAST(NULL AS STRING), '$.a')", None),
        ],
    )


def commons_percentile(values: list[float], p: float) -> float | None:
    """Apache Commons Math Percentile (legacy estimation), written from its documentation."""
    s = sorted(values)
    n = len(s)
    if n == 0:
        return None
    if n == 1:
        return s[0]
    pos = p * (n + 1) / 100
    if pos < 1:
        return s[0]
    if pos >= n:
        return s[-1]
    lower = math.floor(pos)
    return s[lower - 1] + (pos - lower) * (s[lower] - s[lower - 1])


def test_aggregate_functions(spark) -> None:  # type: ignore[no-untyped-def]
    import random

    rnd = random.Random(7)
    values = [float(rnd.randint(0, 1000)) for _ in range(101)]
    rows = ", ".join(f"({v}D, 'k{int(v) % 7}')" for v in values) + ", (NULL, NULL)"
    got = query(
        spark,
        "SELECT PercentileAggregator(90, x), PercentileAggregator(50, x), "
        "PercentileAggregator(0.5, x), PercentileAggregator(100, x), DistinctCount(k), "
        f"size(CollectArray(k)), array_sort(CollectArray(DISTINCT k)) FROM VALUES {rows} AS t(x, k)",
    )
    assert got == [
        (
            commons_percentile(values, 90),
            commons_percentile(values, 50),
            commons_percentile(values, 0.5),
            max(values),
            len({int(v) % 7 for v in values}),
            101,
            sorted({f"k{int(v) % 7}" for v in values}),
        )
    ]
    assert query(spark, "SELECT PercentileAggregator(50, x) FROM VALUES (CAST(NULL AS DOUBLE)) AS t(x)") == [
        (None,)
    ]
    assert query(spark, "SELECT PercentileAggregator(75, x) FROM VALUES (5.0D) AS t(x)") == [(5.0,)]


def test_time_series_functions(spark) -> None:  # type: ignore[no-untyped-def]
    h = datetime(2026, 3, 2, 8, 0)

    def ts(minutes: list[float]) -> str:
        return (
            "array("
            + ", ".join(f"TIMESTAMP '{h + timedelta(minutes=m):%Y-%m-%d %H:%M:%S}'" for m in minutes)
            + ")"
        )

    start = f"TIMESTAMP '{h:%Y-%m-%d %H:%M:%S}'"
    run_cases(
        spark,
        [
            # y = 2x + 1 over minutes 0..3, minute 1's second value wins, a value past the window is left out
            (
                f"LinearTrend({ts([0, 1, 1.5, 2, 3, 9])}, array(1.0D, 0.0D, 3.0D, 5.0D, 7.0D, 100.0D), {start}, 4)",
                2.0,
            ),
            (f"LinearTrend({ts([0])}, array(5.0D), {start}, 4)", -1.5),  # 5 at minute 0, zeros after
            (f"LinearTrend({ts([0, 1])}, array(1.0D), {start}, 4)", None),  # lists of different length
            (f"LinearTrend({ts([0])}, array(1.0D), CAST(NULL AS TIMESTAMP), 4)", None),
            (f"ExponentialMovingAverage({ts([0, 1, 2])}, array(4.0D, 2.0D, 8.0D), {start}, 3.0D, 0.5D)", 5.5),
            (f"ExponentialMovingAverage({ts([2, 2.5])}, array(8.0D, 6.0D), {start}, 3.0D, 0.5D)", 3.0),
            (f"ExponentialMovingAverage({ts([0])}, array(1.0D), {start}, 3.0D, CAST(NULL AS DOUBLE))", None),
        ],
    )
    assert math.isnan(query(spark, f"SELECT LinearTrend({ts([0])}, array(1.0D), {start}, 1)")[0][0])


def test_table_functions(spark) -> None:  # type: ignore[no-untyped-def]
    rows = query(
        spark,
        "SELECT x, bucket FROM VALUES (0.5D), (5.0D), (11.0D), (CAST(NULL AS DOUBLE)) AS t(x), "
        "LATERAL TABLE(HistogramBucket(x, '1, 5,10')) AS T(bucket)",
    )
    assert sorted(rows, key=str) == sorted(
        [
            (0.5, "+Inf"),
            (0.5, "1"),
            (0.5, " 5"),
            (0.5, "10"),
            (5.0, "+Inf"),
            (5.0, " 5"),
            (5.0, "10"),
            (11.0, "+Inf"),
            (None, "+Inf"),
        ],
        key=str,
    )
    h = "TIMESTAMP '2026-03-02 08:0{}:00'"
    series = f"array({', '.join(h.format(m) for m in range(6))})"
    got = query(
        spark,
        "SELECT id, T.timestamp, value, upper_bound, lower_bound, is_outlier FROM VALUES "
        f"(1, array(10.0D, 12.0D, 11.0D, 13.0D, 9.0D, 40.0D), {series}), "
        f"(2, array(5.0D, 5.0D, 5.0D, 5.0D, 5.0D, 5.0D), {series}), "
        f"(3, CAST(array() AS ARRAY<DOUBLE>), CAST(array() AS ARRAY<TIMESTAMP>)) AS t(id, v, ts) "
        f"LEFT JOIN LATERAL TABLE(OutlierMad(v, ts, {h.format(0)}, 6, 3, 3, 50)) "
        "AS T(timestamp, value, upper_bound, lower_bound, is_outlier) ON TRUE",
    )
    minute = [datetime(2026, 3, 2, 8, m) for m in range(6)]
    assert [(r[0], r[1].replace(tzinfo=None) if r[1] else None, *r[2:]) for r in got] == [
        # median 11.5, both halves' MAD 1: bounds 11.5 ± 3; 40 is the only outlier, 1 of 3 observed < 50 %
        (1, minute[3], 13.0, 14.5, 8.5, False),
        (1, minute[4], 9.0, 14.5, 8.5, False),
        (1, minute[5], 40.0, 14.5, 8.5, False),
        # a flat series has MAD 0: no outliers, no bounds
        (2, minute[3], 5.0, None, None, False),
        (2, minute[4], 5.0, None, None, False),
        (2, minute[5], 5.0, None, None, False),
        (3, None, None, None, None, None),  # nothing observed: LEFT JOIN keeps the row
    ]


@pytest.mark.parametrize(
    ("sql", "col", "needle"),
    [
        ("SELECT S2Id(lat, lng, 31) FROM s", 23, "level must be a whole number in 0..30, found 31"),
        ("SELECT S2Id(lat, lng) FROM s", 8, "S2Id takes 3 arguments, found 2"),
        ("SELECT S2Id('x', lng, 3) FROM s", 13, "latitude must be a number"),
        ("SELECT GeoHash(lat, lng, 13) FROM s", 26, "length must be a whole number in 1..12"),
        ("SELECT Distance(lat, lng, 'a', lng) FROM s", 27, "lat2 must be a number"),
        ("SELECT ElementAt(arr, 'one') FROM s", 23, "index must be a number"),
        ("SELECT ElementAt(arr, 'p', 0, 'a b') FROM s", 31, "path must be a string literal of field names"),
        ("SELECT ElementAt(arr) FROM s", 8, "ElementAt takes 2, 4 or 5 arguments, found 1"),
        ("SELECT ArrayAggregate(arr, op, 'int') FROM s", 28, "operation must be a string literal"),
        ("SELECT ArrayAggregate(arr, 'sum', 'text') FROM s", 35, "unknown element type 'text'"),
        ("SELECT ArrayAggregate(arr, 'sum', 'other') FROM s", 28, "sum needs numbers"),
        ("SELECT ArrayAggregate(arr, 'reverse.sum', 'int') FROM s", 28, "unknown prefix 'reverse'"),
        ("SELECT ArrayOperate(arr, 'shuffle', 'int') FROM s", 26, "unknown operation 'shuffle'"),
        ("SELECT StartOfWeek(secs, 'Mars/Olympus') FROM s", 26, "unknown time zone 'Mars/Olympus'"),
        ("SELECT TimeInDate(secs, '10', 30) FROM s", 25, "hour must be a number"),
        ("SELECT FormatTimeInZone(ts, 'Nowhere', 'HH') FROM s", 29, "unknown time zone 'Nowhere'"),
        ("SELECT JsonQuery(doc, 'a.b') FROM s", 23, "a JSONPath starts with $"),
        ("SELECT JsonUpdate(doc, '$..a', 1) FROM s", 24, "unsupported JSONPath '$..a'"),
        ("SELECT JsonDelete(doc, '$.a[*]') FROM s", 24, "unsupported JSONPath"),
        ("SELECT LinearTrend(t, v, t0, 0) FROM s", 30, "window length in minutes must be a whole number"),
        ("SELECT ExponentialMovingAverage(t, v, t0, 5.0, 2) FROM s", 48, "alpha must be in 0..1"),
        (
            "SELECT x FROM s, LATERAL TABLE(HistogramBucket(lat, '1,x')) AS T(b)",
            53,
            "bucket 'x' in '1,x' is not a number",
        ),
        ("SELECT x FROM s, LATERAL TABLE(HistogramBucket(lat, '1')) AS T(a, b)", 62, "adds 1 column(s)"),
        ("SELECT HistogramBucket(lat, '1') FROM s", 8, "is a table function"),
        (
            "SELECT x FROM s, LATERAL TABLE(upper(doc)) AS T(b)",
            26,
            "LATERAL TABLE(...) takes one table function",
        ),
    ],
)
def test_static_argument_errors_carry_line_and_column(sql: str, col: int, needle: str) -> None:
    tables = {"s": {"lat", "lng", "arr", "op", "secs", "ts", "doc", "t", "v", "t0", "x"}}
    with pytest.raises(SqlError) as info:
        translate("\n" + sql, tables)
    assert needle in info.value.reason
    assert (info.value.line, info.value.col) == (2, col)


def test_percentile_needs_a_literal_in_range() -> None:
    sql = (
        "SELECT PercentileAggregator({}, x) AS p, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS w FROM s "
        "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)"
    )
    for bad in ("0", "101", "x"):
        with pytest.raises(SqlError, match="percentile must be a number literal in \\(0, 100\\]") as info:
            translate(sql.format(bad), {"s": {"x"}})
        assert (info.value.line, info.value.col) == (1, 29)
