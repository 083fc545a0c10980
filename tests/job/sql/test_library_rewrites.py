"""Golden strings for the rewrites added for issue 3: rowtime windows, LATERAL TABLE, and the function
library's templates (each a pure AST → AST function)."""

from __future__ import annotations

import pytest
import sqlglot

from job.errors import SqlError
from job.sql import translate
from job.sql.catalog import DAGGER_FUNCTIONS
from job.sql.library import CHECKS, REWRITERS, rewrite_library
from job.sql.rewrite import render, rewrite_lateral_tables, rewrite_rowtime, to_spark


def rw(fn, sql: str) -> str:  # type: ignore[no-untyped-def]
    tree = sqlglot.parse_one(sql, read="spark")
    before = tree.sql(dialect="spark")
    out = render(fn(tree))
    assert tree.sql(dialect="spark") == before  # pure: the input tree is untouched
    return out


def test_rowtime_wraps_the_grouping_select() -> None:
    got = rw(
        rewrite_rowtime,
        "SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt, k, count(1) AS n "
        "FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), k",
    )
    assert got == (
        "SELECT date_trunc('MILLISECOND', window_time(__dagger_window)) AS rt, k, n FROM (SELECT window "
        "AS __dagger_window, k, COUNT(1) AS n FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), k) AS "
        "__dagger_rowtime"
    )  # the query's own rows: to the millisecond, the window's end - 1 ms


def test_rowtime_without_alias_is_named_rowtime_and_hop_works_too() -> None:
    got = rw(
        rewrite_rowtime,
        "SELECT HOP_ROWTIME(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), k AS key "
        "FROM t GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), k",
    )
    assert got.startswith(
        "SELECT date_trunc('MILLISECOND', window_time(__dagger_window)) AS rowtime, key FROM "
        "(SELECT window AS __dagger_window, k AS key FROM t"
    )


def test_lateral_table_becomes_lateral_view() -> None:
    got = rw(rewrite_lateral_tables, "SELECT x, b FROM t, LATERAL TABLE(HistogramBucket(x, '1,2')) AS T(b)")
    assert got == (
        "SELECT x, b FROM t LATERAL VIEW EXPLODE(CONCAT(ARRAY('+Inf'), FILTER(SPLIT('1,2', ',', -1), "
        "__b -> x <= CAST(__b AS DOUBLE)))) T AS b"
    )
    got = rw(
        rewrite_lateral_tables,
        "SELECT value FROM t LEFT JOIN LATERAL TABLE(OutlierMad(v, ts, s, 1, 2, 3, 4)) ON TRUE",
    )
    assert got == (
        "SELECT value FROM t LATERAL VIEW OUTER inline(OutlierMad(v, ts, s, 1, 2, 3, 4)) __dagger_t0 AS "
        "timestamp, value, upper_bound, lower_bound, is_outlier"
    )


@pytest.mark.parametrize(
    ("dagger", "spark"),
    [
        ("MapGet(m, 'k')", "TRY_ELEMENT_AT(m, 'k')"),
        ("ElementAt(a, i)", "CAST(TRY_ELEMENT_AT(a, IF(i >= 0, i + 1, i)) AS STRING)"),
        ("ListContains(a, 'x')", "COALESCE(ARRAY_CONTAINS(a, 'x'), FALSE)"),
        ("ByteToString(b)", "CAST(b AS STRING)"),
        ("JsonQuery(j, '$.a')", "GET_JSON_OBJECT(j, '$.a')"),
        ("ArrayOperate(a, 'sorted', 'int')", "ARRAY_SORT(FILTER(a, __x -> NOT __x IS NULL))"),
        ("ArrayAggregate(a, 'count', 'other')", "CAST(SIZE(FILTER(a, __x -> NOT __x IS NULL)) AS BIGINT)"),
        ("CollectArray(x)", "collect_list(x)"),
        ("CollectArray(DISTINCT x)", "collect_set(x)"),
        (
            "FormatTimeInZone(ts, 'UTC', 'HH')",
            "DATE_FORMAT(FROM_UTC_TIMESTAMP(CAST(ts AS TIMESTAMP), 'UTC'), 'HH')",
        ),
        ("S2Id(lat, lng, 13)", "S2Id(lat, lng, 13)"),  # an Arrow UDF: stays a call
        # nested calls are rewritten inside out, and an expression argument keeps its parentheses
        (
            "MapGet(m, ElementAt(a, n + 1))",
            "TRY_ELEMENT_AT(m, CAST(TRY_ELEMENT_AT(a, IF((n + 1) >= 0, (n + 1) + 1, (n + 1))) AS STRING))",
        ),
    ],
)
def test_library_templates(dagger: str, spark: str) -> None:
    assert rw(rewrite_library, f"SELECT {dagger} AS c FROM t") == f"SELECT {spark} AS c FROM t"


