"""The session's checkpoint manager (job/spark/jvm/LocalCheckpointFileManager.java) gives a checkpoint's
files and folders the modes Spark's own manager gives them (through Hadoop's ``chmod 0755`` process),
also under a group's shared folder with the set-group-ID bit: its folders keep that bit, so the files a
dagger writes there stay the group's. The jar's manager once set modes with 9 permission bits and
cleared it (755 where Spark's manager left 2755)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from job.spark import jvm
from job.spark.session import SPARK_CHECKPOINT_FILE_MANAGER

pytestmark = pytest.mark.integration

KEY = "spark.sql.streaming.checkpointFileManagerClass"


def modes(checkpoint: Path) -> dict[str, int]:
    """Every file's and folder's mode (with its set-ID and sticky bits) under ``checkpoint``, by path."""
    return {
        p.relative_to(checkpoint).as_posix(): stat.S_IMODE(p.lstat().st_mode) for p in checkpoint.rglob("*")
    }


def run_aggregation(spark, source: Path, checkpoint: Path) -> int:  # type: ignore[no-untyped-def]
    """One micro-batch of a stateful aggregation over ``source`` with ``checkpoint``; return its input rows."""
    query = (
        spark.readStream.format("text")
        .load(str(source))
        .groupBy("value")
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return int(query.lastProgress["numInputRows"])


def test_a_checkpoint_under_a_setgid_folder_has_the_modes_spark_s_manager_gives(
    spark, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    assert spark.conf.get(KEY) == jvm.CHECKPOINT_FILE_MANAGER
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\ny\nx\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    assert run_aggregation(spark, tmp_path / "in", shared / "jar") == 3
    spark.conf.set(KEY, SPARK_CHECKPOINT_FILE_MANAGER)
    try:
        assert run_aggregation(spark, tmp_path / "in", shared / "spark") == 3
    finally:
        spark.conf.set(KEY, jvm.CHECKPOINT_FILE_MANAGER)
    by_jar, by_spark = modes(shared / "jar"), modes(shared / "spark")
    assert by_jar == by_spark
    assert (
        stat.S_IMODE((shared / "jar").stat().st_mode)
        == stat.S_IMODE((shared / "spark").stat().st_mode)
        == 0o2755
    )
    assert {by_jar[name] for name in ("offsets", "commits", "state/0/0", "state/0/1")} == {0o2755}
    assert {
        by_jar[name] for name in ("offsets/0", "offsets/.0.crc", "commits/0", "state/0/0/1.changelog")
    } == {0o644}
    assert {oct(m) for m in by_jar.values()} == {"0o2755", "0o644"}
