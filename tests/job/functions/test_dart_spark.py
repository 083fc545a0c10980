"""DartGet and DartContains in Spark SQL against a store served over HTTP on 127.0.0.1 and a folder:
exact values, one read per collection per Python worker, and the refresh rate honoured."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from job.errors import SqlError
from job.sql import translate
from job.sql.parse import parse
from job.sql.rewrite import render, to_spark
from job.sql.validate import check_functions
from tests.helpers import serve_directory

pytestmark = pytest.mark.integration


def write(root: Path, kind: str, name: str, doc: object) -> None:
    path = root / kind / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def run(spark, store: str, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    import os

    import pyarrow as pa
    from pyspark.sql.functions import arrow_udf

    from job.functions.spark_udfs import register_functions

    register_functions(spark, dart_store=store)
    # the worker's pid, computed in the same Arrow evaluation (the same Python worker) as the darts
    spark.udf.register(
        "worker_pid", arrow_udf(lambda x: pa.array([os.getpid()] * len(x), pa.int64()), "bigint")
    )
    tree = parse(sql)
    if "worker_pid" not in sql:
        check_functions(tree)
    return [tuple(r) for r in spark.sql(render(to_spark(tree))).collect()]


def test_values_from_an_http_store_and_a_folder(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path, "dart-get", "cities", {str(i): f"city-{i}" for i in range(500)})
    write(tmp_path, "dart-contains", "blocked", {"data": ["c-1", "c-2"]})
    sql = (
        "SELECT id, DartGet('cities', CAST(id % 600 AS STRING), 24), "
        "DartGet('cities', CAST(id % 600 AS STRING), 24, 'unknown'), "
        "DartContains('blocked', concat('c-', CAST(id AS STRING))), "
        "DartContains('blocked', concat('c-', CAST(id AS STRING), '-x'), '^%s-.*', 24), "
        "DartContains('blocked', concat('c-', CAST(id AS STRING)), 24) "
        "FROM range(0, 3000, 1, 6) ORDER BY id"
    )
    want = [
        (
            i,
            f"city-{i % 600}" if i % 600 < 500 else None,
            f"city-{i % 600}" if i % 600 < 500 else "unknown",
            i in (1, 2),
            i in (1, 2),
            i in (1, 2),
        )
        for i in range(3000)
    ]
    with serve_directory(tmp_path) as (url, requests):
        assert run(spark, url, sql) == want
        # never a read per row: at most one per collection per Python worker (local[2]: a few workers)
        assert 2 <= len(requests) <= 2 * 4, requests
        assert set(requests) == {"/dart-get/cities", "/dart-contains/blocked"}
    assert run(spark, str(tmp_path), sql) == want  # a folder
    assert run(spark, tmp_path.as_uri(), sql) == want  # a file:// URL


def test_the_refresh_rate_is_honoured_per_worker(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The two queries before the change must come within one period: 10 s is plenty on a quiet machine (a warm
    # query takes about a second); on a starved one the check is made again with a longer period (a new
    # collection, so nothing is cached).
    with serve_directory(tmp_path) as (url, requests):
        for refresh_s in (10.0, 30.0, 120.0):
            key = f"version-{refresh_s:.0f}"
            write(tmp_path, "dart-get", key, {"k": "old"})
            write(tmp_path, "dart-get", "warm-up", {"k": "-"})
            sql = f"SELECT worker_pid(id), DartGet('{{}}', 'k', {refresh_s / 3600}D) FROM range(0, 16, 1, 8)"
            run(spark, url, sql.format("warm-up"))  # start the Python workers before the clock runs
            sql = sql.format(key)
            started = time.monotonic()
            first = run(spark, url, sql)
            first_read = time.monotonic()  # the copies of the first query were read between started and now
            assert {v for _, v in first} == {"old"}
            readers = {pid for pid, _ in first}  # every worker of the first query read 'old' (and caches it)
            write(tmp_path, "dart-get", key, {"k": "new"})
            second = run(spark, url, sql)
            if time.monotonic() - started >= refresh_s:
                continue  # the machine was too slow to test within the period: again, with a longer one
            for pid, value in second:  # a worker that had read it keeps its copy until the period ends
                assert value == ("old" if pid in readers else "new"), (pid, readers)
            assert any(pid in readers for pid, _ in second)
            # past the period of the latest copy (a worker reads it when its task runs, which can be seconds
            # after the query started)
            time.sleep(max(0.0, refresh_s + 0.5 - (time.monotonic() - first_read)))
            third = run(spark, url, sql)
            assert {v for _, v in third} == {"new"}
            assert (
                len([r for r in requests if r.endswith(f"/{key}")]) <= 3 * 4
            )  # per worker per period, at most
            return
    pytest.fail("two queries took longer than 120 s: the machine was too slow to test the refresh period")


def test_dart_arguments_are_checked_before_spark() -> None:
    with pytest.raises(SqlError, match="the refresh rate in hours must be a number") as info:
        translate("SELECT DartGet('c', x, '24') FROM s", {"s": {"x"}})
    assert (info.value.line, info.value.col) == (1, 24)
    with pytest.raises(SqlError, match="the regex must be a string") as info:
        translate("SELECT DartContains('c', x, 5, 24) FROM s", {"s": {"x"}})
    assert (info.value.line, info.value.col) == (1, 29)
    with pytest.raises(SqlError, match="DartContains takes 2, 3 or 4 arguments, found 1"):
        translate("SELECT DartContains('c') FROM s", {"s": {"x"}})
