"""Which queries let their source aggregate first (job.sql.partial), and the Spark SQL they run then. Golden
strings; no Spark."""

from __future__ import annotations

import pytest

from job.sql import translate
from job.sql.partial import SourcePartial

PINGS = {
    "data_stream": {
        "driver_id": "string",
        "lat": "double",
        "long": "double",
        "event_timestamp": "timestamp",
        "driver_status": "string",
        "service_type": "bigint",
        "speed": "float",
        "seats": "int",
        "fare": "decimal(12,2)",
    }
}
TUMBLE = "TUMBLE(rowtime, INTERVAL '60' SECOND)"
CELLS = f"""SELECT S2Id(lat, long, 13) AS tag_s2id, DistinctCount(driver_id) AS drivers,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream GROUP BY {TUMBLE}, S2Id(lat, long, 13)"""


def test_distinct_drivers_per_cell_and_window_are_aggregated_by_the_source_first() -> None:
    t = translate(CELLS, PINGS, partial=True)
    assert t.partial == {
        "data_stream": SourcePartial(
            ["__dagger_s2_lat_long_13"], 60_000, {"driver_id": "__dagger_distinct_driver_id"}
        )
    }
    assert t.spark_sql == (
        "SELECT CAST(__dagger_s2_lat_long_13 AS STRING) AS tag_s2id, "
        "dagger_distinct_count_merge(__dagger_distinct_driver_id) AS drivers, window.end AS window_timestamp "
        "FROM data_stream GROUP BY __dagger_s2_lat_long_13, window(rowtime, '60 seconds')"
    )
    assert t.batch_order == {}  # the source hands over groups, not records to sort
    assert translate(CELLS, PINGS).partial == {}  # not asked: as before
    assert "dagger_distinct_count(CAST(driver_id AS BINARY))" in translate(CELLS, PINGS).spark_sql


def test_several_keys_and_distinct_counts() -> None:
    sql = f"""SELECT driver_status AS tag_status, DistinctCount(driver_id) AS drivers,
       DistinctCount(driver_status) AS statuses, TUMBLE_START(rowtime, INTERVAL '60' SECOND) AS window_timestamp
    FROM data_stream GROUP BY driver_status, {TUMBLE}"""
    t = translate(sql, PINGS, partial=True)
    assert t.partial["data_stream"] == SourcePartial(
        ["driver_status"],
        60_000,
        {"driver_id": "__dagger_distinct_driver_id", "driver_status": "__dagger_distinct_driver_status"},
    )
    assert "dagger_distinct_count_merge(__dagger_distinct_driver_status) AS statuses" in t.spark_sql


@pytest.mark.parametrize(
    "sql",
    [
        # a filter on the records
        f"SELECT DistinctCount(driver_id) AS n FROM data_stream WHERE service_type > 1 GROUP BY {TUMBLE}",
        # aggregates whose partials do not merge, or not of a plain column of a type the source sums
        f"SELECT DistinctCount(driver_id) AS n, percentile_approx(lat, 0.5) AS p FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT STDDEV_POP(lat) AS s FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT SUM(lat * 2) AS s FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT SUM(lat) FILTER (WHERE service_type > 1) AS s FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT MAX(driver_id) AS s FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT MAX(event_timestamp) AS s FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT SUM(fare) AS s FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT COUNT(NULL) AS s FROM data_stream GROUP BY {TUMBLE}",
        # a value counted by its text, or an expression of the record
        f"SELECT DistinctCount(service_type) AS n FROM data_stream GROUP BY {TUMBLE}",
        f"SELECT DistinctCount(UPPER(driver_id)) AS n FROM data_stream GROUP BY {TUMBLE}",
        # a sliding window: a record is in several windows
        "SELECT DistinctCount(driver_id) AS n FROM data_stream "
        "GROUP BY HOP(rowtime, INTERVAL '10' SECOND, INTERVAL '60' SECOND)",
        # HAVING, and a key that is an expression
        f"SELECT DistinctCount(driver_id) AS n FROM data_stream GROUP BY {TUMBLE} HAVING DistinctCount(driver_id) > 2",
        f"SELECT UPPER(driver_status) AS s, DistinctCount(driver_id) AS n FROM data_stream "
        f"GROUP BY {TUMBLE}, UPPER(driver_status)",
    ],
)
def test_other_queries_aggregate_every_record_in_spark(sql: str) -> None:
    t = translate(sql, PINGS, partial=True)
    assert t.partial == {} and "dagger_distinct_count_merge" not in t.spark_sql


