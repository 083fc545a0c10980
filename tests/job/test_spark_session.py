"""A process that runs Daggers' Spark session prints no warning a user can do nothing about: the second
dagger of ``daggers demo`` once printed 15 (each library function and the Kafka source "replaced a
previously registered" one), every run Spark's note on ``spark.local.dir``, and a wide plan its
"Truncated the string representation" notice. A real warning still shows. Its queries write their
checkpoints with no process started per file."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from job.functions.spark_udfs import register_functions
from job.sources.kafka import DaggerKafkaSource
from job.spark.session import build_session

spark = build_session("quiet-probe", "local[1]", extra={"spark.yarn.executor.memoryOverhead": "1g"})
for _ in range(2):  # two daggers in one session, as daggers demo runs them
    spark.dataSource.register(DaggerKafkaSource)
    register_functions(spark)
wide = spark.range(3).selectExpr(*[f"id AS c{i}" for i in range(40)])
print(len(wide._jdf.queryExecution().toString()), wide.groupBy("c0").count().count())
# an aggregation with state, one micro-batch: offsets, commits, metadata, state changelogs
folder = sys.argv[1]
query = (
    spark.readStream.format("text").load(folder + "/in").groupBy("value").count()
    .writeStream.format("noop").outputMode("update")
    .option("checkpointLocation", folder + "/ckpt").trigger(availableNow=True).start()
)
query.awaitTermination(120)
print(query.lastProgress["batchId"], query.lastProgress["numInputRows"])
spark.stop()
"""

#: Stands in for chmod on the probe's PATH: logs its arguments, then does its work.
CHMOD = """#!/bin/sh
echo "$@" >> "{log}"
exec {chmod} "$@"
"""


@pytest.fixture(scope="module")
def probe(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path, list[str]]:
    """Run :data:`PROBE` once with a chmod that logs; return the run, its folder and chmod's calls."""
    folder = tmp_path_factory.mktemp("probe")
    (folder / "in").mkdir()
    (folder / "in" / "a.txt").write_text("x\ny\nx\n")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    log = folder / "chmod.log"
    chmod = bin_dir / "chmod"
    chmod.write_text(CHMOD.format(log=log, chmod="/bin/chmod"))
    chmod.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return done, folder, calls


def test_a_session_that_registers_twice_prints_only_the_warning_a_user_can_act_on(
    probe: tuple[subprocess.CompletedProcess[str], Path, list[str]],
) -> None:
    done, _, _ = probe
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[1] == "3"
    warnings = [line for line in done.stderr.splitlines() if " WARN " in line]
    # the deprecated setting is a warning a user can act on: SparkConf's other warnings still show (Spark
    # itself says it once per read of the setting)
    assert warnings and all(
        "'spark.yarn.executor.memoryOverhead' has been deprecated" in w for w in warnings
    ), done.stderr[-3000:]


def test_a_checkpoint_is_written_with_no_chmod_process_and_the_same_permissions(
    probe: tuple[subprocess.CompletedProcess[str], Path, list[str]],
) -> None:
    """Hadoop's local file system, without its native library, starts a ``chmod`` for every checkpoint file
    and folder it creates (28 for this query with Spark's manager); the session's manager sets the same
    permissions by a system call. The one chmod left is Spark making the jar it fetched executable."""
    done, folder, calls = probe
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[1] == "0 3"
    assert [c for c in calls if not c.endswith(".jar")] == []
    checkpoint = folder / "ckpt"
    modes = {
        p.relative_to(checkpoint).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in checkpoint.rglob("*")
    }
    for name in ("offsets/0", "offsets/.0.crc", "commits/0", "commits/.0.crc", "metadata", ".metadata.crc"):
        assert modes.pop(name) == 0o644, name
    for name in ("offsets", "commits", "sources", "state", "state/0", "state/0/0"):
        assert modes.pop(name) == 0o755, name
    # everything else the query wrote (its source log, state changelogs) too: files 644, folders 755
    assert {oct(m) for m in modes.values()} == {"0o644", "0o755"}
    assert any(name.endswith("1.changelog") for name in modes)


def test_the_checkpoint_manager_is_the_jar_s(spark) -> None:  # type: ignore[no-untyped-def]
    """The tests' session writes checkpoints with the jar's manager, as a dagger's does."""
    from job.spark import jvm

    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass") == jvm.CHECKPOINT_FILE_MANAGER
