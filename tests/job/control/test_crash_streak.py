"""The controller's count of crashes in a row: a run that has run and reported for the health model's
recovered_after_s (the rule that ends crash-looping) ends the streak, and a new version starts with its own.
Before, a broker freeze left a dagger at restarts=2 for good, and a later bad version was given up after 4
crashes of its own ("crashed 6 times in a row"). Real processes stand in for daggers (fake_dagger.py); each
lag read is a sample of its own, and a report carries no lag it did not read."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.health_model import HealthSettings
from job.control.models import DaggerStatus, Sample
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import FAKE, settings, until

CRASHING = "trigger_interval_s: 2"


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[tuple[ControlPlane, Controller, Registry, list[str]]]:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry)
    launched: list[str] = []

    def command(spec: Path, state: Path, master: str) -> list[str]:
        # v1 crashes on its first two starts, then runs; a spec with CRASHING always crashes
        crash = CRASHING in spec.read_text() or len(launched) < 2
        launched.append(f"{spec.name} {'crash' if crash else 'run'}")
        return [sys.executable, str(FAKE), str(spec), "crash" if crash else "run"]

    ctl = Controller(registry, "a-jkt", tmp_path / "state", settings=settings(), command=command)
    ctl.health_settings = HealthSettings(recovered_after_s=1.0)
    ctl.claim()
    yield ControlPlane(registry, "alice"), ctl, registry, launched
    alice = ControlPlane(registry, "alice")
    alice.stop("wobbly")  # no process left behind
    until(ctl, alice, "wobbly", lambda d: d.actual_state in ("stopped", "failed"))
    registry.close()


def test_a_healthy_run_ends_the_streak_and_a_new_version_has_its_own(
    plane: tuple[ControlPlane, Controller, Registry, list[str]],
) -> None:
    alice, ctl, _, launched = plane
    text = bookings_spec("wobbly")
    alice.create("a-jkt", text, deploy=True)
    looping = until(ctl, alice, "wobbly", lambda d: d.actual_state == "running" and d.restarts == 2)
    assert launched == ["v1.yaml crash", "v1.yaml crash", "v1.yaml run"]
    assert looping.state == "crash-looping"
    healed = until(ctl, alice, "wobbly", lambda d: d.restarts == 0, timeout=30)
    assert (healed.actual_state, healed.state) == ("running", "running")

    alice.edit("wobbly", text.replace("trigger_interval_s: 1", CRASHING))  # v2 crashes at every start
    failed = until(ctl, alice, "wobbly", lambda d: d.actual_state == "failed", timeout=120)
    assert launched[3:] == ["v2.yaml crash"] * 3  # max_restarts 2: its own third crash gives up
    assert failed.restarts == 3


def test_a_new_version_starts_its_own_streak(
    plane: tuple[ControlPlane, Controller, Registry, list[str]],
) -> None:
    """v1 crashed twice and runs, not yet long enough to end its streak; v2 replaces it and crashes at every
    start: it is given up after three crashes of its own, not after one."""
    alice, ctl, _, launched = plane
    ctl.health_settings = HealthSettings(recovered_after_s=3600.0)
    text = bookings_spec("wobbly")
    alice.create("a-jkt", text, deploy=True)
    until(ctl, alice, "wobbly", lambda d: d.actual_state == "running" and d.restarts == 2)
    alice.edit("wobbly", text.replace("trigger_interval_s: 1", CRASHING))
    failed = until(ctl, alice, "wobbly", lambda d: d.actual_state == "failed", timeout=120)
    assert launched[3:] == ["v2.yaml crash"] * 3
    assert failed.restarts == 3


def test_a_report_carries_no_lag_it_did_not_read(
    plane: tuple[ControlPlane, Controller, Registry, list[str]],
) -> None:
    """A controller that starts again finds the lag its predecessor read minutes ago in the status row: the
    samples of new reports must not carry it (the lag trend would judge it as read now)."""
    alice, ctl, registry, launched = plane
    launched += ["", ""]  # v1 runs at once
    alice.create("a-jkt", bookings_spec("wobbly"), deploy=True)
    until(ctl, alice, "wobbly", lambda d: d.actual_state == "running")
    with registry.session() as s:
        st = s.scalars(select(DaggerStatus)).one()
        st.lag, st.lag_at = 777_777, 1.0  # read long ago
    until(ctl, alice, "wobbly", lambda d: d.progress.get("input_rows", 0) >= 1000)
    with registry.session() as s:
        lags = set(s.scalars(select(Sample.lag)))
    assert 777_777 not in lags


def test_a_run_that_never_came_up_does_not_end_the_streak(tmp_path: Path) -> None:
    """Issue 51: "up 170 s: its crashes in a row are over" counted from the relaunch into a dead host. A run is up
    from its query's start: one relaunched into a host that is gone, silent for longer than stable_after_s, was
    never up, so its crash is one more in a row (before: each such crash counted 1, and it was never given up)."""
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry)
    launched: list[str] = []

    def command(spec: Path, state: Path, master: str) -> list[str]:
        launched.append(spec.name)
        return [sys.executable, str(FAKE), str(spec), "silent"]

    ctl = Controller(
        registry, "a-jkt", tmp_path / "state", settings=settings(stable_after_s=1.0), command=command
    )
    ctl.claim()
    alice = ControlPlane(registry, "alice")
    try:
        alice.create("a-jkt", bookings_spec("ghost"), deploy=True)
        looping = until(ctl, alice, "ghost", lambda d: d.restarts == 2 and d.actual_state == "starting")
        assert looping.state == "crash-looping"
        assert re.fullmatch(
            r"restarted 2 times in a row, relaunched \d s ago, its query not started yet: "
            r"Dagger error: its shared host is gone",
            looping.health["reason"],
        ), looping.health
        failed = until(ctl, alice, "ghost", lambda d: d.actual_state == "failed" or len(launched) > 3, 60)
        assert (failed.actual_state, failed.restarts, len(launched)) == ("failed", 3, 3)
    finally:
        alice.stop("ghost")
        until(ctl, alice, "ghost", lambda d: d.actual_state in ("stopped", "failed"))
        registry.close()