@pytest.mark.parametrize(
    ("aggregate", "merged", "partials"),
    [
        ("COUNT(*)", "SUM(__dagger_records)", []),
        ("COUNT(1)", "SUM(__dagger_records)", []),
        (
            "COUNT(driver_id)",
            "SUM(__dagger_count_driver_id)",
            [["count", "driver_id", "__dagger_count_driver_id"]],
        ),
        (
            "SUM(service_type)",
            "SUM(__dagger_sum_service_type)",
            [["sum", "service_type", "__dagger_sum_service_type"]],
        ),
        # Flink's SUM of an INT or FLOAT keeps its type: the cast stays around the merged sum
        ("SUM(seats)", "CAST(SUM(__dagger_sum_seats) AS INT)", [["sum", "seats", "__dagger_sum_seats"]]),
        ("SUM(speed)", "CAST(SUM(__dagger_sum_speed) AS FLOAT)", [["sum", "speed", "__dagger_sum_speed"]]),
        ("MIN(lat)", "MIN(__dagger_min_lat)", [["min", "lat", "__dagger_min_lat"]]),
        ("MAX(seats)", "MAX(__dagger_max_seats)", [["max", "seats", "__dagger_max_seats"]]),
        (
            "AVG(lat)",
            "SUM(__dagger_sum_lat) / NULLIF(SUM(__dagger_count_lat), 0)",
            [["count", "lat", "__dagger_count_lat"], ["sum", "lat", "__dagger_sum_lat"]],
        ),
        # an integer AVG is Flink's: SUM DIV COUNT, each merged
        (
            "AVG(seats)",
            "CAST(SUM(__dagger_sum_seats) DIV SUM(__dagger_count_seats) AS INT)",
            [["count", "seats", "__dagger_count_seats"], ["sum", "seats", "__dagger_sum_seats"]],
        ),
    ],
)
def test_counts_sums_least_greatest_and_averages_merge_the_sources_partials(
    aggregate: str, merged: str, partials: list[list[str]]
) -> None:
    sql = f"""SELECT driver_status AS tag_status, {aggregate} AS v,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
    FROM data_stream GROUP BY driver_status, {TUMBLE}"""
    t = translate(sql, PINGS, partial=True)
    assert t.partial == {"data_stream": SourcePartial(["driver_status"], 60_000, {}, aggregates=partials)}
    assert t.spark_sql == (
        f"SELECT driver_status AS tag_status, {merged} AS v, window.end AS window_timestamp "
        "FROM data_stream GROUP BY driver_status, window(rowtime, '60 seconds')"
    )
    # a checkpoint that pinned the DistinctCount-only source keeps Spark's aggregation here
    assert translate(sql, PINGS, partial=True, partial_aggregates=False).partial == {}


def test_aggregates_mixed_with_distinct_counts_and_arithmetic_of_them() -> None:
    sql = f"""SELECT S2Id(lat, long, 13) AS tag_s2id, DistinctCount(driver_id) AS drivers, COUNT(*) AS pings,
       SUM(seats) * 2 + COUNT(seats) AS score, MAX(speed) AS fastest, AVG(speed) AS speed,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
    FROM data_stream GROUP BY {TUMBLE}, S2Id(lat, long, 13)"""
    t = translate(sql, PINGS, partial=True)
    assert t.partial == {
        "data_stream": SourcePartial(
            ["__dagger_s2_lat_long_13"],
            60_000,
            {"driver_id": "__dagger_distinct_driver_id"},
            aggregates=[
                ["count", "seats", "__dagger_count_seats"],
                ["sum", "seats", "__dagger_sum_seats"],
                ["count", "speed", "__dagger_count_speed"],
                ["sum", "speed", "__dagger_sum_speed"],
                ["max", "speed", "__dagger_max_speed"],
            ],
        )
    }
    assert t.spark_sql == (
        "SELECT CAST(__dagger_s2_lat_long_13 AS STRING) AS tag_s2id, "
        "dagger_distinct_count_merge(__dagger_distinct_driver_id) AS drivers, SUM(__dagger_records) AS pings, "
        "CAST(SUM(__dagger_sum_seats) AS INT) * 2 + SUM(__dagger_count_seats) AS score, "
        "MAX(__dagger_max_speed) AS fastest, "
        "CAST(SUM(__dagger_sum_speed) / NULLIF(SUM(__dagger_count_speed), 0) AS FLOAT) AS speed, "
        "window.end AS window_timestamp "
        "FROM data_stream GROUP BY __dagger_s2_lat_long_13, window(rowtime, '60 seconds')"
    )
    assert SourcePartial.from_json(t.partial["data_stream"].to_json()) == t.partial["data_stream"]
