"""S2Id over a stream's own columns moves into the source: golden strings of the rewrite."""

from __future__ import annotations

import sqlglot

from job.sql.pushdown import DerivedColumn, push_down_s2

STREAMS = {"data_stream", "a", "b"}


def pushed(sql: str, *, int_keys: bool = True) -> tuple[str, dict[str, list[DerivedColumn]]]:
    tree, derived = push_down_s2(sqlglot.parse_one(sql, read="spark"), STREAMS, int_keys=int_keys)
    return tree.sql(dialect="spark", normalize_functions=False), derived


def test_group_by_reads_the_64_bit_cell_and_the_select_its_text() -> None:
    sql, derived = pushed(
        "SELECT S2Id(lat, long, 13) AS c, count(1) AS n FROM data_stream GROUP BY S2Id(lat, long, 13)"
    )
    assert sql == (
        "SELECT CAST(__dagger_s2_lat_long_13 AS STRING) AS c, COUNT(1) AS n FROM data_stream "
        "GROUP BY __dagger_s2_lat_long_13"
    )
    assert derived == {"data_stream": [DerivedColumn("__dagger_s2_lat_long_13", "s2cell", "lat", "long", 13)]}


def test_text_keys_for_checkpoints_started_before_int_keys() -> None:
    sql, derived = pushed(
        "SELECT S2Id(lat, long, 13) AS c, count(1) AS n FROM data_stream GROUP BY S2Id(lat, long, 13)",
        int_keys=False,
    )
    assert (
        sql
        == "SELECT __dagger_s2_lat_long_13 AS c, COUNT(1) AS n FROM data_stream GROUP BY __dagger_s2_lat_long_13"
    )
    assert derived == {"data_stream": [DerivedColumn("__dagger_s2_lat_long_13", "s2id", "lat", "long", 13)]}


def test_where_and_having_compare_the_text() -> None:
    sql, _ = pushed(
        "SELECT count(1) FROM data_stream WHERE S2Id(lat, long, 13) <> '1' "
        "GROUP BY S2Id(lat, long, 13) HAVING S2Id(lat, long, 13) <> '2'"
    )
    assert sql == (
        "SELECT COUNT(1) FROM data_stream WHERE CAST(__dagger_s2_lat_long_13 AS STRING) <> '1' "
        "GROUP BY __dagger_s2_lat_long_13 HAVING CAST(__dagger_s2_lat_long_13 AS STRING) <> '2'"
    )


def test_spark_expr_computes_the_column_the_way_the_source_does() -> None:
    assert (
        DerivedColumn("c", "s2cell", "lat", "long", 13).spark_expr()
        == "CAST(S2Id(`lat`, `long`, 13) AS BIGINT)"
    )
    assert DerivedColumn("c", "s2id", "lat", "long", 13).spark_expr() == "S2Id(`lat`, `long`, 13)"


def test_two_levels_are_two_columns_and_qualifiers_are_kept() -> None:
    sql, derived = pushed("SELECT S2Id(d.lat, d.long, 6), S2Id(lat, long, 30) FROM data_stream AS d")
    assert sql == (
        "SELECT CAST(d.__dagger_s2_lat_long_6 AS STRING), CAST(__dagger_s2_lat_long_30 AS STRING) "
        "FROM data_stream AS d"
    )
    assert [c.level for c in derived["data_stream"]] == [6, 30]


def test_the_input_tree_is_not_changed() -> None:
    tree = sqlglot.parse_one("SELECT S2Id(lat, long, 13) FROM data_stream", read="spark")
    before = tree.sql()
    push_down_s2(tree, STREAMS)
    assert tree.sql() == before


def test_calls_it_cannot_move_stay_calls() -> None:
    for sql in [
        "SELECT S2Id(lat + 1, long, 13) FROM data_stream",  # an expression, not a column
        "SELECT S2Id(lat, long, lvl) FROM data_stream",  # the level is not a literal
        "SELECT S2Id(lat, long, 31) FROM data_stream",  # out of range: left to validation
        "SELECT S2Id(a.lat, b.long, 13) FROM a JOIN b ON a.k = b.k",  # a join: two sources
        "SELECT S2Id(lat, long, 13) FROM (SELECT lat, long FROM data_stream) AS s",  # a subquery's columns
        "SELECT S2Id(x.lat, x.long, 13) FROM data_stream AS d",  # not this table's qualifier
        "SELECT S2Id(lat, long, 13) FROM other",  # not a stream
    ]:
        out, derived = pushed(sql)
        assert "S2Id(" in out and derived == {}, sql


def test_inner_select_over_a_stream_is_moved_and_the_outer_one_is_not() -> None:
    sql, derived = pushed(
        "SELECT S2Id(lat, long, 10) FROM (SELECT lat, long, S2Id(lat, long, 13) AS c FROM data_stream) AS s"
    )
    assert sql == (
        "SELECT S2Id(lat, long, 10) FROM (SELECT lat, long, CAST(__dagger_s2_lat_long_13 AS STRING) AS c "
        "FROM data_stream) AS s"
    )
    assert list(derived) == ["data_stream"] and derived["data_stream"][0].level == 13


def test_json_round_trip() -> None:
    col = DerivedColumn("__dagger_s2_lat_long_13", "s2id", "lat", "long", 13)
    assert DerivedColumn.from_json(col.to_json()) == col
