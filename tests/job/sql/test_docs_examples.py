"""Every example in docs/functions.md runs on Spark and gives the result the page shows.

The page and the catalog also name the same functions, so a function cannot go undocumented.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from job.sql.catalog import DAGGER_FUNCTIONS
from job.sql.parse import parse
from job.sql.rewrite import render, to_spark
from job.sql.validate import check_functions

DOC = Path(__file__).resolve().parents[3] / "docs" / "functions.md"
_EXAMPLE = re.compile(r"```sql\n(?P<sql>.*?)\n```\nResult: `(?P<result>[^`]*)`", re.DOTALL)


def examples() -> list[tuple[str, str, str]]:
    """Return (section, sql, result) for every example with a Result line."""
    out = []
    section = ""
    for chunk in re.split(r"(?m)^#### ", DOC.read_text())[1:]:
        section = chunk.splitlines()[0].strip()
        for m in _EXAMPLE.finditer(chunk):
            out.append((section, m.group("sql"), m.group("result")))
    return out


def fmt(value: Any) -> str:
    """Render a value as the page writes it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        utc = value.astimezone(UTC) if value.tzinfo else datetime.fromtimestamp(value.timestamp(), UTC)
        return utc.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def test_every_library_function_has_a_section() -> None:
    text = DOC.read_text()
    headings = {h.strip() for line in re.findall(r"(?m)^#### (.+)$", text) for h in line.split("/")}
    missing = [f.name for f in DAGGER_FUNCTIONS.values() if f.name not in headings]
    assert missing == []
    assert len(examples()) >= 30


@pytest.fixture(scope="module")
def dart_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The collections the page's DartGet/DartContains examples say they read."""
    import json

    root = tmp_path_factory.mktemp("darts")
    (root / "dart-get").mkdir()
    (root / "dart-contains").mkdir()
    (root / "dart-get" / "city_names").write_text(json.dumps({"1": "Jakarta", "2": "Bandung"}))
    (root / "dart-contains" / "blocked_customers").write_text(json.dumps({"data": ["c-9"]}))
    return str(root)


@pytest.mark.parametrize(
    ("section", "sql", "result"), examples(), ids=[f"{s}-{i}" for i, (s, _, _) in enumerate(examples())]
)
def test_example_gives_the_documented_result(
    spark,
    dart_store: str,
    section: str,
    sql: str,  # type: ignore[no-untyped-def]
    result: str,
) -> None:
    from job.functions.spark_udfs import register_functions

    register_functions(spark, dart_store=dart_store)
    tree = parse(sql)
    check_functions(tree)
    rows = spark.sql(render(to_spark(tree))).collect()
    got = "; ".join(", ".join(fmt(v) for v in row) for row in rows)
    assert got == result, f"{section}: {sql}"
