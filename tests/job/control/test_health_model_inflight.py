"""Golden cases of the health model for a micro-batch in flight: after its shared host was killed and its broker
thawed, a dagger's first batch after the restart ran 68 s on a loaded machine, and every surface said
``stalled`` "read no row for 115 … 159 s while 24,504 records wait" though the dagger was reading. A batch the
dagger reports as started (``running_batch`` in its status.json) is reading, named once it has run for one
micro-batch, and stalled only past ``batch_stall_after_s``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from job.control.health_model import (
    CATCHING_UP,
    RUNNING,
    STALLED,
    DaggerFacts,
    HealthSettings,
    Point,
    batch_in_flight,
    dagger_health,
)
from tests.job.control.busy_dagger import Batch, BusyDagger, batches_of, changes, timeline

S = HealthSettings()
NOW = 1000.0
RESTARTED = NOW - 95.0  # the host came back 95 s ago
LAST_ROWS = NOW - 159.0  # the last batch of the run before


def _restarted(progress: dict[str, Any], started: float = RESTARTED) -> DaggerFacts:
    """The dagger of the trial at ``NOW``: restarted once (at ``started``), its last rows read 159 s ago,
    24,504 records wait."""
    samples = tuple(Point(at=LAST_ROWS - 5.0 * (10 - i), input_rows=1000 * i, lag=400) for i in range(11))
    return DaggerFacts(
        desired_state="running",
        actual_state="running",
        restarts=1,
        started_at=started,
        progress={"batch_at": LAST_ROWS, "input_rows": 10_000, "batch_duration_ms": 4000, **progress},
        lag=24_504,
        lag_at=NOW - 2.0,
        samples=(*samples, Point(at=NOW - 2.0, input_rows=10_000, lag=24_504)),
        controller_heartbeat=NOW - 1.0,
    )


def test_the_first_batch_after_a_restart_is_reading_while_it_runs() -> None:
    ran = _restarted({"updated_at": NOW - 68.0, "running_batch": {"id": 110, "since": NOW - 68.0}})
    h = dagger_health(ran, NOW, S)
    assert (h.state, h.reason) == (
        RUNNING,
        "first batch after restart running for 68 s (24,504 records wait)",
    )
    # its figures are its last batch's, as before: nothing read since is counted yet
    assert h.lag is not None and h.lag.value == 24_504


def test_the_first_plan_after_a_restart_is_reading_too() -> None:
    """The run's query started 68 s ago and plans its first batch (Spark's offsets, the source's look-ups: 23.8 s
    in the fourth outsider's trial): the runner records it at the query's start (``planning``), so the dagger
    is starting to read, not silent with "no report yet"."""
    planning = {"id": 110, "since": NOW - 68.0, "planning": True}
    h = dagger_health(_restarted({"updated_at": NOW - 68.0, "running_batch": planning}), NOW, S)
    assert (h.state, h.reason) == (
        RUNNING,
        "first batch after restart running for 68 s (24,504 records wait)",
    )


def test_a_first_plan_is_in_flight_only_while_records_wait() -> None:
    """Idle events come while a first plan finds nothing to read yet (its source checks the logs first): the
    planning record stays, and reads as a batch in flight while records wait (the fifth outsider's fused group:
    94 s of planning read `stalled` once an idle event had cleared it); with nothing waiting it is idle."""
    planning = {"id": 27, "since": NOW - 80.0, "planning": True}
    waiting = replace(_restarted({"updated_at": NOW - 2.0, "running_batch": planning}), restarts=0)
    h = dagger_health(waiting, NOW, S)
    assert (h.state, h.reason) == (RUNNING, "first batch running for 80 s (24,504 records wait)")
    h = dagger_health(replace(waiting, lag=0), NOW, S)
    assert h.state == RUNNING and "running for" not in h.reason


def test_a_fused_member_held_up_by_its_group_says_by_whom() -> None:
    """Its group waits for another member's sink to start (the fourth outsider's fh): its status.json says so
    (``held_up``), running for a while, then stalled, always with the cause."""
    why = "waiting for fh's sink to start in their fused group"
    for ago, state in ((20.0, RUNNING), (94.0, STALLED)):
        facts = _restarted({"updated_at": NOW - 1.0, "held_up": {"since": NOW - ago, "by": why}})
        h = dagger_health(replace(facts, restarts=0), NOW, S)
        assert (h.state, h.reason) == (state, f"held up for {ago:.0f} s: {why}")
        assert h.rows_per_s is None or not h.rows_per_s.fresh  # no figure of it is now


def test_no_batch_in_flight_is_still_read_no_row() -> None:
    """The same dagger whose run reported (it started its query) but runs no batch: stalled, as before."""
    h = dagger_health(_restarted({"updated_at": NOW - 68.0}), NOW, S)
    assert (h.state, h.reason) == (STALLED, "read no row for 159 s while 24,504 records wait")


def test_a_batch_recorded_by_the_run_before_is_not_in_flight() -> None:
    """A process killed during its batch leaves it in its status.json: the next run does not read it as its own."""
    old = {"updated_at": LAST_ROWS + 10.0, "running_batch": {"id": 110, "since": LAST_ROWS + 10.0}}
    assert batch_in_flight(old, RESTARTED) is None
    h = dagger_health(_restarted(old), NOW, S)
    assert (h.state, h.reason) == (
        STALLED,
        "read no row for 159 s while 24,504 records wait (restarted 95 s ago, no report yet)",
    )


def test_a_batch_in_flight_past_its_bound_is_stalled() -> None:
    """A run restarted 320 s ago whose first batch started 301 s ago (the run before read its last rows 159 s
    ago, as the lag readings show: the samples are its): stalled past batch_stall_after_s, and a later batch
    of a run that has reported batches is named by its id."""
    running = {"id": 110, "since": NOW - 301.0}
    stuck = replace(
        _restarted({"updated_at": NOW - 301.0, "running_batch": running}, started=NOW - 320.0),
        progress={"batch_at": NOW - 330.0, "updated_at": NOW - 301.0, "running_batch": running},
    )
    h = dagger_health(stuck, NOW, HealthSettings(batch_stall_after_s=300.0))
    assert (h.state, h.reason) == (
        STALLED,
        "first batch after restart running for 301 s, over 300 s, while 24,504 records wait",
    )
    assert dagger_health(stuck, NOW - 2.0, HealthSettings(batch_stall_after_s=300.0)).state == RUNNING
    later = {
        "updated_at": NOW - 200.0,
        "batch_at": NOW - 201.0,
        "running_batch": {"id": 111, "since": NOW - 200.0},
    }
    h = dagger_health(_restarted(later, started=NOW - 320.0), NOW, HealthSettings(batch_stall_after_s=120.0))
    assert (h.state, h.reason) == (
        STALLED,
        "batch 111 running for 200 s, over 120 s, while 24,504 records wait",
    )


def test_a_short_batch_in_flight_reads_as_reading_not_idle() -> None:
    """A report at a batch's start moves updated_at past batch_at, as an idle report does: not "idle"."""
    f = DaggerFacts(
        desired_state="running",
        actual_state="running",
        started_at=0.0,
        progress={
            "updated_at": NOW - 2.0,
            "batch_at": NOW - 6.0,
            "input_rows": 30_000,
            "batch_duration_ms": 3000,
            "running_batch": {"id": 41, "since": NOW - 2.0},
        },
        lag=600,
        lag_at=NOW - 1.0,
        samples=tuple(Point(at=NOW - 6.0 - 5.0 * (9 - i), input_rows=3000 * i, lag=600) for i in range(10)),
        controller_heartbeat=NOW - 1.0,
    )
    assert (dagger_health(f, NOW, S).state, dagger_health(f, NOW, S).reason) == (RUNNING, "reading")


