"""Which numeric GROUP BY keys the source computes (job.sql.numeric_keys): golden Spark SQL and programs."""

from __future__ import annotations

import pytest

from job.sql import translate
from job.sql.numeric_keys import NumericKey

W = "TUMBLE(rowtime, INTERVAL '60' SECOND)"
END = "TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp"
TABLES = {
    "data_stream": {
        "lat": "DOUBLE",
        "long": "DOUBLE",
        "speed": "FLOAT",
        "city_id": "INT",
        "fare": "BIGINT",
        "driver_id": "STRING",
        "rowtime": "TIMESTAMP",
    }
}


def keyed(key: str, **options: bool) -> tuple[str, list[NumericKey]]:
    sql = f"SELECT {key} AS tag_bin, COUNT(*) AS n, {END} FROM data_stream GROUP BY {W}, {key}"
    t = translate(sql, TABLES, partial=True, **options)
    return t.spark_sql, [d for d in t.derived.get("data_stream", []) if isinstance(d, NumericKey)]


def test_a_grid_key_is_a_column_the_source_computes_and_aggregates_first() -> None:
    sql, keys = keyed("CAST(FLOOR(lat * 100) AS BIGINT)")
    assert [(k.program, k.inputs) for k in keys] == [
        (["bigint", ["floor", ["mul", ["col", "lat"], ["num", "100"]]]], ("lat",))
    ]
    name = keys[0].name
    assert name.startswith("__dagger_key_")
    assert sql == (
        f"SELECT {name} AS tag_bin, SUM(__dagger_records) AS n, window.end AS window_timestamp "
        f"FROM data_stream GROUP BY {name}, window(rowtime, '60 seconds')"
    )
    # the expression it stands for, as Spark computes Flink's value (a DOUBLE FLOOR, a saturating cast)
    assert keys[0].spark_expr().startswith("CASE WHEN ISNAN(IF(ABS((lat * 100)) >= 4.503599627370496E15")


@pytest.mark.parametrize(
    ("key", "program"),
    [
        ("CAST(FLOOR(lat * 0.5) AS BIGINT)", ["floor", ["mul", ["col", "lat"], ["num", "0.5"]]]),
        (
            "CAST(CEIL(-long / 0.125 + 0.5) AS BIGINT)",
            ["ceil", ["add", ["div", ["neg", ["col", "long"]], ["num", "0.125"]], ["num", "0.5"]]],
        ),
        ("CAST((lat - long) * 4 AS BIGINT)", ["mul", ["sub", ["col", "lat"], ["col", "long"]], ["num", "4"]]),
        ("CAST(FLOOR(lat * -3) AS BIGINT)", ["floor", ["mul", ["col", "lat"], ["num", "-3"]]]),
        ("CAST(lat AS BIGINT)", ["col", "lat"]),
    ],
)
def test_double_arithmetic_keys_are_moved(key: str, program: list[object]) -> None:
    _, keys = keyed(key)
    assert [k.program for k in keys] == [["bigint", program]]


@pytest.mark.parametrize(
    "key",
    [
        "CAST(FLOOR(speed * 10) AS BIGINT)",  # FLOAT: computed in FLOAT by Flink
        "CAST(FLOOR(city_id / 10) AS BIGINT)",  # integers
        "CAST(FLOOR(fare * 0.001) AS BIGINT)",  # a BIGINT with a DECIMAL: DECIMAL arithmetic
        "CAST(FLOOR(lat * 100) AS INT)",  # another target type
        "CAST(ROUND(lat, 2) * 100 AS BIGINT)",  # another function
        "CAST(FLOOR(lat * 1.23456789012345678) AS BIGINT)",  # more digits than a DOUBLE holds
        "CAST(FLOOR(lat * 1e2) AS BIGINT)",  # an exponent
        "FLOOR(lat * 100)",  # a DOUBLE key: left to Spark
    ],
)
def test_other_keys_stay_in_spark(key: str) -> None:
    _, keys = keyed(key)
    assert keys == []


def test_off_for_a_checkpoint_pinned_before_it() -> None:
    sql, keys = keyed("CAST(FLOOR(lat * 100) AS BIGINT)", numeric_keys=False)
    assert keys == [] and "FLOOR((lat * 100))" in sql


def test_the_same_key_twice_is_one_column_and_its_inputs_are_not_handed_over() -> None:
    sql = (
        "SELECT CAST(FLOOR(lat * 100) AS BIGINT) AS a, CAST(FLOOR(long * 100) AS BIGINT) AS b, "
        f"DistinctCount(driver_id) AS drivers, {END} FROM data_stream "
        f"GROUP BY {W}, CAST(FLOOR(lat * 100) AS BIGINT), CAST(FLOOR(long * 100) AS BIGINT)"
    )
    t = translate(sql, TABLES, partial=True)
    names = [d.name for d in t.derived["data_stream"]]
    assert len(names) == 2 and len(set(names)) == 2
    assert t.derived_only == {"data_stream": ["lat", "long"]}
    assert t.partial["data_stream"].keys == names
    assert "lat" not in t.spark_sql.replace("__dagger_", "")


def test_a_key_whose_column_is_also_read_keeps_the_column() -> None:
    sql = (
        "SELECT CAST(FLOOR(lat * 100) AS BIGINT) AS a, MAX(lat) AS north, "
        f"{END} FROM data_stream GROUP BY {W}, CAST(FLOOR(lat * 100) AS BIGINT)"
    )
    t = translate(sql, TABLES, partial=True)
    assert t.derived_only == {}
    assert t.partial["data_stream"].aggregates == [["max", "lat", "__dagger_max_lat"]]
