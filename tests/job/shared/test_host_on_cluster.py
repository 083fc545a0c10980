"""A shared application host whose executors run on a real Spark standalone cluster (the ``spark_cluster``
fixture: a master and two workers from the pyspark wheel on 127.0.0.1), over tansu, writing to InfluxDB:
two daggers in the one application give exact per-window counts, and both workers ran their tasks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.shared.channel import HostFolder
from tests.helpers import expected_bookings, topic_and_db, unique, wait_until
from tests.job.shared.host_world import HostProc, bookings_text, status, windows
from tests.services import BrokerHandle, SparkClusterHandle

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def test_a_shared_host_runs_its_daggers_on_the_workers(
    spark_cluster: SparkClusterHandle, tansu_broker: str, influxdb, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db_a = topic_and_db(broker, influxdb, "shared-cluster", partitions=3)
    db_b = unique("db").replace("-", "_")
    influxdb.create_database(db_b)
    events = generate("booking", 2000, seed=91, start=T0, duration_s=600, out_of_order_fraction=0.05)
    closer = generate("booking", 1, seed=92, start=T0 + timedelta(minutes=40), duration_s=1)
    produce(tansu_broker, topic, [events, closer], progress=False)
    want = expected_bookings(events.table.to_pylist())

    spark_cluster.wait_idle()
    folder = HostFolder(tmp_path / "host")
    host = HostProc(folder, master=spark_cluster.master)
    checkpoints = {key: tmp_path / key / "ckpt" for key in ("a", "b")}
    try:
        for key, db in (("a", db_a), ("b", db_b)):
            spec = tmp_path / f"{key}.yaml"
            spec.write_text(
                bookings_text(
                    unique(f"on-cluster-{key}"), tansu_broker, topic, influxdb.url, db, checkpoints[key]
                )
            )
            folder.assign(key, spec, tmp_path / "state", f"{key}-1")
        host.start()
        ready = host.ready()
        assert ready["master"] == spark_cluster.master
        for key, db in (("a", db_a), ("b", db_b)):
            host.wait_state(key, "running")
            got = wait_until(
                f"{key}'s windows",
                lambda db=db: (w := windows(influxdb, db)) == want and w,
                300,
                log=folder.log_path,
            )
            assert got == want  # exact counts, every window of both daggers
            assert wait_until(
                f"{key}'s rows",
                lambda key=key: status(checkpoints[key]).get("input_rows") == 2001,
                60,
                log=folder.log_path,
            )
        assert sum(want.values()) > 1000 and len({k[0] for k in want}) == 10  # a test with something in it

        # one application on the cluster, an executor on each worker, and tasks ran on both
        state = spark_cluster.state()
        apps = [a for a in state["activeapps"] if a["name"] == "daggers-shared"]
        assert len(apps) == 1, state["activeapps"]
        for index in range(2):
            worker = spark_cluster.worker_state(index)
            mine = [e for e in worker["executors"] if e["appid"] == apps[0]["id"]]
            assert len(mine) == 1, worker
            stderr = spark_cluster.work_dir / apps[0]["id"] / str(mine[0]["id"]) / "stderr"
            assert "Finished task" in stderr.read_text(errors="replace"), f"no task ran on worker {index + 1}"
        assert host.stop() == 0
        for key in ("a", "b"):
            assert host.dagger(key)["state"] == "stopped" and status(checkpoints[key])["state"] == "stopped"
        spark_cluster.wait_idle(120)  # the application gave its cores back
    finally:
        host.stop()
