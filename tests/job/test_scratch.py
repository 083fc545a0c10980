"""job.spark.scratch: each Spark process's scratch folder, and the sweep of a killed one's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from job.spark import scratch


def test_a_sweep_removes_the_folders_of_processes_that_are_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(scratch.SCRATCH_ENV, str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    mine = tmp_path / scratch.owner_name()
    dead = tmp_path / f"{gone.pid}-12345"  # its pid, now free
    reused = tmp_path / f"{os.getpid()}-1"  # this process's pid, but another start time: an earlier owner
    foreign = tmp_path / "not-a-dagger"
    for folder in (mine, dead, reused, foreign):
        (folder / "StateStoreId(opId=0,partId=0)").mkdir(parents=True)
    removed = scratch.sweep()
    assert sorted(removed) == sorted([dead, reused])
    assert mine.exists() and foreign.exists() and not dead.exists() and not reused.exists()
    assert scratch.sweep() == []
    assert scratch.sweep(tmp_path / "missing") == []


def test_claim_sweeps_and_returns_this_process_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(scratch.SCRATCH_ENV, str(tmp_path / "root"))
    (tmp_path / "root" / "999999999-5").mkdir(parents=True)  # no such pid
    folder = scratch.claim()
    assert folder == tmp_path / "root" / scratch.owner_name() and folder.is_dir()
    assert [p.name for p in (tmp_path / "root").iterdir()] == [folder.name]
    assert scratch.claim() == folder


def test_the_default_root_is_per_user_under_the_temp_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(scratch.SCRATCH_ENV, raising=False)
    root = scratch.scratch_root()
    assert root.name == f"daggers-scratch-{os.getuid()}"


# A stateful query on RocksDB: its working copy is under spark.local.dir
_QUERY = textwrap.dedent("""
    import sys, time
    from pyspark.sql import functions as F
    from job.spark.session import build_session
    spark = build_session("scratch-test", master="local[1]", shuffle_partitions=1)
    print(spark.conf.get("spark.local.dir"), flush=True)
    q = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
         .groupBy((F.col("value") % 5).alias("k")).count()
         .writeStream.outputMode("complete").format("noop")
         .option("checkpointLocation", sys.argv[1]).start())
    while not q.recentProgress or q.lastProgress["batchId"] < 2:
        time.sleep(0.2)
    print("ready", flush=True)
    time.sleep(600)
""")


@pytest.mark.integration
def test_a_killed_dagger_leaves_its_rocksdb_copy_and_the_next_session_removes_it(tmp_path: Path) -> None:
    env = {**os.environ, scratch.SCRATCH_ENV: str(tmp_path / "scratch")}
    env.pop("SPARK_LOCAL_DIRS", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", _QUERY, str(tmp_path / "checkpoint")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        local = Path(proc.stdout.readline().strip())
        assert local == tmp_path / "scratch" / scratch.owner_name(proc.pid)
        assert proc.stdout.readline().strip() == "ready"
        stores = list(local.rglob("StateStoreId*"))
        assert stores, "the state store's RocksDB copy is under the process's scratch folder"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM (in its process group): no hook runs
        proc.wait(30)
    assert all(s.exists() for s in stores), "a killed JVM cleans up nothing"
    assert scratch.sweep(tmp_path / "scratch") == [local]
    assert not local.exists()
