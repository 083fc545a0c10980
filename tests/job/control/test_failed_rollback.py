"""Issue 51: a rollback, an edit or a restart of a dagger the controller gave up on (``failed`` after its crashes)
starts it again, as a deploy does. Before, ``rollback --to 1`` said "version 3 (rolling out now)" and the dagger
stayed failed. Real processes stand in for daggers (fake_dagger.py): a spec with ``trigger_interval_s: 2``
crashes, any other runs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import FAKE, settings, until

CRASHING = "trigger_interval_s: 2"


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[tuple[ControlPlane, Controller]]:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry)

    def command(spec: Path, state: Path, master: str) -> list[str]:
        return [sys.executable, str(FAKE), str(spec), "crash" if CRASHING in spec.read_text() else "run"]

    ctl = Controller(registry, "a-jkt", tmp_path / "state", settings=settings(), command=command)
    ctl.claim()
    alice = ControlPlane(registry, "alice")
    yield alice, ctl
    alice.stop("wobbly")  # no process left behind
    until(ctl, alice, "wobbly", lambda d: d.actual_state == "stopped")
    registry.close()


def _crash_loop_to_failed(alice: ControlPlane, ctl: Controller) -> None:
    failed = until(ctl, alice, "wobbly", lambda d: d.actual_state == "failed", timeout=120)
    assert (failed.restarts, failed.last_exit_code) == (3, 3)  # max_restarts 2: the third crash gives up
    ctl.reconcile_once()
    assert alice.dagger("wobbly").actual_state == "failed"  # the controller leaves it there


def test_rollback_of_a_failed_dagger_runs_the_old_version(plane: tuple[ControlPlane, Controller]) -> None:
    alice, ctl = plane
    text = bookings_spec("wobbly")
    alice.create("a-jkt", text, deploy=True)
    until(ctl, alice, "wobbly", lambda d: d.actual_state == "running" and d.running_version == 1)
    alice.edit("wobbly", text.replace("trigger_interval_s: 1", CRASHING))  # v2 crashes at start
    _crash_loop_to_failed(alice, ctl)

    result = alice.rollback("wobbly", 1)
    assert (result.version, result.redeploys) == (3, True)
    pending = alice.dagger("wobbly")
    assert (pending.actual_state, pending.restarts, pending.desired_state) == ("pending", 0, "running")
    running = until(ctl, alice, "wobbly", lambda d: d.actual_state == "running" and d.running_version == 3)
    assert running.restarts == 0 and running.progress["input_rows"] >= 100


def test_an_edit_or_a_restart_of_a_failed_dagger_starts_it(plane: tuple[ControlPlane, Controller]) -> None:
    alice, ctl = plane
    text = bookings_spec("wobbly")
    alice.create("a-jkt", text.replace("trigger_interval_s: 1", CRASHING), deploy=True)
    _crash_loop_to_failed(alice, ctl)
    alice.restart("wobbly")  # the same version: it crashes again, counted from 0
    assert alice.dagger("wobbly").actual_state == "pending"
    _crash_loop_to_failed(alice, ctl)

    alice.edit("wobbly", text)  # v2 runs
    assert alice.dagger("wobbly").actual_state == "pending"
    running = until(ctl, alice, "wobbly", lambda d: d.actual_state == "running" and d.running_version == 2)
    assert running.restarts == 0


def test_an_edit_of_a_failed_dagger_that_was_stopped_does_not_start_it(
    plane: tuple[ControlPlane, Controller],
) -> None:
    alice, ctl = plane
    text = bookings_spec("wobbly")
    alice.create("a-jkt", text.replace("trigger_interval_s: 1", CRASHING), deploy=True)
    _crash_loop_to_failed(alice, ctl)
    alice.stop("wobbly")
    until(ctl, alice, "wobbly", lambda d: d.actual_state == "stopped")
    result = alice.edit("wobbly", text)
    assert result.redeploys is False
    for _ in range(20):  # rounds of the controller: nothing starts
        ctl.reconcile_once()
    assert alice.dagger("wobbly").actual_state == "stopped"
