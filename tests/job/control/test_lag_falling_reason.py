"""An outside tester's finding: a fused member's reason said "not shown to grow or to fall yet, over 8 batches
in 42 s" while its lag fell 1,980,000 → 1,840,000. When the batches show the lag falling, the reason says so
(it is catching up); "not shown" only when they do not: batches too few or too short for a trend (a fused
group's), and a newest batch's trough held as one batch, judged alike."""

from __future__ import annotations

from job.control.health_model import CATCHING_UP, HealthSettings, dagger_health
from job.control.lag_trend import lag_trend
from tests.job.control.test_lag_reason_figures import NOW, _facts

S = HealthSettings()


def _batches(troughs: list[int]) -> list[tuple[float, int, list[tuple[float, int]]]]:
    """A batch every 6 s reading 60,000 rows, its lag read 0.5 s after it."""
    return [(6.0, 60_000, [(0.5, lag)]) for lag in troughs]


def test_batches_too_short_for_a_trend_that_show_the_lag_falling_say_so() -> None:
    falling = _batches([1_980_000 - 20_000 * i for i in range(8)])  # 8 batches over 42 s: under 45 s
    h = dagger_health(_facts(falling, False), NOW, S)
    assert (h.state, h.reason) == (
        CATCHING_UP,
        "1,840,000 records behind, not growing: after its batches it fell from 1,980,000 to 1,840,000, "
        "over 8 batches in 42 s",
    )
    flat = _batches([1_980_000, 1_990_000, 1_985_000, 1_990_000, 1_995_000, 1_992_000, 1_996_000, 1_999_000])
    h = dagger_health(_facts(flat, False), NOW, S)
    assert (h.state, h.reason) == (
        CATCHING_UP,
        "1,999,000 records behind; not shown to grow or to fall yet, over 8 batches in 42 s (a trend spans 45 s)",
    )
    few = _batches([1_980_000, 1_990_000, 1_985_000])
    h = dagger_health(_facts(few, False), NOW, S)
    assert h.reason == (
        "1,985,000 records behind; not shown to grow or to fall yet, over 3 batches in 12 s (a trend takes 6)"
    )


def test_a_newest_trough_held_as_one_batch_shows_the_fall() -> None:
    """Nine batches up and down (not growing), then the newest far lower: the trend is the one of the batch
    before (one batch is not yet a fall for a state), but the lag did come down, and the reason says so."""
    troughs = [1_980_000, 1_990_000, 1_970_000, 1_975_000, 1_990_000, 1_985_000, 1_995_000, 1_990_000]
    troughs += [2_000_000, 1_840_000]
    readings = []
    at, rows = 1000.0, 0
    for lag in troughs:
        at, rows = at + 6.0, rows + 60_000
        readings.append((at + 0.5, lag, rows))
    trend = lag_trend(readings, at + 1.0, 60.0, max_window_s=300.0)
    assert trend is not None and trend.held == 1_840_000 and trend.last == 2_000_000
    assert trend.falling() and not trend.growing(1000)
    assert trend.not_growing() == (
        "after its batches it fell from 1,980,000 to 1,840,000 (its newest batch's), over 9 batches in 48 s "
        "before it"
    )
    h = dagger_health(_facts(_batches(troughs), False), NOW, S)
    assert (h.state, h.reason) == (
        CATCHING_UP,
        "1,840,000 records behind, not growing: after its batches it fell from 1,980,000 to 1,840,000 (its "
        "newest batch's), over 9 batches in 48 s before it",
    )
