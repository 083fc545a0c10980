"""A dagger on a real Spark standalone cluster: ``daggers run SPEC --master spark://…`` (client mode: the
driver is the CLI process) over tansu, with the executors on the two workers of the ``spark_cluster``
fixture, writing to InfluxDB. Known events give exact per-window counts; the master's and the workers'
JSON, and the executors' own logs, show that the work ran on both workers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.shared.hosted import MAX_TRANSIENT_RETRIES, TRANSIENT
from job.spark import jvm_archive
from job.spark.session import JVM_OPTIONS_ENV
from tests.helpers import (
    BOOKINGS_SQL,
    expected_bookings,
    influx_points,
    make_spec,
    on_cluster,
    topic_and_db,
    unique,
)
from tests.services import BrokerHandle, SparkClusterHandle

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]


def app_of(cluster: SparkClusterHandle, name: str) -> dict[str, Any]:
    """The master's record of the (completed) application called ``name``."""
    state = cluster.state()
    apps = [a for a in state["activeapps"] + state["completedapps"] if a["name"] == name]
    assert len(apps) == 1, f"applications named {name}: {apps}"
    return apps[0]


def test_a_dagger_runs_on_the_workers_with_exact_windows(
    spark_cluster: SparkClusterHandle, tansu_broker: str, influxdb, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "cluster", partitions=3)
    events = generate("booking", 3000, seed=71, start=T0, duration_s=600, out_of_order_fraction=0.05)
    closer = generate("booking", 1, seed=72, start=T0 + timedelta(minutes=40), duration_s=1)
    produce(tansu_broker, topic, [events, closer], progress=False)
    name = unique("on-cluster")
    _, text = make_spec(
        name=name,
        bootstrap=tansu_broker,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="bookings",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=1000,
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(on_cluster(text))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [
        sys.executable,
        "-m",
        "job.cli",
        "run",
        str(spec),
        "--once",
        "--master",
        spark_cluster.master,
        "--state-dir",
        str(tmp_path / "state"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    for _ in range(MAX_TRANSIENT_RETRIES):
        if not (done.returncode and TRANSIENT in done.stdout + done.stderr):
            break
        # Spark waits a fixed 10 s for a Python worker to connect back: on a busy machine it can miss (the
        # shared host retries as often). The run resumes from its checkpoint and the sink is idempotent per
        # window: the totals stay exact.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rows read, 0 late rows dropped, 0 bad records skipped" in done.stdout
    assert json.loads((tmp_path / "ckpt" / "status.json").read_text())["input_rows"] == 3001

    # exact windows: every event is before the closer's watermark, the closer's own window stays open
    want = expected_bookings(events.table.to_pylist())
    assert influx_points(influxdb, db, "bookings", "num_of_bookings", TAGS) == want
    assert sum(want.values()) > 1000 and len({k[0] for k in want}) == 10

    # the application had 2 cores of the cluster, one executor on each worker, and both ran tasks
    app = app_of(spark_cluster, f"dagger-{name}")
    assert (app["cores"], app["memoryperexecutor"]) == (2, 512)
    for index in range(2):
        worker = spark_cluster.worker_state(index)
        mine = [e for e in worker["executors"] + worker["finishedexecutors"] if e["appid"] == app["id"]]
        assert [e["memory"] for e in mine] == [512], worker
        stderr = (spark_cluster.work_dir / app["id"] / str(mine[0]["id"]) / "stderr").read_text(
            errors="replace"
        )
        assert "Finished task" in stderr, f"no task ran on worker {index + 1}"
        # the executor's JVM got the options Daggers gives its own JVMs (tests/conftest.py sets them) and maps
        # the class archive the driver maps (setup.sh writes it)
        launch = next(line for line in stderr.splitlines() if line.startswith("Spark Executor Command:"))
        options = [*shlex.split(os.environ[JVM_OPTIONS_ENV]), *jvm_archive.java_options()]
        assert all(f'"{o}"' in launch for o in options), launch
