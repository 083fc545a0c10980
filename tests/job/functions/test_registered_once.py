"""A session registers each Dagger function once: a dagger started beside others registers only what differs
(the library again cost ~0.14 core-s at every query start), and every function still answers."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pyspark.sql.udf import UDFRegistration

from job.functions.proto_fields import FILTERS_UDF, SELECT_FIELDS_UDF
from job.functions.spark_udfs import DART_UDFS, LIBRARY_UDFS, register_functions

pytestmark = pytest.mark.integration


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names sent to a session's function registry, in order (the real registration still runs)."""
    names: list[str] = []
    real = UDFRegistration.register

    def spy(self: UDFRegistration, name: str, f: Any, returnType: Any = None) -> Any:  # noqa: N803
        names.append(name)
        return real(self, name, f, returnType)

    monkeypatch.setattr(UDFRegistration, "register", spy)
    return names


def test_each_function_is_registered_once_per_session_and_again_when_it_differs(
    spark,
    registered: list[str],
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    session = spark.newSession()  # a registry of its own
    register_functions(session)
    first = sorted(registered)
    assert first == sorted([*LIBRARY_UDFS, *DART_UDFS, FILTERS_UDF, SELECT_FIELDS_UDF])
    registered.clear()
    register_functions(session)
    assert registered == []
    # another dart store, another schema: those functions only, and back again
    register_functions(session, dart_store=str(tmp_path))
    assert sorted(registered) == sorted(DART_UDFS)
    registered.clear()
    register_functions(session, descriptor_set_b64="AAAA")
    assert sorted(registered) == sorted([*DART_UDFS, FILTERS_UDF, SELECT_FIELDS_UDF])
    registered.clear()
    register_functions(session)
    assert sorted(registered) == sorted([FILTERS_UDF, SELECT_FIELDS_UDF])
    # a new session holds nothing yet
    registered.clear()
    register_functions(spark.newSession())
    assert sorted(registered) == first
    # every function still answers in the first session
    row = session.sql(
        "SELECT S2Id(-6.2, 106.8, 13) IS NOT NULL AS cell, dagger_distinct_count(CAST(x AS BINARY)) AS n "
        "FROM VALUES ('a'), ('b'), ('b') AS t(x)"
    ).collect()[0]
    assert (row["cell"], row["n"]) == (True, 2)


def test_a_udf_file_is_registered_at_every_call_the_library_once(
    spark,
    registered: list[str],
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    session = spark.newSession()
    udfs = tmp_path / "udfs.py"
    body = "from job.functions.user import dagger_function\n\n@dagger_function(returns='bigint')\ndef Seven(x: int) -> int:\n    return {}\n"
    udfs.write_text(body.format(7))
    first = udfs.stat()
    register_functions(session, udf_file=udfs)
    assert session.sql("SELECT Seven(1) AS c").collect()[0]["c"] == 7
    registered.clear()
    # the file changed between two daggers, within the same second and to the same length (the import
    # system's bytecode cache, keyed by both, gave the old code)
    udfs.write_text(body.format(8))
    os.utime(udfs, ns=(first.st_atime_ns, first.st_mtime_ns))
    register_functions(session, udf_file=udfs)
    assert registered == ["Seven"]
    assert session.sql("SELECT Seven(1) AS c").collect()[0]["c"] == 8
