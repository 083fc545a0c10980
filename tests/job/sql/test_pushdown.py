"""S2Id over a stream's own columns moves into the source: golden strings of the rewrite."""

from __future__ import annotations

import sqlglot

from job.sql.pushdown import DerivedColumn, push_down_s2

STREAMS = {"data_stream", "a", "b"}


def pushed(sql: str) -> tuple[str, dict[str, list[DerivedColumn]]]:
    tree, derived = push_down_s2(sqlglot.parse_one(sql, read="spark"), STREAMS)
    return tree.sql(dialect="spark", normalize_functions=False), derived


def test_select_and_group_by_read_one_source_column() -> None:
    sql, derived = pushed("SELECT S2Id(lat, long, 13) AS c, count(1) AS n FROM data_stream GROUP BY S2Id(lat, long, 13)")
    assert sql == "SELECT __dagger_s2_lat_long_13 AS c, COUNT(1) AS n FROM data_stream GROUP BY __dagger_s2_lat_long_13"
    assert derived == {"data_stream": [DerivedColumn("__dagger_s2_lat_long_13", "s2id", "lat", "long", 13)]}


def test_two_levels_are_two_columns_and_qualifiers_are_kept() -> None:
    sql, derived = pushed("SELECT S2Id(d.lat, d.long, 6), S2Id(lat, long, 30) FROM data_stream AS d")
    assert sql == "SELECT d.__dagger_s2_lat_long_6, __dagger_s2_lat_long_30 FROM data_stream AS d"
    assert [c.level for c in derived["data_stream"]] == [6, 30]


def test_the_input_tree_is_not_changed() -> None:
    tree = sqlglot.parse_one("SELECT S2Id(lat, long, 13) FROM data_stream", read="spark")
    before = tree.sql()
    push_down_s2(tree, STREAMS)
    assert tree.sql() == before


def test_calls_it_cannot_move_stay_calls() -> None:
    for sql in [
        "SELECT S2Id(lat + 1, long, 13) FROM data_stream",           # an expression, not a column
        "SELECT S2Id(lat, long, lvl) FROM data_stream",              # the level is not a literal
        "SELECT S2Id(lat, long, 31) FROM data_stream",               # out of range: left to validation
        "SELECT S2Id(a.lat, b.long, 13) FROM a JOIN b ON a.k = b.k",  # a join: two sources
        "SELECT S2Id(lat, long, 13) FROM (SELECT lat, long FROM data_stream) AS s",  # a subquery's columns
        "SELECT S2Id(x.lat, x.long, 13) FROM data_stream AS d",      # not this table's qualifier
        "SELECT S2Id(lat, long, 13) FROM other",                     # not a stream
    ]:
        out, derived = pushed(sql)
        assert "S2Id(" in out and derived == {}, sql


def test_inner_select_over_a_stream_is_moved_and_the_outer_one_is_not() -> None:
    sql, derived = pushed("SELECT S2Id(lat, long, 10) FROM (SELECT lat, long, S2Id(lat, long, 13) AS c "
                          "FROM data_stream) AS s")
    assert sql == ("SELECT S2Id(lat, long, 10) FROM (SELECT lat, long, __dagger_s2_lat_long_13 AS c "
                   "FROM data_stream) AS s")
    assert list(derived) == ["data_stream"] and derived["data_stream"][0].level == 13


def test_json_round_trip() -> None:
    col = DerivedColumn("__dagger_s2_lat_long_13", "s2id", "lat", "long", 13)
    assert DerivedColumn.from_json(col.to_json()) == col
