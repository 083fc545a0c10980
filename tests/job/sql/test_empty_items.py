"""A comma with nothing on one side (``a,, b``, ``SELECT , a``, ``f(a, )``) is refused with its line and
column: sqlglot would drop the empty item and run the query as if the comma were not there. And a parse
error's column is where the parser stopped: the start of the word, not its end."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from job.cli import app
from job.control import ControlPlane, Registry
from job.errors import SqlError
from job.sql.parse import parse, parse_condition
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.sql.test_sql_cli import HOP_SQL, write

TWO = "two commas with nothing between them"


@pytest.mark.parametrize(
    ("sql", "line", "col", "reason"),
    [
        ("SELECT a,, b FROM t", 1, 10, TWO),
        ("SELECT a, , b FROM t", 1, 11, TWO),
        ("SELECT a,\n  , b FROM t", 2, 3, TWO),
        ("SELECT f(a,, b) AS x FROM t", 1, 12, TWO),
        ("SELECT a FROM t WHERE a IN (1,, 2)", 1, 31, TWO),
        ("SELECT a FROM t GROUP BY a,, b", 1, 28, TWO),
        ("SELECT a FROM t,, u", 1, 17, TWO),
        ("SELECT , a FROM t", 1, 8, "a comma after SELECT with nothing before it"),
        ("SELECT DISTINCT , a FROM t", 1, 17, "a comma after DISTINCT with nothing before it"),
        ("SELECT f(, a) AS x FROM t", 1, 10, "a comma after '(' with nothing before it"),
        ("SELECT a FROM t GROUP BY , a", 1, 26, "a comma after GROUP BY with nothing before it"),
        ("SELECT f(a, ) AS x FROM t", 1, 11, "a comma before ')' with nothing after it"),
        ("SELECT a, FROM t", 1, 9, "a comma before FROM with nothing after it"),
        ("SELECT a FROM t GROUP BY a, HAVING a > 1", 1, 27, "a comma before HAVING with nothing after it"),
        ("SELECT a FROM t ORDER BY a,", 1, 27, "a comma at the end with nothing after it"),
    ],
)
def test_an_empty_item_is_refused_at_its_comma(sql: str, line: int, col: int, reason: str) -> None:
    with pytest.raises(SqlError) as info:
        parse(sql)
    assert (info.value.line, info.value.col, info.value.reason) == (line, col, reason)


def test_commas_between_items_still_parse() -> None:
    tree = parse("SELECT a, f(b, c) AS d FROM t, u WHERE a IN (1, 2) GROUP BY a, d ORDER BY a, d")
    assert (
        tree.sql()
        == "SELECT a, F(b, c) AS d FROM t CROSS JOIN u WHERE a IN (1, 2) GROUP BY a, d ORDER BY a, d"
    )


def test_a_transformers_condition_with_an_empty_item_is_refused() -> None:
    with pytest.raises(SqlError) as info:
        parse_condition("city_id IN (1,, 2)")
    assert info.value.message == (
        "cannot read the condition 'city_id IN (1,, 2)': line 1, column 15: two commas with nothing between them"
    )


@pytest.mark.parametrize(
    ("sql", "line", "col"),
    [
        ("SELECT a FROM t\nWHERE a = 1 AND AND b", 2, 17),  # the second AND
        ("SELECT a FROM t WHERE NOT", 1, 23),
    ],
)
def test_a_parse_errors_column_is_the_start_of_the_word(sql: str, line: int, col: int) -> None:
    with pytest.raises(SqlError) as info:
        parse(sql)
    assert (info.value.line, info.value.col) == (line, col)


def test_sql_check_points_at_the_empty_item(tmp_path: Path) -> None:
    spec = write(tmp_path, HOP_SQL.replace("count(1) AS n,", "count(1) AS n,,"))
    result = CliRunner().invoke(app, ["sql", "check", str(spec), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "Dagger SQL error: line 1, column 46: two commas with nothing between them" in result.output
    assert "   1 | SELECT city_id AS tag_city_id, count(1) AS n,,\n" + " " * 52 + "^" in result.output
    assert "Traceback" not in result.output


def test_the_control_plane_refuses_an_empty_item(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        seed(registry)
        alice = ControlPlane(registry, "alice")
        spec = bookings_spec("commas").replace("count(1) AS bookings,", "count(1) AS bookings,,")
        checked = alice.validate("a-jkt", spec)
        assert (checked.ok, checked.title, checked.message, checked.line, checked.col) == (
            False,
            "Dagger SQL error",
            TWO,
            2,
            29,
        )
        with pytest.raises(SqlError) as info:
            alice.create("a-jkt", spec)
        assert (info.value.line, info.value.col) == (2, 29)
    finally:
        registry.close()
