"""Dagger SQL → Spark SQL: golden strings for each rewrite, and errors with line and column."""

from __future__ import annotations

import pytest
import sqlglot

from job.errors import SqlError
from job.sql import translate
from job.sql.pushdown import DerivedColumn
from job.sql.rewrite import (
    add_watermark_barrier,
    interval_text,
    put_window_keys_last,
    render,
    rewrite_distinct_count,
    rewrite_group_windows,
    rewrite_window_properties,
)

BOOKING = {
    "data_stream": {
        "order_number",
        "customer_id",
        "driver_id",
        "city_id",
        "vehicle_type",
        "status",
        "pickup_lat",
        "pickup_long",
        "event_timestamp",
        "fare_idr",
    }
}
PINGS = {"data_stream": {"driver_id", "lat", "long", "driver_status", "service_type", "event_timestamp"}}

SEED_BOOKINGS = """SELECT city_id AS tag_city_id,
  S2Id(pickup_lat, pickup_long, 13) AS tag_s2id,
  vehicle_type AS tag_vehicle_type,
  count(1) AS num_of_bookings,
  TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM `data_stream`
WHERE status = 'COMPLETED'
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id, S2Id(pickup_lat, pickup_long, 13), vehicle_type"""


def rw(fn, sql: str) -> str:  # type: ignore[no-untyped-def]
    return render(fn(sqlglot.parse_one(sql, read="spark")))


def test_group_window_tumble() -> None:
    assert (
        rw(rewrite_group_windows, "SELECT 1 FROM t GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), a")
        == "SELECT 1 FROM t GROUP BY window(rowtime, '60 seconds'), a"
    )


def test_group_window_hop_swaps_slide_and_size() -> None:
    got = rw(
        rewrite_group_windows,
        "SELECT 1 FROM t GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)",
    )
    assert got == "SELECT 1 FROM t GROUP BY window(rowtime, '5 minutes', '1 minutes')"


@pytest.mark.parametrize(
    ("sql", "want"),
    [
        (
            "SELECT 1 FROM t GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), cell, kind",
            "SELECT 1 FROM t GROUP BY cell, kind, window(rowtime, '60 seconds')",
        ),
        (
            "SELECT 1 FROM t GROUP BY a, HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), b",
            "SELECT 1 FROM t GROUP BY a, b, window(rowtime, '5 minutes', '1 minutes')",
        ),
        (
            "SELECT 1 FROM t GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND)",
            "SELECT 1 FROM t GROUP BY window(rowtime, '60 seconds')",
        ),
        ("SELECT a FROM t GROUP BY a", "SELECT a FROM t GROUP BY a"),
        (
            "SELECT n FROM (SELECT COUNT(1) AS n FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), a) AS s "
            "GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE), n",
            "SELECT n FROM (SELECT COUNT(1) AS n FROM t GROUP BY a, window(rowtime, '1 minutes')) AS s "
            "GROUP BY n, window(rt, '5 minutes')",
        ),
    ],
)
def test_put_window_keys_last(sql: str, want: str) -> None:
    tree = rewrite_group_windows(sqlglot.parse_one(sql, read="spark"))
    before = render(tree)
    assert render(put_window_keys_last(tree)) == want
    assert render(tree) == before  # the input is not changed


def test_window_keys_as_written_for_an_older_checkpoint() -> None:
    sql = (
        "SELECT COUNT(1) AS n FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), driver_status"
    )
    assert translate(sql, PINGS).spark_sql.endswith("GROUP BY driver_status, window(rowtime, '60 seconds')")
    assert translate(sql, PINGS, window_keys_last=False).spark_sql.endswith(
        "GROUP BY window(rowtime, '60 seconds'), driver_status"
    )


@pytest.mark.parametrize(
    ("sql", "tables", "want"),
    [
        (SEED_BOOKINGS, BOOKING, {"data_stream": "city_id"}),
        (
            "SELECT S2Id(lat, long, 13) AS c, COUNT(1) AS n FROM data_stream "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), S2Id(lat, long, 13)",
            PINGS,
            {"data_stream": "__dagger_s2_lat_long_13"},
        ),
        (
            "SELECT COUNT(1) AS n FROM data_stream AS d GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), d.driver_status",
            PINGS,
            {"data_stream": "driver_status"},
        ),
        (
            "SELECT n FROM (SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt, driver_status, COUNT(1) AS n "
            "FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), driver_status) AS m "
            "GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE), n",
            PINGS,
            {"data_stream": "driver_status"},
        ),
        # not grouped on one of the stream's columns, or not read by one SELECT alone: arrival order
        ("SELECT COUNT(1) AS n FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)", PINGS, {}),
        ("SELECT driver_id, lat FROM data_stream", PINGS, {}),
        (
            "SELECT upper(driver_id) AS u, COUNT(1) AS n FROM data_stream "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), upper(driver_id)",
            PINGS,
            {},
        ),
        (
            "SELECT COUNT(1) AS n FROM a JOIN b ON a.x = b.x GROUP BY TUMBLE(a.rowtime, INTERVAL '1' MINUTE), a.x",
            {"a": {"x"}, "b": {"x"}},
            {},
        ),
    ],
)
def test_batch_order(sql: str, tables: dict[str, set[str]], want: dict[str, str]) -> None:
    assert translate(sql, tables).batch_order == want


