"""A restart does not reset the evidence of a sink outage: a run that crashed after its sink gave up and the run
after it, retrying the same sink, read "failing for 11 s" after 5 minutes of InfluxDB down. The controller keeps
when the outage began across runs, until a run's sink writes again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from job.control import Registry
from job.control.controller import Controller
from job.control.health_model import STALLED, DaggerFacts, dagger_health
from tests.job.control.control_seed import seed
from tests.job.control.test_controller import fake, settings, sqlite_registry

__all__ = ["sqlite_registry"]
T0 = 1_000_000.0


def _progress(at: float, writes: int, since: float | None) -> dict[str, Any]:
    retrying = {"attempt": 5, "of": 15, "next_at": at + 12, "since": since, "error": "refused"}
    sink = {"writes": writes, "rows_written": 10 * writes, "retrying": retrying if since else None}
    return {"updated_at": at, "batch_at": at - 5, "input_rows": 100, "sinks": {"influx": sink}}


def test_a_restart_keeps_when_the_sink_outage_began(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    ctl = Controller(sqlite_registry, "a-jkt", tmp_path / "s", settings=settings(), command=fake({}))
    first_run, second_run = T0, T0 + 320
    ctl._sink_outage_since(1, first_run, _progress(T0 + 10, 40, None))
    ctl._sink_outage_since(1, first_run, _progress(T0 + 30, 40, T0 + 20))  # the outage begins
    ctl._sink_outage_since(1, first_run, _progress(T0 + 315, 40, None))  # gave up: the run crashes
    seen = ctl._sink_outage_since(1, second_run, _progress(T0 + 331, 0, T0 + 325))
    assert seen["sinks"]["influx"]["retrying"]["since"] == T0 + 20
    status = {"actual_state": "running", "started_at": second_run, "restarts": 1, "progress": seen}
    h = dagger_health(DaggerFacts.of("running", status, heartbeat=T0 + 335), T0 + 336)
    assert (h.state, h.reason) == (
        STALLED,
        "sink retrying: influx, attempt 5/15, next in 7 s, failing for 316 s: refused",
    )
    # the sink of the new run writes: the outage is over, and the next one is new
    ctl._sink_outage_since(1, second_run, _progress(T0 + 400, 1, None))
    later = ctl._sink_outage_since(1, second_run, _progress(T0 + 500, 1, T0 + 490))
    assert later["sinks"]["influx"]["retrying"]["since"] == T0 + 490
