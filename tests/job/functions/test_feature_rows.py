"""Feature rows (Features, FeaturesWithType, SingleFeatureWithType) on Spark: exact rows for every
value type, NULLs as the original treats them, and arguments refused before Spark starts.

The expected rows are written out from the original's documented layout (key, value with one
field set by the type, name = key), never computed by the code under test.
"""

from __future__ import annotations

from typing import Any

import pytest

from job.errors import SqlError
from job.sql import translate
from tests.job.functions.test_library_spark import query

pytestmark = pytest.mark.integration

FIELDS = (
    "bytes_val",
    "string_val",
    "int32_val",
    "int64_val",
    "double_val",
    "float_val",
    "bool_val",
    "timestamp_val",
)


def feature(key: str, field: str | None, value: Any) -> dict[str, Any]:
    """A feature row with only ``field`` of its value set (None: every field NULL)."""
    values = {f: None for f in FIELDS}
    if field is not None:
        values[field] = value
    return {"key": key, "value": values, "name": key}


def rows(got: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in got]


def by_key(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda f: (f["key"], repr(f["value"])))


def test_single_feature_with_type_sets_the_named_type(spark) -> None:  # type: ignore[no-untyped-def]
    # the original's SingleFeatureWithTypeTest: every type, the value in its slot
    got = query(
        spark,
        "SELECT SingleFeatureWithType("
        "'FloatKey', CAST(1.0 AS FLOAT), 'FloatType', 'StringKey', 'stringValue', 'StringType', "
        "'DoubleKey', 1.00D, 'DoubleType', 'IntegerKey', 1, 'IntegerType', 'LongKey', 1L, 'LongType', "
        "'ByteKey', CAST('value1' AS BINARY), 'ByteType', 'BoolKey', true, 'BooleanType', "
        "'TimestampKey', timestamp_micros(123141431231), 'TimestampType')",
    )
    assert by_key(rows(got[0][0])) == by_key(
        [
            feature("FloatKey", "float_val", 1.0),
            feature("StringKey", "string_val", "stringValue"),
            feature("DoubleKey", "double_val", 1.0),
            feature("IntegerKey", "int32_val", 1),
            feature("LongKey", "int64_val", 1),
            feature("ByteKey", "bytes_val", bytearray(b"value1")),
            feature("BoolKey", "bool_val", True),
            feature("TimestampKey", "timestamp_val", {"seconds": 123141, "nanos": 431231000}),
        ]
    )


def test_typed_values_convert_and_nulls_follow_the_original(spark) -> None:  # type: ignore[no-untyped-def]
    got = query(
        spark,
        "SELECT SingleFeatureWithType("
        "'a', '42', 'IntegerType', 'b', 7, 'StringType', 'c', CAST(NULL AS INT), 'IntegerType', "
        "'d', CAST(NULL AS DOUBLE), 'doubletype', 'e', CAST(NULL AS BOOLEAN), 'BooleanType', "
        "'f', CAST(NULL AS STRING), 'StringType', 'g', CAST(NULL AS TIMESTAMP), 'TimestampType', "
        "CAST(NULL AS STRING), 1L, 'LongType', 'h', timestamp_micros(-1500000), 'TimestampType', "
        "'a', '42', 'IntegerType')",
    )  # an equal triplet again: once, as the original's map
    assert by_key(rows(got[0][0])) == by_key(
        [
            feature("a", "int32_val", 42),
            feature("b", "string_val", "7"),
            feature("c", "int32_val", 0),
            feature("d", "double_val", 0.0),
            feature("e", "bool_val", False),
            feature("f", None, None),
            feature("g", None, None),  # the original threw / left the value empty
            feature("null", "int64_val", 1),  # String.valueOf(null)
            feature(
                "h", "timestamp_val", {"seconds": -2, "nanos": 500_000_000}
            ),  # before 1970: nanos stay >= 0
        ]
    )


