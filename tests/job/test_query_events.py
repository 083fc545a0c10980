"""job.query.events: a real streaming query's events reach QueryEvents with their ids, and cheaply."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from py4j import java_gateway

from job.query.events import QueryEvents
from tests.helpers import wait_until


class Recorder(QueryEvents):
    def __init__(self, fail: bool = False) -> None:
        self.events: list[tuple[str, Any]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def _add(self, kind: str, value: Any) -> None:
        with self.lock:
            self.events.append((kind, value))
        if self.fail:
            raise RuntimeError("a handler that raises")

    def on_started(self, query_id: str, run_id: str) -> None:
        self._add("started", (query_id, run_id))

    def on_progress(self, progress: dict[str, Any]) -> None:
        self._add("progress", progress)

    def on_terminated(self, query_id: str, run_id: str, exception: str | None) -> None:
        self._add("terminated", (query_id, run_id, exception))

    def kinds(self) -> list[str]:
        with self.lock:
            return [k for k, _ in self.events]


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count the py4j name lookups Python makes in the JVM (each a class search when the name is no class)."""
    seen: Counter[str] = Counter()
    for cls in (java_gateway.JVMView, java_gateway.JavaPackage):
        original = cls.__getattr__

        def counting(self: Any, name: str, _original: Any = original) -> Any:
            if not name.startswith("_"):
                seen[name] += 1
            return _original(self, name)

        monkeypatch.setattr(cls, "__getattr__", counting)
    return seen


def run_query(spark: Any, listener: QueryEvents, fail_with: str | None = None) -> Any:
    from pyspark.sql import functions as F

    spark.streams.addListener(listener)
    df = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 20)
        .load()
        .withColumn("bucket", F.col("value") % 3)
    )
    keys = ["bucket"]
    if fail_with is not None:  # a column the aggregation keeps: the first row with it fails the query
        df = df.withColumn("boom", F.raise_error(F.lit(fail_with)))
        keys.append("boom")
    query = (
        df.groupBy(*keys)
        .count()
        .writeStream.outputMode("complete")
        .format("noop")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    return query


def test_events_carry_ids_and_progress(spark: Any, lookups: Counter[str]) -> None:
    rec = Recorder()
    query = run_query(spark, rec)
    try:
        wait_until("three progress events", lambda: rec.kinds().count("progress") >= 3, 60, every_s=0.1)
        lookups.clear()
        before = rec.kinds().count("progress")
        wait_until(
            "three more progress events", lambda: rec.kinds().count("progress") >= before + 3, 60, every_s=0.1
        )
        # three more events, and not one JVM name lookup to deliver them (PySpark's own path makes dozens)
        assert sum(lookups.values()) == 0, lookups
    finally:
        query.stop()
        spark.streams.removeListener(rec)
    wait_until("the terminated event", lambda: "terminated" in rec.kinds(), 60, every_s=0.1)
    started = next(v for k, v in rec.events if k == "started")
    assert started == (str(query.id), str(query.runId))
    progress = [v for k, v in rec.events if k == "progress"]
    assert {p["id"] for p in progress} == {str(query.id)}
    assert [p["batchId"] for p in progress] == sorted(p["batchId"] for p in progress)
    assert all("triggerExecution" in p["durationMs"] for p in progress)
    assert sum(p["numInputRows"] for p in progress) > 0
    assert next(v for k, v in rec.events if k == "terminated") == (str(query.id), str(query.runId), None)


def test_terminated_carries_the_error_and_a_raising_handler_is_contained(spark: Any) -> None:
    rec = Recorder(fail=True)  # every handler raises: logged, never reaching Spark
    query = run_query(spark, rec, fail_with="kaboom 42")
    try:
        wait_until("the terminated event", lambda: "terminated" in rec.kinds(), 60, every_s=0.1)
    finally:
        query.stop()
        spark.streams.removeListener(rec)
    _, _, exception = next(v for k, v in rec.events if k == "terminated")
    assert exception is not None and "kaboom 42" in exception
    assert rec.kinds()[0] == "started"


def test_pyspark_path_still_works() -> None:
    """Without the bridge (as under Spark Connect) PySpark's converted events reach the same handlers."""

    class Event:
        id, runId, exception = "q", "r", "boom"

        class progress:  # noqa: N801 - shaped like PySpark's event
            json = '{"id": "q", "batchId": 4}'

    rec = Recorder()
    rec.onQueryStarted(Event())
    rec.onQueryProgress(Event())
    rec.onQueryTerminated(Event())
    assert rec.events == [
        ("started", ("q", "r")),
        ("progress", {"id": "q", "batchId": 4}),
        ("terminated", ("q", "r", "boom")),
    ]
