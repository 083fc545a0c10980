"""The session keeps more compiled classes than a query or two need (job.spark.session.CODEGEN_CACHE_ENTRIES):
with Spark's 100, queries run in turn in one JVM evicted each other's classes and compiled them again every
time (a shared host's daggers at every micro-batch)."""

from __future__ import annotations

import pytest

from job.spark.session import CODEGEN_CACHE_ENTRIES

pytestmark = pytest.mark.integration


def _compilations(spark) -> int:  # type: ignore[no-untyped-def]
    """Return how many classes Spark's code generator has compiled in this JVM."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def test_a_query_run_again_after_60_others_compiles_nothing(spark) -> None:  # type: ignore[no-untyped-def]
    def run(i: int) -> list[int]:
        # a literal of its own: whole-stage code that no other query shares
        return [r[0] for r in spark.range(3).selectExpr(f"id * 7 + {1_000_003 + i} AS x").collect()]

    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(CODEGEN_CACHE_ENTRIES) == "2000"
    assert run(0) == [1_000_003, 1_000_010, 1_000_017]
    before = _compilations(spark)
    for i in range(1, 61):
        assert run(i)[0] == 1_000_003 + i
    assert _compilations(spark) - before >= 101  # two classes each: over Spark's 100
    again = _compilations(spark)
    assert run(0) == [1_000_003, 1_000_010, 1_000_017]
    assert _compilations(spark) - again == 0
