"""An outside tester's finding: a stopped dagger started again read ``unknown`` ("waiting for its controller to
start it") for one sample while its controller was alive, then "rolling out version 2" though the same version
was started again; and during ``daggers dagger create --deploy`` ``daggers cluster health`` read ``degraded``
("1 dagger unknown") while the controller's /metrics read healthy. A dagger its controller is about to start
is ``starting`` on every surface, and a start after a stop reads as a start. Real processes stand in for the
daggers (fake_dagger.py) under a real controller's rounds."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import fake, settings, sqlite_registry, until

__all__ = ["sqlite_registry"]


def cluster_daggers(ctl: Controller) -> dict[str, float]:
    """The controller's /metrics count of its cluster's daggers by state (those not 0)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ctl.metrics)  # type: ignore[arg-type]
    out = {}
    for line in generate_latest(reg).decode().splitlines():
        m = re.fullmatch(r'daggers_cluster_daggers\{.*state="([^"]+)"\} (\S+)', line)
        if m and float(m.group(2)):
            out[m.group(1)] = float(m.group(2))
    return out


def test_a_dagger_about_to_start_is_starting_and_a_start_after_a_stop_is_a_start(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    ctl = Controller(sqlite_registry, "a-jkt", tmp_path / "s", settings=settings(), command=fake({}))
    try:
        ctl.reconcile_once()  # the controller is alive (its heartbeat recorded) before the dagger exists
        alice.create("a-jkt", bookings_spec("again"), deploy=True)
        about = alice.dagger("again")  # created with --deploy; the controller's next round starts it
        assert (about.actual_state, about.state, about.health["reason"]) == (
            "pending",
            "starting",
            "starting: waiting for its controller to start it",
        )
        assert alice.cluster_health("a-jkt")["state"]["daggers"] == {"starting": 1}
        ctl.reconcile_once()
        assert alice.cluster_health("a-jkt")["state"]["daggers"] == cluster_daggers(ctl) == {"starting": 1}

        running = until(ctl, alice, "again", lambda d: d.state == "running" and d.progress.get("input_rows"))
        alice.stop("again")
        until(ctl, alice, "again", lambda d: d.actual_state == "stopped")

        alice.deploy("again")  # the same version again
        about = alice.dagger("again")
        assert (about.actual_state, about.state, about.health["reason"]) == (
            "pending",
            "starting",
            "starting: waiting for its controller to start it",
        )
        started = until(ctl, alice, "again", lambda d: d.actual_state == "starting")
        assert started.running_version == running.running_version == 1
        assert started.state == "starting"
        assert re.fullmatch(
            r"starting version 1: started \d s ago, no report yet", started.health["reason"]
        ), started.health
        until(ctl, alice, "again", lambda d: d.state == "running")
    finally:
        alice.stop("again")
        until(ctl, alice, "again", lambda d: d.actual_state == "stopped")
        ctl.close()
