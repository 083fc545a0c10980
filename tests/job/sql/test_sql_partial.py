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
        # Spark's own aggregates beside it read every record
        f"SELECT DistinctCount(driver_id) AS n, COUNT(*) AS c FROM data_stream GROUP BY {TUMBLE}",
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