def test_features_with_type_aggregates_a_window(spark) -> None:  # type: ignore[no-untyped-def]
    got = query(
        spark,
        "SELECT k, FeaturesWithType('city', city, 'StringType', 'fare', fare, 'LongType') "
        "FROM VALUES (1, 'JKT', 100L), (1, 'JKT', 100L), (1, 'BDG', 50L), (2, 'SUB', NULL) "
        "AS t(k, city, fare) GROUP BY k",
    )
    assert {r[0]: by_key(rows(r[1])) for r in got} == {
        1: by_key(
            [
                feature("city", "string_val", "JKT"),
                feature("fare", "int64_val", 100),
                feature("city", "string_val", "BDG"),
                feature("fare", "int64_val", 50),
            ]
        ),
        2: by_key([feature("city", "string_val", "SUB"), feature("fare", "int64_val", 0)]),
    }


def test_features_takes_the_type_from_the_value(spark) -> None:  # type: ignore[no-untyped-def]
    got = query(
        spark,
        "SELECT Features('i', i, 'l', l, 's', s, 'd', d, 'f', f, 'b', b, 'y', y, 't', t, "
        "'m', m, 'n', n) FROM VALUES (1, 2L, 'x', 1.5D, CAST(2.5 AS FLOAT), true, X'4A4B', "
        "timestamp_micros(1500000), CAST(3.25 AS DECIMAL(5, 2)), CAST(NULL AS STRING)) "
        "AS t(i, l, s, d, f, b, y, t, m, n)",
    )
    assert rows(got[0][0]) == [  # one event: its pairs in argument order
        feature("i", "int32_val", 1),
        feature("l", "int64_val", 2),
        feature("s", "string_val", "x"),
        feature("d", "double_val", 1.5),
        feature("f", "float_val", 2.5),
        feature("b", "bool_val", True),
        feature("y", "bytes_val", bytearray(b"JK")),
        feature("t", "timestamp_val", {"seconds": 1, "nanos": 500_000_000}),
        feature("m", "double_val", 3.25),
        feature("n", None, None),
    ]
    got = query(
        spark,
        "SELECT k, Features(name, v) FROM VALUES (1, 'a', 1), (1, 'a', 1), (1, CAST(NULL AS STRING), 2), "
        "(2, 'c', 3) AS t(k, name, v) GROUP BY k",
    )
    assert {r[0]: by_key(rows(r[1])) for r in got} == {  # every pair of every event, duplicates kept
        1: by_key(
            [feature("a", "int32_val", 1), feature("a", "int32_val", 1), feature("null", "int32_val", 2)]
        ),
        2: [feature("c", "int32_val", 3)],
    }


def test_features_of_a_type_without_a_feature_value_fails_with_its_position(spark) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="Features: value 2 is list<"):
        query(spark, "SELECT Features('a', 1, 'b', array(1, 2))")


@pytest.mark.parametrize(
    ("sql", "col", "needle"),
    [
        (
            "SELECT SingleFeatureWithType('k', x, 'Text') FROM s",
            38,
            "a feature type must be a string literal, one of ByteType, StringType",
        ),
        ("SELECT SingleFeatureWithType('k', x, t) FROM s", 38, "found t"),
        ("SELECT SingleFeatureWithType('k', x) FROM s", 8, "takes 3, 6, … arguments (groups of 3), found 2"),
        (
            "SELECT Features('k', x, 'j') AS f, TUMBLE_END(rowtime, INTERVAL '1' MINUTE) AS w FROM s "
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            8,
            "takes 2, 4, … arguments (groups of 2), found 3",
        ),
    ],
)
def test_feature_arguments_are_checked_before_spark(sql: str, col: int, needle: str) -> None:
    with pytest.raises(SqlError) as info:
        translate("\n" + sql, {"s": {"x", "t"}})
    assert needle in info.value.reason
    assert (info.value.line, info.value.col) == (2, col)


def test_features_needs_a_window_like_any_aggregate() -> None:
    with pytest.raises(SqlError, match="needs a window"):
        translate("SELECT FeaturesWithType('k', x, 'StringType') FROM s", {"s": {"x"}})