def test_window_properties() -> None:
    got = rw(
        rewrite_window_properties,
        "SELECT TUMBLE_START(rowtime, INTERVAL '1' HOUR) AS s, "
        "TUMBLE_END(rowtime, INTERVAL '1' HOUR) AS e FROM t",
    )
    assert got == "SELECT window.start AS s, window.end AS e FROM t"


def test_distinct_count() -> None:
    assert (
        rw(rewrite_distinct_count, "SELECT DistinctCount(driver_id) AS d FROM t")
        == "SELECT size(collect_set(driver_id)) AS d FROM t"
    )


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("INTERVAL '60' SECOND", "60 seconds"),
        ("INTERVAL '1' MINUTE", "1 minutes"),
        ("INTERVAL '2' HOUR", "2 hours"),
        ("INTERVAL '1' DAY", "1 days"),
        ("INTERVAL '500' MILLISECOND", "500 milliseconds"),
    ],
)
def test_interval_text(text: str, want: str) -> None:
    assert interval_text(sqlglot.parse_one(text, read="spark")) == want


def test_seed_bookings_golden() -> None:
    t = translate(SEED_BOOKINGS, BOOKING)
    assert t.spark_sql == (
        "SELECT city_id AS tag_city_id, CAST(__dagger_s2_pickup_lat_pickup_long_13 AS STRING) AS tag_s2id, "
        "vehicle_type AS tag_vehicle_type, COUNT(1) AS num_of_bookings, window.end AS window_timestamp "
        "FROM `data_stream` WHERE status = 'COMPLETED' AND data_stream.__dagger_wm >= 0 "
        "GROUP BY city_id, __dagger_s2_pickup_lat_pickup_long_13, vehicle_type, window(rowtime, '60 seconds')"
    )
    assert t.derived == {
        "data_stream": [
            DerivedColumn("__dagger_s2_pickup_lat_pickup_long_13", "s2cell", "pickup_lat", "pickup_long", 13)
        ]
    }
    assert t.columns == {"data_stream": ["city_id", "pickup_lat", "pickup_long", "status", "vehicle_type"]}
    assert t.derived_only == {"data_stream": ["pickup_lat", "pickup_long"]}  # decoded, not handed to Spark
    assert t.aggregates is True
    assert t.window == ("60 seconds", None)


def test_seed_drivers_golden() -> None:
    sql = (
        "SELECT S2Id(lat, long, 13) AS tag_s2id, driver_status AS tag_driver_status, "
        "DistinctCount(driver_id) AS drivers, TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp "
        "FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), S2Id(lat, long, 13), driver_status"
    )
    t = translate(sql, PINGS)
    assert t.spark_sql == (
        "SELECT CAST(__dagger_s2_lat_long_13 AS STRING) AS tag_s2id, driver_status AS tag_driver_status, "
        "size(collect_set(driver_id)) AS drivers, window.end AS window_timestamp FROM data_stream "
        "GROUP BY __dagger_s2_lat_long_13, driver_status, window(rowtime, '60 seconds')"
    )
    assert t.columns == {"data_stream": ["driver_id", "driver_status", "lat", "long"]}
    assert t.derived_only == {"data_stream": ["lat", "long"]}


def test_columns_named_elsewhere_or_star_stay_in_the_rows() -> None:
    t = translate("SELECT lat, S2Id(lat, long, 13) AS c FROM data_stream", PINGS)
    assert t.derived_only == {"data_stream": ["long"]}
    assert translate("SELECT *, S2Id(lat, long, 13) AS c FROM data_stream", PINGS).derived_only == {}


def test_projection_without_window_is_allowed() -> None:
    t = translate("SELECT driver_id, lat FROM data_stream WHERE driver_status = 'ON_TRIP'", PINGS)
    assert t.aggregates is False and t.window is None
    assert t.spark_sql == (
        "SELECT driver_id, lat FROM data_stream WHERE driver_status = 'ON_TRIP' "
        "AND data_stream.__dagger_wm >= 0"
    )


