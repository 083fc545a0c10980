"""``python -m job.query.jvm_workload ARCHIVE``: what a dagger's JVM does, run once so that the JVM writes the
classes it loaded to ARCHIVE as it exits (see :mod:`job.spark.jvm_archive`, which runs it).

Two streaming queries like a dagger's, over a Python data source that yields Arrow (as the Kafka source
does), with the library's Arrow UDFs, a tumbling window with a watermark and foreachBatch: one on the
RocksDB state store (a dagger's default), one on the heap store (a light dagger's).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from job.common.words import counted
from job.functions.spark_udfs import register_functions
from job.spark.session import HDFS_STATE_STORE, ROCKSDB_STATE_STORE, build_session

BATCHES = 3
ROWS = 2000
SQL = """
SELECT S2Id(lat, lng, 13) AS tag_s2id, size(collect_set(driver_id)) AS drivers, count(*) AS n,
       window.end AS window_timestamp
FROM events GROUP BY window(rowtime, '60 seconds'), S2Id(lat, lng, 13)
"""


class _Reader(DataSourceStreamReader):
    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    # the form before Spark 4.2, which PySpark still calls (it inspects the signature)
    def latestOffset(self) -> dict[str, int]:  # type: ignore[override]
        return {"batch": BATCHES}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(i) for i in range(start["batch"], end["batch"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import numpy as np

        i = int(partition.value)
        rng = np.random.default_rng(i)
        ts = (np.arange(ROWS, dtype="int64") * 90_000 // ROWS + i * 90_000 + 1_770_000_000_000) * 1000
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(ts, pa.timestamp("us", tz="UTC")),
                pa.array(rng.uniform(-6.3, -6.1, ROWS)),
                pa.array(rng.uniform(106.7, 106.9, ROWS)),
                pa.array(rng.integers(0, 300, ROWS)),
            ],
            names=["rowtime", "lat", "lng", "driver_id"],
        )

    def commit(self, end: dict[str, int]) -> None:
        pass


class WorkloadSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "daggers_jvm_workload"

    def schema(self) -> str:
        return "rowtime timestamp, lat double, lng double, driver_id long"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return _Reader()


def run(folder: Path, java_options: str = "") -> int:
    """Run both queries to the end of the source in a new session (its driver JVM with ``java_options``);
    return the rows their sinks received."""
    extra = {"spark.driver.extraJavaOptions": java_options} if java_options else {}
    spark = build_session("daggers-jvm-archive", master="local[2]", extra=extra)
    spark.dataSource.register(WorkloadSource)
    register_functions(spark)
    received = [0]

    def sink(batch: DataFrame, _batch_id: int) -> None:
        received[0] += len(batch.toArrow())

    for name, store in (("rocksdb", ROCKSDB_STATE_STORE), ("heap", HDFS_STATE_STORE)):
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", store)
        events = spark.readStream.format(WorkloadSource.name()).load().withWatermark("rowtime", "10 seconds")
        events.createOrReplaceTempView("events")
        query = (
            spark.sql(SQL)
            .writeStream.outputMode("append")
            .foreachBatch(sink)
            .option("checkpointLocation", str(folder / name))
            .trigger(processingTime="0 seconds")
            .start()
        )
        query.processAllAvailable()
        query.stop()
    spark.stop()
    return received[0]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m job.query.jvm_workload ARCHIVE", file=sys.stderr)
        return 2
    from job.spark.jvm_archive import ARCHIVE_ENV, QUIET

    os.environ[ARCHIVE_ENV] = "off"  # the JVM that writes an archive maps none
    with tempfile.TemporaryDirectory(prefix="daggers-jvm-") as folder:
        rows = run(Path(folder), f"-XX:ArchiveClassesAtExit={argv[0]} {QUIET}")
    _wait_for_the_jvm()  # it writes the archive as it exits
    print(counted(rows, "row"), file=sys.stderr)
    return 0


def _wait_for_the_jvm() -> None:
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    if proc.stdin is not None:
        proc.stdin.close()  # the JVM exits when its stdin closes
    proc.wait(timeout=300)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
