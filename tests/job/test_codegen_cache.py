"""The session keeps more compiled classes than a query or two need (job.spark.session.CODEGEN_CACHE_ENTRIES):
with Spark's 100, queries run in turn in one JVM evicted each other's classes and compiled them again every
time (a shared host's daggers at every micro-batch)."""

from __future__ import annotations

from functools import reduce

import pytest

from job.spark.session import CODEGEN_CACHE_ENTRIES

pytestmark = pytest.mark.integration


def _compilations(spark) -> int:  # type: ignore[no-untyped-def]
    """Return how many classes Spark's code generator has compiled in this JVM."""
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def test_a_query_run_again_after_120_other_classes_compiles_nothing(spark) -> None:  # type: ignore[no-untyped-def]
    def frame(i: int):  # type: ignore[no-untyped-def]
        # a literal of its own: whole-stage code that no other frame shares
        return spark.range(3, numPartitions=1).selectExpr(f"id * 7 + {1_000_003 + i} AS x")

    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(CODEGEN_CACHE_ENTRIES) == "2000"
    assert [r.x for r in frame(0).collect()] == [1_000_003, 1_000_010, 1_000_017]
    before = _compilations(spark)
    # one query of 120 stages (a union is no stage of its own): 120 classes of its own, over Spark's 100
    others = reduce(lambda a, b: a.unionAll(b), [frame(i) for i in range(1, 121)])
    assert sorted(r.x for r in others.collect())[:4] == [1_000_004, 1_000_005, 1_000_006, 1_000_007]
    assert _compilations(spark) - before >= 120
    again = _compilations(spark)
    assert [r.x for r in frame(0).collect()] == [1_000_003, 1_000_010, 1_000_017]
    assert _compilations(spark) - again == 0
