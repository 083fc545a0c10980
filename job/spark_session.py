"""Build the SparkSession a dagger runs in (``local[*]`` by default)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and keep Spark on the loopback address."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")


def build_session(app_name: str, master: str = "local[*]", shuffle_partitions: int = 2,
                  ui: bool = False, extra: dict[str, str] | None = None) -> SparkSession:
    """Return a SparkSession tuned for small streaming aggregations on one machine.

    ``extra`` settings override the defaults.
    """
    prepare_environment()
    conf = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        "spark.driver.memory": "1g",
        "spark.sql.adaptive.enabled": "false",
        "spark.python.worker.reuse": "true",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        # A commit writes a changelog of the batch's changes instead of a snapshot of the whole state.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Skips a read before every write that only keeps the numRowsTotal metric exact.
        "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
        **(extra or {}),
    }
    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def running_session() -> SparkSession | None:
    """Return the SparkSession this process already runs (from any thread), or None.

    Code that would build a session of its own and stop it afterwards uses this one instead and
    leaves it running: stopping it would stop every other query of the process.
    """
    session = SparkSession._instantiatedSession  # getActiveSession() is per thread
    if session is None or getattr(session.sparkContext, "_jsc", None) is None:
        return None
    return session