def _restart_dagger(first_batch_s: float | None) -> BusyDagger:
    """200 records/s read in 5-s batches; the host killed at 300 s and its dagger restarted at 310 s, whose
    first batch starts at 330 s and runs ``first_batch_s`` (None: it never ends), then 5-s batches again."""
    old = batches_of([5.0] * 60)
    if first_batch_s is None:
        batches = [*old, Batch(330.0, 10_000.0)]
    else:
        batches = [
            *old,
            Batch(330.0, 330.0 + first_batch_s),
            *batches_of([5.0] * 40, start=330 + first_batch_s),
        ]
    return BusyDagger(
        rate=lambda t: 200.0, batches=batches, reports_batch_start=True, run_started_at=310.0, restarts=1
    )


def test_a_slow_first_batch_after_a_restart_is_running_then_catching_up() -> None:
    """The trial's case as a timeline: judged every 5 s through a first batch of 68 s, the dagger stays running
    (it read as stalled from 95 s after its last rows), named from one micro-batch in. The lag after that batch
    holds its 68 s of arrivals (13,800): catching up until the next batch has read them, never lagging (it read
    as lagging: "growing … holds more than 60 s of arrivals", from one batch among short ones)."""
    verdicts = timeline(_restart_dagger(68.0), 335, 520)
    assert changes(verdicts) == [(400.0, RUNNING, CATCHING_UP), (410.0, CATCHING_UP, RUNNING)]
    at = dict(verdicts)
    assert (
        at[400.0].reason == "13,800 records behind; not shown to grow or to fall yet, over 6 batches in 119 s"
    )
    assert at[345.0].reason == "reading"  # 15 s in: shorter than one micro-batch (20 s)
    assert at[395.0].reason == "first batch after restart running for 65 s (20,000 records wait)"
    assert at[450.0].reason == "reading"


def test_a_first_batch_that_never_ends_is_stalled_past_its_bound() -> None:
    verdicts = timeline(_restart_dagger(None), 335, 700)
    assert changes(verdicts) == [(635.0, RUNNING, STALLED)]
    assert dict(verdicts)[640.0].reason == (
        "first batch after restart running for 310 s, over 300 s, while 69,000 records wait"
    )
