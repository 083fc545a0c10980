"""A frozen broker read ``● ok`` for 65 s under load 30: its probe waits up to its timeout times the load before
it counts as unanswered, and until then the last answer stood. A part whose probe in flight has not answered
within its timeout reads ``slow`` (not ``ok``) at once, its failures in a row unchanged; the answer, or the
probe giving up, decides the rest."""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from job.control import Registry
from job.control.controller import PROBE_TIMEOUT_S, Controller
from job.control.health import count_failures
from job.control.health_model import cluster_health
from tests.job.control.control_seed import seed
from tests.job.control.test_controller import fake, settings, sqlite_registry

__all__ = ["sqlite_registry"]


def _ok() -> dict[str, Any]:
    part = {"ok": True, "error": None, "failures": 0}
    return {"ok": True, "checked_at": 0.0, "spark": dict(part), "kafka": dict(part), "influx": dict(part)}


def test_a_part_whose_probe_waits_past_its_timeout_reads_slow(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    seed(sqlite_registry)
    ctl = Controller(
        sqlite_registry, "a-jkt", tmp_path / "s", settings=settings(health_interval_s=10.0), command=fake({})
    )
    now = time.time()
    ctl._probe = (_ok(), now - 10)
    ctl._health_job = Future()  # in flight: the broker does not answer
    ctl._health_at = now - PROBE_TIMEOUT_S + 1
    ctl._answered = {"spark", "influx"}
    assert ctl._maybe_health([], now) is None  # within its timeout: the last answer stands
    ctl._health_at = now - PROBE_TIMEOUT_S - 2
    seen = ctl._maybe_health([], now)
    assert seen is not None
    assert seen["kafka"] == {
        "ok": False,
        "slow": True,
        "refused": False,
        "failures": 0,
        "error": "no answer for 5 s yet (the probe still waits)",
    }
    assert seen["spark"] == _ok()["spark"]
    health = cluster_health(now, seen, now, [], now)
    assert (health.parts, health.state) == (
        {"controller": "ok", "spark": "ok", "kafka": "slow", "influx": "ok"},
        "healthy",
    )
    assert ctl._maybe_health([], now + 1) is None  # told once per probe
    # the probe then gives up for real: one unanswered probe (two make it down)
    ctl._probe = (seen, now)
    ended = {**_ok(), "kafka": {"ok": False, "error": "timed out"}}
    assert count_failures(ended, seen)["kafka"]["failures"] == 1
