"""The session's checkpoint manager (job/spark/jvm/LocalCheckpointFileManager.java) gives a checkpoint's
files and folders the modes Spark's own manager gives them (through Hadoop's ``chmod 0755`` process),
also under a group's shared folder with the set-group-ID bit: its folders keep that bit, so the files a
dagger writes there stay the group's. The jar's manager once set modes with 9 permission bits and
cleared it (755 where Spark's manager left 2755)."""

from __future__ import annotations

import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.spark import jvm
from job.spark.session import SPARK_CHECKPOINT_FILE_MANAGER

pytestmark = pytest.mark.integration

KEY = "spark.sql.streaming.checkpointFileManagerClass"
REPO = Path(__file__).resolve().parents[2]
#: The jar's sources an earlier version did not have.
CHECKPOINT_SOURCES = ("LocalCheckpointFileManager", "NioLocalFileSystem")


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


def drop_last_commit(checkpoint: Path) -> int:
    """Remove the newest commit (and its checksum file) of the query under ``checkpoint``, as a dagger killed
    between its offsets and its commit leaves it; return that batch's id."""
    commits = checkpoint / "spark" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink()
    return last


def test_a_checkpoint_moves_between_managers_with_exact_windows(  # type: ignore[no-untyped-def]
    spark, tansu_broker, influxdb, tmp_path: Path
) -> None:
    """Upgrade and downgrade: Spark's manager writes a checkpoint, the jar's continues it (re-running a batch the
    other left uncommitted, whose state files are there already), then Spark's again: the windows are exact."""
    from job.produce.generator import generate
    from job.produce.producer import produce
    from job.query.plan import plan
    from job.query.runner import run_foreground
    from tests.helpers import bookings_to_influx, expected_bookings, influx_points, topic_and_db
    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "ckpt-managers", 2)
    checkpoint = tmp_path / "ckpt"
    spec, _ = bookings_to_influx(
        "managers", broker.bootstrap, topic, influxdb.url, db, checkpoint, max_records_per_batch=400
    )
    t0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    chunks = [
        generate("booking", 600, seed=80 + i, start=t0 + timedelta(minutes=i), duration_s=60)
        for i in range(3)
    ]
    closer = generate("booking", 1, seed=89, start=t0 + timedelta(minutes=30), duration_s=1)
    dropped: list[int] = []
    try:
        for i, manager in enumerate(
            (SPARK_CHECKPOINT_FILE_MANAGER, jvm.CHECKPOINT_FILE_MANAGER, SPARK_CHECKPOINT_FILE_MANAGER)
        ):
            produce(broker.bootstrap, topic, [chunks[i], closer] if i == 2 else chunks[i], progress=False)
            spark.conf.set(KEY, manager)
            run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
            if dropped:  # the other manager's uncommitted batch ran again and is committed now
                assert (checkpoint / "spark" / "commits" / str(dropped[-1])).is_file()
            if i < 2:
                dropped.append(drop_last_commit(checkpoint))
    finally:
        spark.conf.set(KEY, jvm.CHECKPOINT_FILE_MANAGER)
    want = expected_bookings(r for c in chunks for r in c.table.to_pylist())
    assert (
        influx_points(influxdb, db, "m", "num_of_bookings", ["tag_city_id", "tag_s2id", "tag_vehicle_type"])
        == want
    )
    assert sum(want.values()) > 300
    assert dropped == [2, 5]


#: A dagger's session over the jar at ``$DAGGERS_JVM_JAR``: one micro-batch of an aggregation with a checkpoint.
PROBE = """
import sys
from job.spark.session import build_session
spark = build_session("stale-jar", master="local[1]")
query = (
    spark.readStream.format("text").load(sys.argv[1] + "/in").groupBy("value").count()
    .writeStream.format("noop").outputMode("update")
    .option("checkpointLocation", sys.argv[1] + "/ckpt").trigger(availableNow=True).start()
)
query.awaitTermination(120)
print(spark.conf.get("spark.sql.streaming.checkpointFileManagerClass"), query.lastProgress["numInputRows"])
spark.stop()
"""


def test_a_jar_an_earlier_version_built_at_daggers_jvm_jar_still_runs_daggers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DAGGERS_JVM_JAR=<file>`` keeps the jar built there; one built before the checkpoint manager was
    added lacks its class: every query failed to start (CANNOT_LOAD_CHECKPOINT_FILE_MANAGER,
    ClassNotFoundException). The session now keeps Spark's manager with such a jar."""
    stale = tmp_path / "jvm-functions.jar"
    monkeypatch.setattr(jvm, "SOURCES", tuple(s for s in jvm.SOURCES if s.stem not in CHECKPOINT_SOURCES))
    jvm.build(stale)
    monkeypatch.undo()
    monkeypatch.setenv(jvm.JAR_ENV, str(stale))
    assert (jvm.holds(stale, "daggers.spark.DistinctCount"), jvm.checkpoint_file_manager()) == (True, None)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\ny\nx\n")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [SPARK_CHECKPOINT_FILE_MANAGER, "3"]
    monkeypatch.delenv(jvm.JAR_ENV)
    assert jvm.checkpoint_file_manager() == jvm.CHECKPOINT_FILE_MANAGER
