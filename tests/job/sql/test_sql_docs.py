"""docs/sql.md: every example under "Supported" translates over the page's sample schemas (compiled from
tests/job/sql/protos), and every example under "Not supported" is refused with a line and column."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from job.errors import SqlError
from job.schema.compile import compile_descriptor_set
from job.schema.registry import SchemaRegistry
from job.schema.sql_types import column_types
from job.sql import translate

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "sql.md"
PROTOS = Path(__file__).resolve().parent / "protos"
_SQL = re.compile(r"```sql\n(.*?)\n```", re.DOTALL)


def _blocks(section: str) -> list[str]:
    text = DOC.read_text()
    supported, refused = text.split("\n## Not supported\n", 1)
    return _SQL.findall(supported if section == "supported" else refused)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    registry = SchemaRegistry(compile_descriptor_set(PROTOS, tmp_path_factory.mktemp("compiled")))
    return {
        "booking": column_types(registry, "daggers.sqltest.SampleBookingInfo"),
        "payment": column_types(registry, "daggers.sqltest.SamplePaymentInfo"),
    }


def test_the_page_has_examples_and_the_readme_links_it() -> None:
    assert len(_blocks("supported")) >= 15 and len(_blocks("refused")) >= 8
    assert "(docs/sql.md)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("sql", _blocks("supported"))
def test_supported_example_translates(tables, sql: str) -> None:  # type: ignore[no-untyped-def]
    translate(sql, tables)


@pytest.mark.parametrize("sql", _blocks("refused"))
def test_unsupported_example_is_refused(tables, sql: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SqlError) as info:
        translate(sql, tables)
    assert info.value.line is not None and info.value.col is not None, str(info.value)