def test_every_function_is_rewritten_registered_or_a_window() -> None:
    from job.functions.spark_udfs import DART_UDFS, LIBRARY_UDFS

    for fn in DAGGER_FUNCTIONS.values():
        low = fn.name.lower()
        if fn.impl == "udf":
            assert fn.name in LIBRARY_UDFS or fn.name in DART_UDFS, fn.name
        elif fn.impl == "rewrite":
            assert low in REWRITERS or low in ("distinctcount", "histogrambucket"), fn.name
    assert set(CHECKS) <= set(DAGGER_FUNCTIONS)


def test_translation_of_a_nested_window_query() -> None:
    tables = {"data_stream": {"city_id"}}
    t = translate(
        "SELECT TUMBLE_END(rt, INTERVAL '5' MINUTE) AS w, SUM(n) AS n FROM ("
        "SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt, count(1) AS n FROM data_stream "
        "WHERE city_id = 1 GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)) AS m "
        "GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE)",
        tables,
    )
    assert t.spark_sql == (
        "SELECT window.end AS w, SUM(n) AS n FROM (SELECT window_time(__dagger_window) AS rt, n FROM "
        "(SELECT window AS __dagger_window, COUNT(1) AS n FROM data_stream WHERE city_id = 1 AND "
        "data_stream.__dagger_wm >= 0 GROUP BY window(rowtime, '1 minutes')) AS __dagger_rowtime) AS m "
        "GROUP BY window(rt, '5 minutes')"
    )
    assert t.window == ("5 minutes", None) and t.columns == {"data_stream": ["city_id"]}


@pytest.mark.parametrize(
    ("sql", "line", "col", "needle"),
    [
        (
            "SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt\nFROM s",
            1,
            8,
            "TUMBLE_ROWTIME needs a TUMBLE window in GROUP BY",
        ),
        (
            "SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '2' MINUTE) AS rt, count(1) AS n\nFROM s\n"
            "GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE)",
            1,
            8,
            "TUMBLE_ROWTIME must name the same window",
        ),
        (
            "SELECT b FROM s,\n  LATERAL TABLE(HistogramBucket(x)) AS T(b)",
            2,
            17,
            "HistogramBucket takes 2 arguments, found 1",
        ),
        ("SELECT s.x, v.y\nFROM s JOIN v ON s.x = v.nope", 2, 24, "table v has no column nope"),
    ],
)
def test_errors_carry_line_and_column(sql: str, line: int, col: int, needle: str) -> None:
    with pytest.raises(SqlError) as info:
        translate(sql, {"s": {"x"}, "v": {"y"}})
    assert needle in info.value.reason
    assert (info.value.line, info.value.col) == (line, col)


def test_user_lambda_variables_are_not_columns() -> None:
    t = translate("SELECT transform(arr, e -> e + 1) AS a FROM s", {"s": {"arr"}})
    assert t.spark_sql == "SELECT TRANSFORM(arr, e -> e + 1) AS a FROM s"
    assert render(to_spark(sqlglot.parse_one("SELECT 1", read="spark"))) == "SELECT 1"


@pytest.mark.parametrize(
    ("dagger", "spark"),
    [
        ("CondEq('status', 'X')", "TO_JSON(STRUCT('status' AS field, 'X' AS value))"),
        (
            "Filters(m, 'a.B', CondEq('s', 1))",
            "dagger_filters(m, 'a.B', ARRAY(TO_JSON(STRUCT('s' AS field, 1 AS value))))",
        ),
        ("Filters(m, 'a.B')", "dagger_filters(m, 'a.B', CAST(ARRAY() AS ARRAY<STRING>))"),
        # the two-argument form takes the class of the Filters it reads
        (
            "SelectFields(Filters(m, 'a.B', CondEq('s', 1)), 'x.y')",
            "dagger_select_fields(dagger_filters(m, 'a.B', ARRAY(TO_JSON(STRUCT('s' AS field, 1 AS value)))), 'a.B', 'x.y')",
        ),
        ("SelectFields(m, 'a.B', 'x')", "dagger_select_fields(m, 'a.B', 'x')"),
        (
            "Features('k', v)",
            "FLATTEN(COLLECT_LIST(dagger_feature_rows(COALESCE(CAST('k' AS STRING), 'null'), v)))",
        ),
        (
            "SingleFeatureWithType(k, v, 'BooleanType')",
            "ARRAY_DISTINCT(ARRAY(STRUCT(COALESCE(CAST(k AS STRING), 'null') AS key, STRUCT(CAST(NULL AS BINARY) AS "
            "bytes_val, CAST(NULL AS STRING) AS string_val, CAST(NULL AS INT) AS int32_val, CAST(NULL AS BIGINT) AS "
            "int64_val, CAST(NULL AS DOUBLE) AS double_val, CAST(NULL AS FLOAT) AS float_val, COALESCE(CAST(v AS BOOLEAN), "
            "FALSE) AS bool_val, CAST(NULL AS STRUCT<seconds: BIGINT, nanos: INT>) AS timestamp_val) AS value, "
            "COALESCE(CAST(k AS STRING), 'null') AS name)))",
        ),
    ],
)
def test_migrated_function_templates(dagger: str, spark: str) -> None:
    assert rw(rewrite_library, f"SELECT {dagger} AS c FROM t") == f"SELECT {spark} AS c FROM t"
