"""The controller records when a broker outage began: ``lag_error_at`` is when the first of the failed lag
reads in a row was asked for, kept while reads keep failing and cleared by a read that works, so the health
model counts "end offsets unreadable for N s" from the first failure, not from the last good read. A real
process stands in for the dagger (fake_dagger.py); the lag read itself is replaced (no broker needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.models import DaggerStatus
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import FAKE, settings, until


def _status(registry: Registry) -> DaggerStatus:
    with registry.session() as s:
        st = s.scalars(select(DaggerStatus)).one()
        s.expunge(st)
        return st


def test_an_outage_counts_from_its_first_failed_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry)
    ctl = Controller(
        registry,
        "a-jkt",
        tmp_path / "state",
        settings=settings(lag_interval_s=0.2),
        command=lambda spec, state, master: [sys.executable, str(FAKE), str(spec), "run"],
    )
    ctl.claim()
    alice = ControlPlane(registry, "alice")
    answer: list[tuple[int | None, str | None, str | None]] = [(1200, None, None)]
    monkeypatch.setattr(ctl, "_lag", lambda item, checkpoint: answer[0])
    try:
        alice.create("a-jkt", bookings_spec("steady"), deploy=True)
        until(ctl, alice, "steady", lambda d: d.actual_state == "running")
        until(ctl, alice, "steady", lambda d: _status(registry).lag == 1200)
        good = _status(registry)
        assert good.lag_error_at is None
        answer[0] = (None, "Source error: the brokers did not answer in 5 s", None)
        until(ctl, alice, "steady", lambda d: _status(registry).lag_error_at is not None)
        first = _status(registry)
        # a good read asked before the answer changed may be recorded after it (reads run in the background):
        # the outage counts from the first failed read, after the last good one, whichever that was
        assert first.lag_at >= good.lag_at  # type: ignore[operator]
        assert first.lag_error_at > first.lag_at  # type: ignore[operator]
        later = float(first.updated_at)
        until(ctl, alice, "steady", lambda d: _status(registry).updated_at > later + 1.0)
        assert _status(registry).lag_error_at == first.lag_error_at  # kept while reads keep failing
        answer[0] = (900, None, None)
        until(ctl, alice, "steady", lambda d: _status(registry).lag == 900)
        assert _status(registry).lag_error_at is None
    finally:
        alice.stop("steady")
        until(ctl, alice, "steady", lambda d: d.actual_state in ("stopped", "failed"))
        registry.close()
