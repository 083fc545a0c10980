"""A standalone cluster's worker whose UI port was taken between choosing it and binding it (Spark then binds
the next port) is still found where it answers; its master and workers run with the JVM options Daggers gives
its own JVMs."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import requests

from job.spark import jvm_archive
from job.stack.ports import free_ports
from job.stack.spark_standalone import SparkStandalone

pytestmark = pytest.mark.integration


def test_a_worker_whose_ui_port_was_taken_is_found_where_it_answers(tmp_path: Path) -> None:
    port, ui, worker_ui = free_ports(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", worker_ui))
        taken.listen()
        cluster = SparkStandalone(
            tmp_path,
            port,
            ui,
            [worker_ui],
            daemon_java_options=jvm_archive.java_options(),
            die_with_parent=True,
        )
        cluster.start()
        try:
            [url] = cluster.worker_ui_urls
            assert url != f"http://127.0.0.1:{worker_ui}"
            state = requests.get(f"{url}/json/", timeout=30).json()
            assert state["masterurl"] == cluster.master_url and state["cores"] == 1
        finally:
            cluster.stop()


def test_the_master_and_workers_get_the_jvm_options_daggers_gives_its_own_jvms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGGERS_JVM_OPTIONS", "-XX:TieredStopAtLevel=1 -Ddaggers.test.mark=standalone")
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-Ddaggers.test.own=kept")
    port, ui, worker_ui = free_ports(3)
    cluster = SparkStandalone(
        tmp_path,
        port,
        ui,
        [worker_ui],
        daemon_java_options=[*jvm_archive.java_options(), "-Ddaggers.test.given=a b"],
        die_with_parent=True,
    )
    cluster.start()
    try:
        for proc in cluster.processes:
            argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
            assert {
                b"-XX:TieredStopAtLevel=1",
                b"-Ddaggers.test.mark=standalone",
                b"-Ddaggers.test.own=kept",
                b"-Ddaggers.test.given=a b",
            } <= set(argv), (proc.name, argv)
    finally:
        cluster.stop()
