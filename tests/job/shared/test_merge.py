"""A fused group's members merged into one aggregation (:mod:`job.shared.merge`): the shapes that merge
and why others do not, the merged SQL (golden), and on Spark, that each member's rows of the merged query
are exactly its own query's rows over the same events."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from job.shared.fusion import JSON_TIME_FORMAT, Branch, merged_frame, output_names, split_rows
from job.shared.merge import Member, member_shape, merged_sql
from job.sql.rewrite import render
from job.sql.translate import translate

COLUMNS = {
    "data_stream": {
        "service_type": "string",
        "driver_id": "string",
        "city_id": "int",
        "speed_kmh": "double",
        "rowtime": "timestamp",
    }
}


def spark_sql(sql: str) -> str:
    return translate(sql, JOIN_COLUMNS if " JOIN " in sql else COLUMNS).spark_sql


TUMBLE = {
    "drivers": """SELECT service_type AS tag_service, DistinctCount(driver_id) AS drivers, count(1) AS n,
                  TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp
                  FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), service_type""",
    "go_drivers": """SELECT service_type AS tag_service, DistinctCount(driver_id) AS drivers, count(1) AS n,
                     TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp
                     FROM data_stream WHERE service_type = 'GO_RIDE'
                     GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), service_type""",
    "speeds": """SELECT city_id AS tag_city, avg(speed_kmh) AS avg_speed, max(speed_kmh) AS top,
                 sum(speed_kmh) / count(*) AS mean, TUMBLE_START(rowtime, INTERVAL '1' MINUTE) AS window_start
                 FROM data_stream WHERE speed_kmh > 20
                 GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id HAVING count(*) > 2""",
    "both_keys": """SELECT UPPER(service_type) AS tag_service, city_id AS tag_city,
                    PercentileAggregator(90, speed_kmh) AS p90, CollectArray(DISTINCT driver_id) AS ids,
                    min(speed_kmh) AS slowest, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp
                    FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id, UPPER(service_type)""",
    "drivers_again": """SELECT service_type AS service, DistinctCount(driver_id) AS unique_drivers,
                        TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS t
                        FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), service_type""",
    "fleet": """SELECT count(1) AS pings, DistinctCount(driver_id) AS drivers,
                TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS window_timestamp
                FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)""",
}
TUMBLE["fleet_to_kafka"] = TUMBLE["fleet"]  # the same query with other sinks: one row for both
HOP = {
    "hop_n": """SELECT city_id AS tag_city, count(1) AS n,
                HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS window_timestamp
                FROM data_stream GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE), city_id""",
    "hop_sum": """SELECT service_type AS tag_service, sum(speed_kmh) AS total,
                  HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS window_timestamp
                  FROM data_stream WHERE city_id <> 2
                  GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE), service_type""",
}
JOIN_COLUMNS = {t: COLUMNS["data_stream"] for t in ("pings", "later")}
ON = (
    "FROM pings AS a JOIN later AS b ON a.driver_id = b.driver_id "
    "AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND "
)
JOIN = {
    "pairs": f"""SELECT a.service_type AS tag_service, count(1) AS pairs,
                 TUMBLE_END(a.rowtime, INTERVAL '1' MINUTE) AS window_timestamp {ON}
                 GROUP BY TUMBLE(a.rowtime, INTERVAL '1' MINUTE), a.service_type""",
    "fast_pairs": f"""SELECT a.city_id AS tag_city, DistinctCount(b.driver_id) AS drivers, max(b.speed_kmh) AS top,
                      TUMBLE_START(a.rowtime, INTERVAL '1' MINUTE) AS window_start {ON}
                      WHERE a.speed_kmh > 40 GROUP BY TUMBLE(a.rowtime, INTERVAL '1' MINUTE), a.city_id""",
}
PASS = {
    "fast": "SELECT driver_id AS tag_driver, speed_kmh, rowtime AS window_timestamp FROM data_stream WHERE speed_kmh > 30",
    "city1": "SELECT driver_id, city_id, UPPER(service_type) AS service FROM data_stream WHERE city_id = 1",
}
PASS["fast_again"] = PASS["fast"]


# ---- shapes and SQL, no Spark ---------------------------------------------------------------------


def test_a_windowed_query_comes_apart_into_keys_aggregates_and_outputs() -> None:
    shape = member_shape(spark_sql(TUMBLE["speeds"]), "data_stream")
    assert not isinstance(shape, str)
    assert [k.sql("spark") for k in shape.keys] == ["city_id"]
    assert shape.window is not None and render(shape.window) == "window(rowtime, '1 minutes')"
    assert [(a.template, [v.sql("spark") for v in a.values]) for a in shape.aggregates] == [
        ("AVG(__v0)", ["speed_kmh"]),
        ("MAX(__v0)", ["speed_kmh"]),
        ("COUNT(*)", []),
        ("SUM(__v0)", ["speed_kmh"]),
    ]
    # a DOUBLE divided by zero is ±Infinity or NaN, as on Flink (Spark's ANSI division would stop the query)
    assert [o.sql("spark") for o in shape.outputs] == [
        "__K0",
        "__A0",
        "__A1",
        "IF(__A2 = 0, __A3 * POWER(__A2, -1), __A3 / __A2)",
        "window.start",
    ]
    assert shape.having is not None and shape.having.sql("spark") == "__A2 > 2"
    assert shape.where is not None and shape.where.sql("spark") == "speed_kmh > 20 AND __dagger_wm >= 0"


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        (
            "SELECT a.city_id, count(1) AS n, TUMBLE_END(a.rowtime, INTERVAL '1' MINUTE) AS t FROM data_stream AS a "
            "JOIN data_stream AS b ON a.driver_id = b.driver_id AND b.rowtime BETWEEN a.rowtime AND a.rowtime + "
            "INTERVAL '1' SECOND GROUP BY TUMBLE(a.rowtime, INTERVAL '1' MINUTE), a.city_id",
            "does not read data_stream alone",
        ),
        ("SELECT * FROM data_stream", "a subquery, an OVER, a generator or *"),
        (
            "SELECT city_id, driver_id, count(1) AS n FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id",
            "its output reads driver_id outside its GROUP BY and aggregates",
        ),
    ],
)
def test_what_does_not_merge_says_why(sql: str, why: str) -> None:
    try:
        text = spark_sql(sql)
    except Exception:  # the translator's own checks may refuse it first: then it never reaches a group
        return
    shape = member_shape(text, "data_stream")
    assert isinstance(shape, str) and why in shape


def test_members_share_typed_slots_and_the_merged_sql_is_golden() -> None:
    count = member_shape(
        "SELECT city_id AS c, COUNT(1) AS n, window.end AS t FROM data_stream "
        "GROUP BY city_id, window(rowtime, '1 minutes')",
        "data_stream",
    )
    summed = member_shape(
        "SELECT service_type AS s, SUM(speed_kmh) AS total, COUNT(1) AS n, window.end AS t "
        "FROM data_stream WHERE speed_kmh > 1 GROUP BY service_type, window(rowtime, '1 minutes') "
        "HAVING COUNT(1) > 1",
        "data_stream",
    )
    assert not isinstance(count, str) and not isinstance(summed, str)
    sql = merged_sql(
        [
            Member("a", count, ("c", "n", "t"), ("int",), ((),)),
            Member("b", summed, ("s", "total", "n", "t"), ("string",), (("double",), ())),
            Member("c", count, ("city", "n", "t"), ("int",), ((),)),
            Member("d", count, ("c", "n", "t"), ("int",), ((),)),
        ],
        "X",
    )
    # COUNT(1) is one slot for both queries; each key type has a slot of its own; a, c and d read the same
    # rows into the same slots (c's outputs differ): one row an event and one group a window for the three,
    # and a and d (the same output) share their output rows
    assert sql == (
        "SELECT __o.k AS __member, __o.r AS __row FROM (SELECT explode(CASE __m "
        "WHEN 0 THEN array("
        "named_struct('k', 'a d', 'r', to_json(named_struct('c', __k0, 'n', __a0, 't', window.end), "
        "map('timestampFormat', 'X'))), "
        "named_struct('k', 'c', 'r', to_json(named_struct('city', __k0, 'n', __a0, 't', window.end), "
        "map('timestampFormat', 'X')))) "
        "WHEN 1 THEN array(named_struct('k', 'b', 'r', IF(__a0 > 1, to_json(named_struct("
        "'s', __k1, 'total', __a1, 'n', __a0, 't', window.end), map('timestampFormat', 'X')), NULL))) "
        "END) AS __o "
        "FROM (SELECT __m, __k0, __k1, window, COUNT(1) AS __a0, SUM(__a1_v0) AS __a1 "
        "FROM (SELECT rowtime, __e.* FROM (SELECT rowtime, explode(array("
        "IF(true, named_struct('__m', 0, '__k0', city_id, '__k1', CAST(NULL AS string), "
        "'__a1_v0', CAST(NULL AS double)), NULL), "
        "IF(speed_kmh > 1, named_struct('__m', 1, '__k0', CAST(NULL AS int), '__k1', service_type, "
        "'__a1_v0', speed_kmh), NULL))) AS __e FROM data_stream) WHERE __e IS NOT NULL) "
        "GROUP BY __m, __k0, __k1, window(rowtime, '1 minutes'))) WHERE __o.r IS NOT NULL"
    )


def test_pass_throughs_with_the_same_where_and_output_are_one_row_an_event() -> None:
    fast = member_shape(spark_sql(PASS["fast"]), "data_stream")
    city = member_shape(spark_sql(PASS["city1"]), "data_stream")
    assert not isinstance(fast, str) and not isinstance(city, str)
    names = ("tag_driver", "speed_kmh", "window_timestamp")
    sql = merged_sql(
        [
            Member("f1", fast, names),
            Member("c", city, ("driver_id", "city_id", "service")),
            Member("f2", fast, names),
        ],
        "X",
    )
    assert sql == (
        "SELECT element_at(array('f1 f2', 'c'), __e.__m + 1) AS __member, __e.__row AS __row FROM (SELECT "
        "explode(array(IF(speed_kmh > 30 AND __dagger_wm >= 0, named_struct('__m', 0, '__row', to_json(named_struct('tag_driver', "
        "driver_id, 'speed_kmh', speed_kmh, 'window_timestamp', rowtime), map('timestampFormat', 'X'))), NULL), "
        "IF(city_id = 1 AND __dagger_wm >= 0, named_struct('__m', 1, '__row', to_json(named_struct('driver_id', driver_id, "
        "'city_id', city_id, 'service', UPPER(service_type)), map('timestampFormat', 'X'))), NULL))) AS __e "
        "FROM data_stream) WHERE __e IS NOT NULL"
    )
    with pytest.raises(ValueError, match="member key has ' '"):
        merged_sql([Member("f 1", fast, names)], "X")


# ---- on Spark: each member's rows are its own query's ------------------------------------------------


def events(n: int = 3000) -> list[dict[str, Any]]:
    rng = random.Random(7)
    t0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
    return [
        {
            "service_type": rng.choice(["GO_RIDE", "GO_FOOD", "go_send"]),
            "driver_id": f"d{rng.randrange(40)}",
            "city_id": rng.randrange(4),
            "speed_kmh": round(rng.uniform(0, 80), 1),
            "rowtime": t0 + timedelta(milliseconds=rng.randrange(8 * 60_000)),
            "__dagger_wm": 0,
        }
        for _ in range(n)
    ]


def normal(row: dict[str, Any]) -> tuple:
    def one(v: Any) -> Any:
        if isinstance(v, list):
            return tuple(sorted(v))
        if isinstance(v, datetime):
            return v.astimezone(UTC).replace(tzinfo=None)
        if isinstance(v, float):  # sums in another order differ in the last bits
            return "nan" if math.isnan(v) else round(v, 9)
        return v

    return tuple(sorted((k, one(v)) for k, v in row.items()))


@pytest.mark.parametrize("queries", [TUMBLE, HOP, PASS, JOIN], ids=["tumble", "hop", "pass", "join"])
def test_each_member_of_a_merged_query_gets_exactly_its_own_rows(spark, queries: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.pandas.types import to_arrow_schema

    from job.spark import jvm

    # the queries' DistinctCount runs in the JVM: registered here, not by whichever test ran a dagger first
    assert jvm.register(spark)
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    frame = spark.createDataFrame(events())
    for table in ("data_stream", "pings", "later"):
        frame.createOrReplaceTempView(table)
    tables = {"pings", "later"} if queries is JOIN else "data_stream"
    members, branches, want = {}, {}, {}
    for key, sql in queries.items():
        text = spark_sql(sql)
        own = spark.sql(text)
        names = output_names(own.columns)
        own = own.select(*[f"`{n}`" for n in names if n is not None])
        shape = member_shape(text, tables)
        assert not isinstance(shape, str), shape
        members[key] = (shape, names)
        branches[key] = Branch(key, to_arrow_schema(own.schema, timezone="UTC"))
        want[key] = Counter(normal(r.asDict()) for r in own.collect())
        assert want[key], f"{key}: no rows to compare"
    got = split_rows(merged_frame(spark, members).toArrow(), branches)
    for key in queries:
        assert Counter(normal(r) for r in got[key].to_pylist()) == want[key], key


def test_hop_windows_an_earlier_generation_wrote_are_left_out(spark) -> None:  # type: ignore[no-untyped-def]
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.createDataFrame(events()).createOrReplaceTempView("data_stream")
    text = spark_sql(HOP["hop_n"])
    shape = member_shape(text, "data_stream")
    assert not isinstance(shape, str)
    written = datetime(2026, 3, 2, 10, 5, tzinfo=UTC)
    sql = merged_sql(
        [Member("h", shape, ("tag_city", "n", "window_timestamp"), ("int",), ((),))],
        JSON_TIME_FORMAT,
        int(written.timestamp() * 1000),
    )
    ends = {r["__row"].split('"window_timestamp":"')[1][:16] for r in spark.sql(sql).collect()}
    own = {r["window_timestamp"].strftime("%Y-%m-%dT%H:%M") for r in spark.sql(text).collect()}
    assert ends == {e for e in own if e > "2026-03-02T10:05"} and len(ends) == len(own) - 5


def test_windows_a_members_earlier_query_wrote_are_left_out_of_its_rows_only(spark) -> None:  # type: ignore[no-untyped-def]
    """A member back from a group of one (``written_by``): the windows it wrote there are left out of its
    rows, and only of its rows, even where it would share them with another member."""
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.createDataFrame(events()).createOrReplaceTempView("data_stream")
    members, own = {}, {}
    for key in ("fleet", "fleet_to_kafka", "speeds"):
        text = spark_sql(TUMBLE[key])
        shape = member_shape(text, "data_stream")
        assert not isinstance(shape, str)
        frame = spark.sql(text)
        members[key] = (shape, output_names(frame.columns))
        own[key] = [r.asDict() for r in frame.collect()]
    written = datetime(2026, 3, 2, 10, 3, tzinfo=UTC)
    rows = merged_frame(
        spark,
        members,
        written_by={
            "fleet_to_kafka": int(written.timestamp() * 1000),
            "speeds": int(written.timestamp() * 1000),
        },
    ).collect()
    got: Counter[tuple[str, str]] = Counter()
    for r in rows:
        for key in r["__member"].split(" "):
            stamp = r["__row"].split('"window_timestamp":"' if key != "speeds" else '"window_start":"')[1][
                :16
            ]
            got[(key, stamp)] += 1
    naive = written.replace(tzinfo=None)
    want: Counter[tuple[str, str]] = Counter()
    for key, found in own.items():
        for r in found:
            end = r["window_timestamp"] if key != "speeds" else r["window_start"] + timedelta(minutes=1)
            if key == "fleet" or end > naive:
                stamp = r["window_timestamp" if key != "speeds" else "window_start"]
                want[(key, stamp.strftime("%Y-%m-%dT%H:%M"))] += 1
    assert got == want
    assert (
        sum(n for (k, _), n in want.items() if k == "fleet") == 8
    )  # eight minutes of events, all of fleet's
    assert (
        sum(n for (k, _), n in want.items() if k == "fleet_to_kafka") == 5
    )  # the windows ending after 10:03
    with pytest.raises(ValueError, match="pass-throughs"):
        shape = member_shape(spark_sql(PASS["fast"]), "data_stream")
        assert not isinstance(shape, str)
        merged_sql(
            [Member("f", shape, ("tag_driver", "speed_kmh", "window_timestamp"))], "X", written_by={"f": 1}
        )
