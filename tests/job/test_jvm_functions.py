"""The functions that run in Spark's JVM (job.spark.jvm): the jar is built from the shipped Java source, and
DistinctCount's byte-array aggregate counts exactly what ``size(collect_set(x))`` counts."""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pytest

from job.spark import jvm


def test_the_jar_is_built_from_the_source_where_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "fns.jar"
    monkeypatch.setenv(jvm.JAR_ENV, str(target))
    assert jvm.jar_path() == target
    with zipfile.ZipFile(target) as jar:
        assert "daggers/spark/DistinctCount.class" in jar.namelist()
    assert jvm.spark_conf({"spark.jars": "/x/a.jar"}) == {"spark.jars": f"/x/a.jar,{target}"}
    monkeypatch.setenv(jvm.JAR_ENV, "off")
    assert jvm.jar_path() is None and jvm.spark_conf() == {}


def test_the_default_jar_lives_in_the_cache_keyed_by_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(jvm.JAR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    where = jvm.jar_location()
    assert where is not None and where.parent == tmp_path / "daggers"
    assert where.name.startswith("jvm-functions-") and where.name.endswith(".jar")


def test_a_source_janino_refuses_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "Bad.java"
    bad.write_text("package daggers.spark; public class Bad { int f() { return nope; } }")
    monkeypatch.setattr(jvm, "SOURCES", (bad,))
    with pytest.raises(jvm.JvmFunctionsError, match="Janino did not compile Bad.java"):
        jvm.build(tmp_path / "bad.jar")
    assert not (tmp_path / "bad.jar").exists()


def _values(rng: random.Random) -> list[str | None]:
    pool = [
        "",
        "a",
        "b",
        "ab",
        "ba",
        "é",
        "\u00e9\u00e9",
        "日本",
        "D0000001",
        "x" * 127,
        "x" * 128,
        "y" * 300,
        "\x00",
        "\x00\x00",
        "\xff",
    ] + [f"D{i:07d}" for i in range(60)]
    return [None if rng.random() < 0.05 else rng.choice(pool) for _ in range(rng.randint(0, 40))]


@pytest.mark.integration
def test_the_byte_aggregate_counts_what_collect_set_counts(spark) -> None:  # type: ignore[no-untyped-def]
    """Over strings of every length class of the varint (127, 128, 300 bytes), empty and NUL strings,
    multi-byte UTF-8, NULLs and empty groups, in 7 partitions (partial buffers merged in the final one),
    and over integers by their text."""
    assert jvm.register(spark)  # the tests' session was built with the jar (job.spark.session.build_session)
    rng = random.Random(50)
    rows = [(g, v, rng.randint(-3, 3) if v is not None else None) for g in range(300) for v in _values(rng)]
    rows += [(1000, None, None)]  # a group of NULLs only: 0, as collect_set's size
    df = spark.createDataFrame(rows, "g int, s string, n int").repartition(7)
    df.createOrReplaceTempView("jvm_fn_values")
    got = spark.sql("""SELECT g, dagger_distinct_count(CAST(s AS BINARY)) AS bytes, size(collect_set(s)) AS sets,
                              dagger_distinct_count(CAST(CAST(n AS STRING) AS BINARY)) AS nbytes,
                              size(collect_set(n)) AS nsets
                       FROM jvm_fn_values GROUP BY g""").collect()
    assert len(got) == len({r[0] for r in rows})
    assert [(r.g, r.bytes, r.nbytes) for r in got] == [(r.g, r.sets, r.nsets) for r in got]
    assert {r.g: r.bytes for r in got}[1000] == 0
    assert max(r.bytes for r in got) > 20  # groups large enough to merge many entries


@pytest.mark.integration
def test_large_sets_merged_from_many_partitions_count_exactly(spark) -> None:  # type: ignore[no-untyped-def]
    """Groups of ~1,000-3,000 distinct values, each value in several of 16 partitions: the final aggregation
    merges large buffers with small ones (as a window's state with a batch's), repeats included."""
    assert jvm.register(spark)
    got = spark.sql("""
        SELECT g, dagger_distinct_count(CAST(v AS BINARY)) AS bytes, size(collect_set(v)) AS sets
        FROM (SELECT id % 13 AS g, concat('D', CAST((id DIV 13) * 7919 % (1000 + (id % 13) * 170) AS STRING)) AS v
              FROM range(0, 120000, 1, 16))
        GROUP BY g""").collect()
    assert len(got) == 13
    assert [r.bytes for r in got] == [r.sets for r in got]
    assert min(r.sets for r in got) >= 1000
