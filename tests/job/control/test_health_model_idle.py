"""A dagger between batches is idle only when nothing waits, and its reason never contradicts its figures.

An outside tester saw ``running | idle: nothing new to read`` beside a lag of 7,540 and 20,197.7 rows/s (a
shared dagger reading from earliest while a busy machine delayed its batches): the model called every report
after the last batch idle when the lag was under ``catching_up_lag``. And a fused member read "idle" beside
10,566 rows/s just after its group restarted (rows/s is an average over a window: it decays)."""

from __future__ import annotations

from typing import Any

from job.control.health_model import (
    RUNNING,
    DaggerFacts,
    Figure,
    HealthSettings,
    Point,
    between_batches,
    dagger_health,
)

NOW = 1_000_000.0
S = HealthSettings()  # catching_up_lag 10,000, rate_window_s 60


def _facts(
    lag: int, samples: tuple[Point, ...], batch_at: float, started_at: float = NOW - 600
) -> DaggerFacts:
    progress: dict[str, Any] = {
        "updated_at": NOW - 1,  # a report after the last batch
        "batch_at": batch_at,
        "batch_duration_ms": 1200,
        "input_rows": samples[-1].input_rows,
    }
    return DaggerFacts(
        desired_state="running",
        actual_state="running",
        started_at=started_at,
        progress=progress,
        lag=lag,
        lag_at=NOW - 1,
        samples=samples,
        controller_heartbeat=NOW - 1,
    )


# batches every 3 s for 60 s, 60,593 rows each: 1,211,860 rows over 60 s, 20,197.7 rows/s
FROM_EARLIEST = tuple(Point(at=NOW - 63 + 3 * i, input_rows=60_593 * i) for i in range(21))


def test_records_waiting_under_the_catching_up_lag_are_read_not_idle() -> None:
    """The tester's sample: lag 7,540 (under 10,000), 20,197.7 rows/s, last batch 3 s ago, a report since."""
    h = dagger_health(_facts(7_540, FROM_EARLIEST, batch_at=NOW - 3), NOW, S)
    assert h.rows_per_s is not None and h.lag is not None
    assert (h.state, h.reason, h.lag.value, h.rows_per_s.value) == (
        RUNNING,
        "reading: 7,540 records wait; last batch 3 s ago",
        7540.0,
        20197.7,
    )
    # one record waiting is not "nothing new" either
    one = dagger_health(_facts(1, FROM_EARLIEST, batch_at=NOW - 3), NOW, S)
    assert (one.state, one.reason) == (RUNNING, "reading: 1 record waits; last batch 3 s ago")


def test_nothing_waits_but_rows_read_in_the_window_is_caught_up_not_idle() -> None:
    """A fused member just after its group restarted: its first batch read a burst 20 s ago, nothing waits
    now, and rows/s (412,074 rows over 39 s) still shows 10,566: it is caught up, not idle."""
    samples = (Point(NOW - 40, 0), Point(NOW - 20, 412_074), Point(NOW - 1, 412_074))
    h = dagger_health(_facts(0, samples, batch_at=NOW - 20, started_at=NOW - 45), NOW, S)
    assert h.rows_per_s is not None
    assert (h.state, h.reason, h.rows_per_s.value) == (
        RUNNING,
        "caught up: nothing new to read; last batch 20 s ago",
        10566.0,
    )


def test_idle_only_when_nothing_waits_and_nothing_was_read() -> None:
    """Lag 0 and no row read over the rate window: idle, with rows/s 0 beside it."""
    samples = (Point(NOW - 61, 900), Point(NOW - 31, 900), Point(NOW - 1, 900))
    h = dagger_health(_facts(0, samples, batch_at=NOW - 61), NOW, S)
    assert h.rows_per_s is not None
    assert (h.state, h.reason, h.rows_per_s.value) == (RUNNING, "idle: nothing new to read", 0.0)


def test_between_batches_words() -> None:
    """The pure wording: records waiting (below or above the catching-up lag: one sentence), caught up, idle."""
    fast = Figure(value=20197.7, at=NOW - 3, age_s=3.0, fresh=True)
    zero = Figure(value=0.0, at=NOW - 3, age_s=3.0, fresh=True)
    assert between_batches(7_540, fast, 3.2) == "reading: 7,540 records wait; last batch 3 s ago"
    assert between_batches(133_444, zero, 20.0) == "reading: 133,444 records wait; last batch 20 s ago"
    assert between_batches(0, fast, 3.0) == "caught up: nothing new to read; last batch 3 s ago"
    assert between_batches(0, zero, 3.0) == "idle: nothing new to read"
    assert between_batches(None, None, 900.0) == "idle: nothing new to read"
