"""Golden cases of the health model from a second outside trial on a busy machine: rows/s over slow batches, a
new version replacing a run that is still alive, a deploy or a rollback that starts afresh, two faults at
once, and a reason that agrees with its state."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import replace
from typing import Any

from job.cli.control.dagger_views import progress_lines
from job.control.health_model import (
    RUNNING,
    STALLED,
    STOPPED,
    DaggerFacts,
    HealthSettings,
    Point,
    dagger_health,
)
from job.control.rates import rows_rate
from tests.job.cli.test_cli_views import _dagger
from tests.job.control.busy_dagger import BusyDagger, batches_of, timeline

S = HealthSettings()


def test_rows_per_s_of_slow_batches_is_not_above_what_arrives() -> None:
    """10,000 records/s read by batches of 25 to 35 s: a window of three batches counted three batches' rows
    from a sample taken after the batch before them (16,153 rows/s shown for a producer sending at most
    11k/s). The span starts when the count it starts from was reported: at most the noise of uneven batches."""
    rng = random.Random(9)
    dagger = BusyDagger(rate=lambda t: 10000.0, batches=batches_of([rng.uniform(25, 35) for _ in range(30)]))
    values = [h.rows_per_s.value for _, h in timeline(dagger, 200, 700) if h.rows_per_s is not None]
    assert (min(values), max(values)) == (9241.4, 10767.1)  # 13621.8 at most when the span started late


def test_the_span_of_a_rate_starts_when_its_first_count_was_reported() -> None:
    """Batches at 0, 30, 60 and 90 s read 300k rows each; lag reads at 5-s steps repeat the count between.
    Over a 90-s window ending at 95 s, the rows of the batches at 30, 60 and 90 s arrived over 90 s (0-90)."""
    points = [Point(at=float(t), input_rows=300_000 * (t // 30)) for t in range(0, 100, 5)]
    rate = rows_rate(points, 90.0)
    assert rate is not None
    assert (rate.rows_per_s, rate.since, rate.until) == (10_000.0, 0.0, 95.0)


NOW = 10_000.0
SINK = {
    "influx": {
        "rows_written": 100,
        "retrying": {"attempt": 9, "of": 15, "next_at": NOW + 12, "since": NOW - 200, "error": "refused"},
    }
}


def _facts(**kw: Any) -> DaggerFacts:
    base: dict[str, Any] = {
        "desired_state": "running",
        "actual_state": "running",
        "started_at": NOW - 1000,
        "controller_heartbeat": NOW - 1,
    }
    return DaggerFacts(**{**base, **kw})


def _progress(updated: float, batch: float, **extra: Any) -> dict[str, Any]:
    return {"updated_at": updated, "batch_at": batch, "input_rows": 5000, "batch_duration_ms": 9177, **extra}


def test_a_new_version_replacing_a_live_run_is_not_stopped() -> None:
    """A new version deployed while the sink retries: the old run is still finishing its write ("stopping"),
    and every surface said ``stopped`` "stopping" for 3 minutes (a stopped dagger is healthy: no alert could
    arm). The dagger wants to run and its old run is alive: it shows what that run shows, and why."""
    f = _facts(actual_state="stopping", progress=_progress(NOW - 5, NOW - 210, sinks=SINK))
    h = dagger_health(f, NOW, S)
    assert (h.state, h.reason) == (
        STALLED,
        "replacing its run: the old one is still stopping; sink retrying: influx, attempt 9/15, next in 12 s, "
        "failing for 200 s: refused",
    )


def test_an_operators_restart_during_a_broker_freeze_stays_stalled() -> None:
    """A restart asked for during a broker freeze read ``stopped`` for one scrape (the alert's ``for:`` began
    again): while the old run stops, the dagger keeps its state and its evidence."""
    f = _facts(
        actual_state="stopping",
        progress=_progress(NOW - 2, NOW - 60),
        lag_at=NOW - 60,
        lag_error="Source error: timed out",
        lag_error_at=NOW - 55,
    )
    h = dagger_health(f, NOW, S)
    assert (h.state, h.reason) == (
        STALLED,
        "replacing its run: the old one is still stopping; its brokers do not answer: no batch for 60 s, end "
        "offsets unreadable for 55 s: Source error: timed out",
    )


def test_a_stopping_dagger_that_should_stop_is_stopped() -> None:
    f = _facts(desired_state="stopped", actual_state="stopping", progress=_progress(NOW - 5, NOW - 5))
    assert (dagger_health(f, NOW, S).state, dagger_health(f, NOW, S).reason) == (STOPPED, "stopping")


def test_a_rollback_starts_afresh_until_its_run_has_had_time_to_read() -> None:
    """A rollback of a failed dagger read ``stalled`` "read no row for 117 s while 23,815 records wait", up 8 s:
    its first report carried the last batch of the run before. A new run (no restarts) has stall_after_s from
    its start to read."""
    samples = (Point(NOW - 200, 1000, 5000), Point(NOW - 117, 2000, 23815))
    f = _facts(
        started_at=NOW - 8,
        progress=_progress(NOW - 3, NOW - 117),
        lag=23815,
        lag_at=NOW - 4,
        samples=samples,
    )
    h = dagger_health(f, NOW, S)
    assert (h.state, h.reason) == (RUNNING, "started 8 s ago: no batch yet")
    later_progress = _progress(NOW + 93, NOW - 117)
    later = dagger_health(
        replace(f, progress=later_progress, lag_at=NOW + 90, controller_heartbeat=NOW + 94), NOW + 95, S
    )
    assert (later.state, later.reason) == (STALLED, "read no row for 103 s while 23,815 records wait")


def test_two_faults_at_once_are_both_named() -> None:
    """The sink retrying and the brokers frozen at once: the dagger named only the sink."""
    f = _facts(
        progress=_progress(NOW - 2, NOW - 90, sinks=SINK),
        lag_at=NOW - 90,
        lag_error="Source error: timed out",
        lag_error_at=NOW - 85,
    )
    h = dagger_health(f, NOW, S)
    assert (h.state, h.reason) == (
        STALLED,
        "sink retrying: influx, attempt 9/15, next in 12 s, failing for 200 s: refused; its brokers do not "
        "answer: no batch for 90 s, end offsets unreadable for 85 s: Source error: timed out",
    )


def test_unreadable_end_offsets_with_a_recent_batch_say_both() -> None:
    """ "end offsets unreadable for 25 s (stalled after 20 s)" while ``running`` with a fresh batch: the reason
    seemed to contradict the state. It says what has not yet passed: the last batch is recent."""
    f = _facts(
        progress=_progress(NOW - 3, NOW - 3),
        lag_at=NOW - 25,
        lag_error="Source error: connection refused",
        lag_error_at=NOW - 25,
    )
    h = dagger_health(f, NOW, S)
    assert (h.state, h.reason) == (
        RUNNING,
        "end offsets unreadable for 25 s, last batch 3 s ago (stalled when both pass 20 s): Source error: "
        "connection refused",
    )


def test_rows_per_s_as_of_a_batch_whose_samples_are_gone_is_unknown_not_0() -> None:
    """The brokers silent 372 s after the last batch: the samples up to it were gone and rows/s read "0 (372s
    old)" while the dagger had read 186/s then. No figure is better than a false one."""
    samples = tuple(Point(NOW - 100 + 5 * i, 5000, None) for i in range(20))  # idle reports, newer than it
    f = _facts(
        progress=_progress(NOW - 2, NOW - 372),
        lag_at=NOW - 372,
        lag_error="Source error: timed out",
        lag_error_at=NOW - 360,
        samples=samples,
    )
    h = dagger_health(f, NOW, S)
    assert (h.state, h.rows_per_s) == (STALLED, None)


def test_show_names_a_sink_that_has_not_written_yet() -> None:
    """ "sink influx: 0 rows in 0 writes … to ;": a sink's target is known only after its first write."""
    sinks = {"influx": {"sink_type": "influx", "target": "", "rows_written": 0, "writes": 0}}
    view = dataclasses.replace(_dagger(), progress={**_dagger().progress, "sinks": sinks})
    assert progress_lines(view, now=NOW)[3] == (
        "sink influx: 0 rows in 0 writes (0 retries, 0 failures) to influx (no write yet)"
    )
