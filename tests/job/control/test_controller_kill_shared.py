"""A shared dagger whose old run does not stop (its sink retrying a write) when a new version is deployed: the
controller kills it once after ``stop_timeout_s`` (one log line), the host ends that run, and the new
version starts. Before, the controller logged "SIGKILL" every round and killed nothing: a hosted run's
signal only removed its assignment, which was already gone. A real process stands in for the host
(fake_host.py)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from tests.job.control.control_seed import seed
from tests.job.control.test_controller import sqlite_registry, until
from tests.job.control.test_controller_shared import controller, shared, starts

__all__ = ["sqlite_registry"]


def test_a_hosted_run_that_does_not_stop_is_killed_once(
    sqlite_registry: Registry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", shared("x-hangs"), deploy=True)
    ctl = controller(sqlite_registry, tmp_path, stop_timeout_s=0.5)
    try:
        v1 = until(ctl, alice, "x-hangs", lambda d: d.actual_state == "running")
        alice.edit("x-hangs", shared("x-hangs").replace("trigger_interval_s: 1", "trigger_interval_s: 2"))
        until(ctl, alice, "x-hangs", lambda d: d.actual_state == "stopping")
        with caplog.at_level(logging.WARNING, logger="daggers.controller"):
            v2 = until(
                ctl,
                alice,
                "x-hangs",
                lambda d: d.running_version == 2 and d.actual_state == "running",
                timeout=30.0,
            )
        first, second = (line.split()[1] for line in starts(v2))
        assert (Path(v1.checkpoint) / "kills.txt").read_text() == f"killed {first}\n"
        assert second != first
        killed = [r.getMessage() for r in caplog.records if "did not stop" in r.getMessage()]
        assert killed == [f"{v2.team}/x-hangs: did not stop within 0 s; SIGKILL"]
    finally:
        ctl.stop_all(10)
