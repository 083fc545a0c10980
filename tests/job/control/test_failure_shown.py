"""The controller shows a failed run's error from the failure record the run wrote (title, message and hint,
exactly), never the record of an older run, and reads the log only when there is no record (a process killed
before it could write one). Real processes stand in for daggers (fake_dagger.py: ``fail`` ends as launch.py
does on a known error, ``crash`` leaves no record); the real dagger is in test_failure_shown_e2e.py."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.errors import SpecError
from job.query.failure_record import FailureRecord, read_failure, write_failure
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.fake_dagger import FAILED
from tests.job.control.test_controller import FAKE, fake, settings, sqlite_registry, until

__all__ = ["sqlite_registry"]
CRASHED = "Sink error: cannot reach InfluxDB at http://127.0.0.1:9/write: connection refused\nhint: is influxd running?"


def test_the_error_shown_is_the_record_the_run_wrote(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("falls"), deploy=True)
    ctl = Controller(
        sqlite_registry,
        "a-jkt",
        tmp_path / "state",
        settings=settings(max_restarts=0),
        command=fake({"falls": "fail"}),
    )
    failed = until(ctl, alice, "falls", lambda d: d.actual_state == "failed")
    # the whole message, its second line too (the log's last "Title: message" line holds only the first)
    assert failed.last_error == f"{FAILED.title}: {FAILED.message}\nhint: {FAILED.hint}"
    assert FAILED.message.count("\n") == 1 and failed.last_exit_code == 2
    record = read_failure(Path(failed.checkpoint).parent)
    assert record is not None and (record.title, record.message, record.hint, record.exit_code) == (
        "Sink error",
        FAILED.message,
        FAILED.hint,
        2,
    )


def test_a_record_older_than_the_run_is_never_shown(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    created = alice.create("a-jkt", bookings_spec("stale"), deploy=True)
    workdir = tmp_path / "state" / "daggers" / f"{created.id}-stale"
    old = FailureRecord.of(SpecError("an older run's error", hint="long fixed"), at=time.time() - 60)
    write_failure(workdir, old)
    ctl = Controller(
        sqlite_registry,
        "a-jkt",
        tmp_path / "state",
        settings=settings(max_restarts=0),
        command=fake({"stale": "crash"}),
    )
    failed = until(ctl, alice, "stale", lambda d: d.actual_state == "failed")
    assert failed.last_error == CRASHED and failed.last_exit_code == 3  # from its log: it wrote no record
    assert read_failure(workdir) == old  # still there, and not shown


def test_a_run_killed_after_one_that_failed_does_not_show_the_old_record(
    sqlite_registry: Registry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The realistic stale record: the first run fails and writes one; the restarted run is killed (SIGKILL)
    before it could write its own, so the one in its folder is the first run's."""
    caplog.set_level(logging.INFO, logger="daggers.controller")
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("twice"), deploy=True)
    starts: list[str] = []

    def command(spec: Path, state: Path, master: str) -> list[str]:
        starts.append("fail" if not starts else "run")
        return [sys.executable, str(FAKE), str(spec), starts[-1]]

    ctl = Controller(
        sqlite_registry, "a-jkt", tmp_path / "state", settings=settings(max_restarts=3), command=command
    )
    crashed = until(ctl, alice, "twice", lambda d: d.actual_state == "crashed")
    assert crashed.last_error == f"{FAILED.title}: {FAILED.message}\nhint: {FAILED.hint}"
    running = until(ctl, alice, "twice", lambda d: d.actual_state == "running")
    assert starts == ["fail", "run"]
    os.kill(running.pid, signal.SIGKILL)
    killed = until(ctl, alice, "twice", lambda d: d.actual_state == "crashed")
    assert killed.last_error == "killed by signal 9 (SIGKILL)" and killed.last_exit_code == -9
    crashed_lines = [m for r in caplog.records if (m := r.getMessage()).startswith("team-a/twice: crashed (")]
    assert crashed_lines[-1].startswith(
        "team-a/twice: crashed (killed by signal 9 (SIGKILL)): killed by signal 9 (SIGKILL); restart 2 in "
    ), crashed_lines  # "crashed (exit code -9)" read as an exit
    assert read_failure(Path(killed.checkpoint).parent) is not None  # the first run's, not shown
    alice.stop("twice")
    until(ctl, alice, "twice", lambda d: d.actual_state == "stopped")
