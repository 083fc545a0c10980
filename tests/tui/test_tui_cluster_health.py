"""The console shows a real Spark standalone cluster (the ``spark_cluster`` fixture: a master and two
workers of 1 core and 1 GiB): ``w`` on the clusters screen probes it live and lists each worker (alive,
cores and memory used, last heartbeat) and the applications. A dagger started on the cluster appears as an
application with 2 cores, and each worker shows its core and 512 MiB in use."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from job.control import ControlPlane, Registry
from tests.helpers import BOOKINGS_SQL, make_spec, on_cluster, topic_and_db, unique
from tests.job.control.control_seed import seed
from tests.services import BrokerHandle, SparkClusterHandle
from tui.app import DaggersApp
from tui.cluster_health import ClusterHealthScreen
from tui.clusters import ClustersScreen

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def rows(table: DataTable) -> list[list[str]]:  # type: ignore[type-arg]
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def probed(pilot: Pilot[None], screen: ClusterHealthScreen, timeout: float = 30.0) -> None:
    """Wait until the screen shows a live probe (it was reset to False before asking for one)."""
    deadline = time.monotonic() + timeout
    while not screen.live:
        assert time.monotonic() < deadline, "no live probe answered"
        await pilot.pause(0.2)


def wait_for_app(cluster: SparkClusterHandle, name: str, timeout: float = 300.0) -> None:
    """Wait until application ``name`` runs on the cluster with both workers' cores."""
    deadline = time.monotonic() + timeout
    while True:
        state = cluster.state()
        if [a["name"] for a in state["activeapps"]] == [name] and state["coresused"] == 2:
            return
        assert time.monotonic() < deadline, f"{name} did not get the cluster's cores: {state['activeapps']}"
        time.sleep(1)


@pytest.mark.asyncio
async def test_the_console_shows_workers_and_applications_of_a_real_cluster(  # type: ignore[no-untyped-def]
    spark_cluster: SparkClusterHandle, tansu_broker: str, influxdb, tmp_path: Path
) -> None:
    spark_cluster.wait_idle()
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    root = seed(registry, kafka=tansu_broker, influx=influxdb.url)
    root.add_cluster(
        "standalone",
        team="team-a",
        datacentre="sgp",
        spark_master=spark_cluster.master,
        spark_ui_url=spark_cluster.ui,
        kafka_bootstrap=tansu_broker,
        influx_url=influxdb.url,
    )
    app = DaggersApp(ControlPlane(registry, "alice"), refresh_s=0, warm_preview=False)
    dagger: subprocess.Popen[bytes] | None = None
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            clusters = app.screen
            assert isinstance(clusters, ClustersScreen)
            table = clusters.query_one(DataTable)
            keys = [str(k.value) for k in table.rows]
            table.move_cursor(row=keys.index("cluster:standalone"))
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, ClusterHealthScreen) and screen.cluster == "standalone"
            await probed(pilot, screen)

            master = str(screen.query_one("#master", Static).render())
            assert master.startswith(
                f"{spark_cluster.master}  ● ok 2/2w 0/2c  status ALIVE  memory 0/2048 MB"
            )
            workers = rows(screen.query_one("#workers", DataTable))
            assert [w[1:5] for w in workers] == [["127.0.0.1", "ALIVE", "0/1", "0/1024 MB"]] * 2
            assert all(w[0].startswith("worker-") for w in workers) and len({w[0] for w in workers}) == 2
            assert all(re.fullmatch(r"\d+s ago", w[5]) for w in workers), workers
            assert rows(screen.query_one("#apps", DataTable)) == []

            # a dagger starts on the cluster: its application holds one core and 512 MiB of each worker
            topic, db = topic_and_db(BrokerHandle("tansu", tansu_broker), influxdb, "console", partitions=2)
            name = unique("console")
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
            )
            spec = tmp_path / "spec.yaml"
            spec.write_text(on_cluster(text))
            log = tmp_path / "dagger.log"
            dagger = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "job.cli",
                    "run",
                    str(spec),
                    "--master",
                    spark_cluster.master,
                    "--state-dir",
                    str(tmp_path / "state"),
                ],
                stdout=log.open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
            wait_for_app(spark_cluster, f"dagger-{name}")
            screen.live = False
            await pilot.press("h")
            await probed(pilot, screen)

            master = str(screen.query_one("#master", Static).render())
            assert master.startswith(
                f"{spark_cluster.master}  ● ok 2/2w 2/2c  status ALIVE  memory 1024/2048 MB"
            )
            assert [w[1:5] for w in rows(screen.query_one("#workers", DataTable))] == [
                ["127.0.0.1", "ALIVE", "1/1", "512/1024 MB"]
            ] * 2
            (application,) = rows(screen.query_one("#apps", DataTable))
            assert application[0].startswith("app-") and application[1:5] == [
                f"dagger-{name}",
                "RUNNING",
                "2",
                "512 MB",
            ]
            assert re.fullmatch(r"\d+[sm]", application[5]), application
            await pilot.press("escape")
            assert isinstance(app.screen, ClustersScreen)
    finally:
        if dagger is not None:
            os.killpg(dagger.pid, signal.SIGTERM)
            try:
                dagger.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(dagger.pid, signal.SIGKILL)
                dagger.wait(10)
        registry.close()