@pytest.mark.parametrize(
    ("sql", "line", "col", "needle"),
    [
        (SEED_BOOKINGS.replace("pickup_lat,", "pickup_latt,", 1), 2, 8, "unknown column pickup_latt"),
        (SEED_BOOKINGS.replace("count(1)", "cnt(1)"), 4, 3, "unknown function cnt"),
        (SEED_BOOKINGS.replace("window_timestamp\n", "window_timestamp,\n"), 5, 64, "comma before FROM"),
        (
            SEED_BOOKINGS.replace("TUMBLE_END(rowtime, INTERVAL '60'", "TUMBLE_END(rowtime, INTERVAL '30'"),
            5,
            3,
            "same window",
        ),
        ("SELECT city_id, count(1) AS n\nFROM data_stream\nGROUP BY city_id", 3, 10, "needs a window"),
        ("SELECT count(1) AS n FROM data_stream", 1, 8, "needs a window"),
        ("SELECT x\nFROM other", 2, 6, "unknown table other"),
        ("SELECT FROM WHERE", 1, 13, "Expected table name"),  # the start of WHERE
        (
            "SELECT city_id FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '60' FORTNIGHT)",
            1,
            67,
            "unknown interval unit 'FORTNIGHT'",
        ),
        (
            "SELECT count(DISTINCT driver_id) FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            1,
            8,
            "DistinctCount",
        ),
        ("SELECT 1 FROM data_stream GROUP BY TUMBLE(rowtime)", 1, 36, "TUMBLE takes 2 arguments"),
        ("", 1, 1, "empty"),
        # found by the token-soup property test: sqlglot's scopes raised OptimizeError with a traceback
        ("'x' UNION SELECT", 1, 1, "each side of UNION must be a query; found \"'x'\""),
        ("1 UNION\nSELECT city_id FROM data_stream", 1, 1, "each side of UNION must be a query; found '1'"),
    ],
)
def test_errors_carry_line_and_column(sql: str, line: int, col: int, needle: str) -> None:
    with pytest.raises(SqlError) as info:
        translate(sql, BOOKING)
    err = info.value
    assert needle in str(err)
    assert (err.line, err.col) == (line, col)
    assert str(err).startswith(f"line {line}, column {col}: ")


@pytest.mark.parametrize(
    ("typo", "hint"),
    [
        ("coutn", "did you mean count?"),  # a Spark built-in, as unknown columns already say
        ("sume", "did you mean sum?"),
        ("S2ld", "did you mean S2Id?"),  # a Dagger function keeps its own spelling
        ("DistinctCnt", "did you mean DistinctCount, Distance?"),
    ],
)
def test_unknown_function_suggests_the_closest_known_one(typo: str, hint: str) -> None:
    with pytest.raises(SqlError) as info:
        translate(SEED_BOOKINGS.replace("count(1)", f"{typo}(1)"), BOOKING)
    assert info.value.reason == f"unknown function {typo}"
    assert info.value.hint == hint


def test_an_unknown_function_with_nothing_close_has_no_hint() -> None:
    with pytest.raises(SqlError) as info:
        translate(SEED_BOOKINGS.replace("count(1)", "xyzzy(1)"), BOOKING)
    assert info.value.hint is None


def test_unknown_column_suggests_close_names() -> None:
    with pytest.raises(SqlError) as info:
        translate("SELECT citi_id FROM data_stream", BOOKING)
    assert info.value.hint == "did you mean city_id?"


def test_ambiguous_column_in_two_streams() -> None:
    tables = {"a": {"driver_id", "x"}, "b": {"driver_id", "y"}}
    with pytest.raises(SqlError, match="column driver_id is in a and b; qualify it"):
        translate("SELECT driver_id FROM a JOIN b ON a.x = b.y", tables)


def test_qualified_columns_are_tracked_per_table() -> None:
    tables = {"a": {"driver_id", "x"}, "b": {"driver_id", "y"}}
    t = translate("SELECT a.driver_id, b.y FROM a JOIN b ON a.x = b.y", tables)
    assert t.columns == {"a": ["driver_id", "x"], "b": ["y"]}


def test_watermark_barrier_golden() -> None:
    def barrier(sql: str) -> str:
        return render(add_watermark_barrier(sqlglot.parse_one(sql, read="spark"), {"a", "b"}))

    assert (
        barrier("SELECT x FROM a WHERE x = 1 OR y = 2")
        == "SELECT x FROM a WHERE (x = 1 OR y = 2) AND a.__dagger_wm >= 0"
    )
    assert barrier("SELECT x FROM a AS p JOIN b AS q ON p.k = q.k WHERE p.x > 0") == (
        "SELECT x FROM a AS p JOIN b AS q ON p.k = q.k WHERE p.x > 0 AND p.__dagger_wm >= 0 AND q.__dagger_wm >= 0"
    )
    assert barrier("SELECT x FROM a") == "SELECT x FROM a"
    assert barrier("SELECT n FROM (SELECT x AS n FROM a WHERE x > 1) AS s WHERE n < 5") == (
        "SELECT n FROM (SELECT x AS n FROM a WHERE x > 1 AND a.__dagger_wm >= 0) AS s WHERE n < 5"
    )
