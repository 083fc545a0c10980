"""A process that runs Daggers' Spark session prints no warning a user can do nothing about: the second
dagger of ``daggers demo`` once printed 15 (each library function and the Kafka source "replaced a
previously registered" one), every run Spark's note on ``spark.local.dir``, and a wide plan its
"Truncated the string representation" notice. A real warning still shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

PROBE = """
from job.functions.spark_udfs import register_functions
from job.sources.kafka import DaggerKafkaSource
from job.spark.session import build_session

spark = build_session("quiet-probe", "local[1]", extra={"spark.yarn.executor.memoryOverhead": "1g"})
for _ in range(2):  # two daggers in one session, as daggers demo runs them
    spark.dataSource.register(DaggerKafkaSource)
    register_functions(spark)
wide = spark.range(3).selectExpr(*[f"id AS c{i}" for i in range(40)])
print(len(wide._jdf.queryExecution().toString()), wide.groupBy("c0").count().count())
spark.stop()
"""


def test_a_session_that_registers_twice_prints_only_the_warning_a_user_can_act_on(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[1] == "3"
    warnings = [line for line in done.stderr.splitlines() if " WARN " in line]
    # the deprecated setting is a warning a user can act on: SparkConf's other warnings still show (Spark
    # itself says it once per read of the setting)
    assert warnings and all(
        "'spark.yarn.executor.memoryOverhead' has been deprecated" in w for w in warnings
    ), done.stderr[-3000:]


def test_checkpoint_files_are_renamed_without_a_process_per_file(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The session writes a query's checkpoint through Hadoop's FileSystem, not FileContext (whose rename starts a
    ``readlink`` process per file without Hadoop's native library); the checkpoint is whole."""
    from job.spark.session import CHECKPOINT_FILE_MANAGER

    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == CHECKPOINT_FILE_MANAGER
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\ny\n")
    query = (
        spark.readStream.format("text")
        .load(str(tmp_path / "in"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.lastProgress["numInputRows"] == 2
    assert sorted(
        p.name for p in (tmp_path / "ckpt" / "commits").iterdir() if not p.name.startswith(".")
    ) == ["0"]
    assert sorted(
        p.name for p in (tmp_path / "ckpt" / "offsets").iterdir() if not p.name.startswith(".")
    ) == ["0"]
