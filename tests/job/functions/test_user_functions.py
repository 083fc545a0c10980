"""A dagger's own functions from its udf_file: loading, errors naming file and line, SQL checks, and
running them on Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from job.errors import SpecError, SqlError
from job.functions.user import catalog_entries, load_user_functions
from job.sql import translate

FUNCTIONS = '''
import pyarrow.compute as pc
from job.functions.user import dagger_function


@dagger_function(returns="double", vectorized=True)
def FareWithTax(fare):
    """The fare with 11 % VAT."""
    return pc.multiply(fare.cast("double"), 1.11)


@dagger_function(returns="string", name="initials")
def make_initials(name, sep="."):
    return None if name is None else sep.join(part[0] for part in name.split())


def helper():  # not marked: not a SQL function
    return 1
'''


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "functions.py"
    path.write_text(text)
    return path


def test_load_and_catalog(tmp_path: Path) -> None:
    funcs = load_user_functions(write(tmp_path, FUNCTIONS))
    assert sorted(funcs) == ["farewithtax", "initials"]
    assert funcs["farewithtax"].vectorized and not funcs["initials"].vectorized
    entries = catalog_entries(funcs)
    assert entries["initials"].arity == (1, 2)
    assert entries["farewithtax"].doc == "The fare with 11 % VAT."
    assert entries["farewithtax"].signature == "FareWithTax(...) -> DOUBLE"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("x = (\n", "functions.py:1: SyntaxError"),
        ("import json\n\nraise RuntimeError('boom')\n", "functions.py:3: RuntimeError: boom"),
        ("def f():\n    return 1\n", "marks no function with @dagger_function"),
        (
            "from job.functions.user import dagger_function\n\n@dagger_function(returns='string')\ndef upper(x):\n    return x\n",
            "function upper has the name of a built-in function",
        ),
        (
            "from job.functions.user import dagger_function\n\n@dagger_function(returns='string', name='S2ID')\n"
            "def f(x):\n    return x\n",
            "function S2ID has the name of a built-in function",
        ),
    ],
)
def test_bad_files_are_spec_errors(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        load_user_functions(write(tmp_path, text))
    assert needle in str(info.value)
    assert str(info.value).startswith("udf_file: ")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="udf_file: no file at"):
        load_user_functions(tmp_path / "nope.py")


def test_sql_knows_the_functions_and_their_argument_counts(tmp_path: Path) -> None:
    udfs = catalog_entries(load_user_functions(write(tmp_path, FUNCTIONS)))
    tables = {"s": {"fare", "name"}}
    sql = "SELECT FareWithTax(fare) AS f, initials(name) AS i FROM s"
    with pytest.raises(SqlError, match="unknown function FareWithTax"):
        translate(sql, tables)
    assert (
        translate(sql, tables, udfs).spark_sql == "SELECT FareWithTax(fare) AS f, initials(name) AS i FROM s"
    )
    with pytest.raises(SqlError) as info:
        translate("SELECT\n  initials(name, '.', 3) FROM s", tables, udfs)
    assert (info.value.line, info.value.col, info.value.reason) == (
        2,
        3,
        "initials takes 1 or 2 arguments, found 3",
    )


@pytest.mark.integration
def test_functions_run_on_spark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from job.functions.spark_udfs import register_functions

    path = write(tmp_path, FUNCTIONS)
    register_functions(spark, path)
    udfs = catalog_entries(load_user_functions(path))
    t = translate(
        "SELECT FareWithTax(fare) AS f, initials(name) AS i, initials(name, '-') AS j FROM s",
        {"s": {"fare", "name"}},
        udfs,
    )
    spark.createDataFrame(
        [(10000, "Budi Santoso"), (None, None)], "fare long, name string"
    ).createOrReplaceTempView("s")
    rows = [tuple(r) for r in spark.sql(t.spark_sql).collect()]
    assert rows == [(10000 * 1.11, "B.S", "B-S"), (None, None, None)]
