"""Cluster health against real components: a Spark standalone master with two workers (its JSON API),
a real broker and a real InfluxDB; and what the controller records for the console."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from job.control.controller import Controller, ControllerSettings
from job.control.health import probe_cluster, probe_influx, probe_kafka, probe_spark, summary
from job.stack.ports import free_port
from tests.job.control.control_seed import seed
from tests.services import SparkClusterHandle

pytestmark = pytest.mark.integration


def test_standalone_master_workers_cores_and_memory(spark_cluster: SparkClusterHandle) -> None:
    spark_cluster.wait_idle()
    master, ui = spark_cluster.master, spark_cluster.ui
    health = probe_spark(master, ui)
    assert (health["ok"], health["mode"], health["status"]) == (True, "standalone", "ALIVE")
    assert (health["workers_alive"], health["workers"], health["cores"], health["cores_used"]) == (2, 2, 2, 0)
    assert (health["memory_mb"], health["memory_used_mb"]) == (2048, 0)
    for worker in health["worker_list"]:
        assert (worker["state"], worker["cores_free"], worker["memory_free_mb"]) == ("ALIVE", 1, 1024)
        assert worker["last_heartbeat_ms"] > (time.time() - 120) * 1000
    assert health["active_apps"] == []
    down = probe_spark("spark://127.0.0.1:1", f"http://127.0.0.1:{free_port()}")
    assert (down["ok"], down["status"]) == (False, "UNREACHABLE") and "/json/" in down["error"]


def test_broker_and_influx_probes(tansu_broker: str, influxdb) -> None:  # type: ignore[no-untyped-def]
    from job.stack.broker import create_topic

    create_topic(tansu_broker, "health-a", 3)
    create_topic(tansu_broker, "health-b", 2)
    kafka = probe_kafka(tansu_broker)
    assert kafka["ok"] and kafka["brokers"] == 1 and kafka["topics"] >= 2 and kafka["partitions"] >= 5
    assert not probe_kafka(f"127.0.0.1:{free_port()}", timeout=1.0)["ok"]
    influx = probe_influx(influxdb.url)
    assert influx == {"ok": True, "url": influxdb.url, "version": "1.6.7~rc0", "error": None}
    assert not probe_influx(f"http://127.0.0.1:{free_port()}", timeout=1.0)["ok"]
    local = probe_cluster("local[2]", None, tansu_broker, influxdb.url, daggers_running=1, daggers_total=2)
    assert local["ok"] and local["spark"]["cores"] == min(2, os.cpu_count() or 1)
    assert summary(local).startswith(f"spark local {local['spark']['cores']} cores · kafka ok ")


def test_the_controller_records_health_for_operators_elsewhere(
    spark_cluster: SparkClusterHandle, tansu_broker: str, influxdb, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    spark_cluster.wait_idle()
    master, ui = spark_cluster.master, spark_cluster.ui
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    root = seed(reg, kafka=tansu_broker, influx=influxdb.url, master="local[1]")
    root.add_cluster(
        "standalone",
        team="team-a",
        datacentre="sgp",
        spark_master=master,
        spark_ui_url=ui,
        kafka_bootstrap=tansu_broker,
        influx_url=influxdb.url,
    )
    alice = ControlPlane(reg, "alice")
    never = alice.cluster_health("standalone")
    assert never.pop("state")["state"] == "unhealthy"  # no controller has reported: the health model
    assert never == {
        "ok": False,
        "recorded": False,
        "error": "no controller has recorded health yet",
        "daggers": {"running": 0, "total": 0},
    }
    ctl = Controller(
        reg, "standalone", tmp_path / "s", settings=ControllerSettings(health_interval_s=0.1, standby=False)
    )
    deadline = time.monotonic() + 30
    while alice.cluster("standalone").health is None:
        assert time.monotonic() < deadline
        ctl.reconcile_once()
        time.sleep(0.1)
    recorded = alice.cluster_health("standalone")
    assert recorded["recorded"] and recorded["ok"] and recorded["age_s"] < 30
    assert recorded["state"]["state"] == "healthy" and recorded["state"]["parts"] == {
        "controller": "ok",
        "spark": "ok",
        "kafka": "ok",
        "influx": "ok",
    }
    assert recorded["spark"]["workers_alive"] == 2 and recorded["kafka"]["ok"] and recorded["influx"]["ok"]
    assert alice.cluster("standalone").controller_alive(time.time())
    live = alice.cluster_health("standalone", live=True)
    assert live["ok"] and live["spark"]["status"] == "ALIVE"
    with pytest.raises(Exception, match="no cluster 'standalone' in your teams"):
        ControlPlane(reg, "bob").cluster_health("standalone")
    ctl.close()
    reg.close()
