"""The controller's line when a dagger starts to read as running names a batch only when one was reported
since it started: its ``status.json`` also moves before any (each wait of a sink that retries to start)."""

from __future__ import annotations

from job.control.controller import running_cause

STARTED = 1_800_000_000.0


def test_a_batch_reported_since_the_start_is_the_first_batch() -> None:
    progress = {"updated_at": STARTED + 9, "batch_at": STARTED + 9, "batches": 1}
    assert running_cause(progress, False, STARTED) == "first batch reported"
    assert running_cause(progress, True, STARTED) == "first batch reported"


def test_a_sink_retrying_to_start_is_no_batch() -> None:
    # what a dagger whose sink cannot start writes at each wait: no batch, its query not started
    progress = {
        "updated_at": STARTED + 3,
        "batch_at": 0.0,
        "batches": 0,
        "sinks": {"influx": {"retrying": {"attempt": 1, "of": 15}}},
    }
    assert running_cause(progress, False, STARTED) == "reported, no batch yet"
    assert running_cause(progress, True, STARTED) == "query started"


def test_a_batch_of_an_earlier_run_is_not_this_ones() -> None:
    progress = {"updated_at": STARTED + 2, "batch_at": STARTED - 60, "batches": 40}
    assert running_cause(progress, True, STARTED) == "query started"
    assert running_cause(None, True, STARTED) == "query started"
