"""The Python worker daemon (:mod:`job.spark.worker_daemon`): every worker Spark forks starts with the Kafka
source, the UDFs and their libraries imported, on the session every dagger runs in."""

from __future__ import annotations

import subprocess
import sys

import pytest

from job.spark.worker_daemon import PRELOAD, preload


def test_everything_preloaded_imports_in_this_environment() -> None:
    code = "from job.spark.worker_daemon import preload; import gc, sys; print(preload(), gc.get_freeze_count() > 0)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[]", "True"]
    assert "job.sources.kafka" in PRELOAD and callable(preload)


@pytest.mark.integration
def test_a_sessions_workers_start_with_the_modules_imported(spark) -> None:  # type: ignore[no-untyped-def]
    import pyarrow as pa

    def probe(batches):  # type: ignore[no-untyped-def]
        import sys

        loaded = {"job.sources.kafka", "job.functions.spark_udfs", "confluent_kafka"} <= set(sys.modules)
        for _ in batches:
            yield pa.RecordBatch.from_pydict({"loaded": [loaded]})

    assert spark.conf.get("spark.python.daemon.module") == "job.spark.worker_daemon"
    rows = spark.range(0, 4, 1, 2).mapInArrow(probe, "loaded boolean").collect()
    assert [r.loaded for r in rows] == [True, True]
