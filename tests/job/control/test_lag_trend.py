"""Properties of the lag trend (job.control.lag_trend), judged batch by batch: troughs that stay within a band
narrower than the growth asked for are never growing, however tall the teeth between them; troughs that climb
are growing; a window never judges fewer than six batches, two to a third, nor across a gap in the readings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from job.control.health_model import lag_readings
from job.control.lag_trend import MIN_BATCHES, MIN_PER_THIRD, Reading, lag_trend
from tests.job.control.busy_dagger import BusyDagger, batches_of

NOW = 1_000_000.0
WINDOW = 60.0
GROWTH = 1000  # lag_growth_min


def _batches(troughs: list[int], teeth: list[list[int]], start: float, batch_s: float) -> list[Reading]:
    """Readings of batches back to back: each batch is read at its trough soon after its commit, then at
    heights above it (the records that arrive while it runs); the rows read in all move with each batch."""
    out: list[Reading] = []
    for i, (trough, heights) in enumerate(zip(troughs, teeth, strict=True)):
        at = start + i * batch_s
        out.append((at + 0.5, trough, i))
        out += [
            (at + 0.5 + (j + 1) * batch_s / (len(heights) + 1), trough + h, i) for j, h in enumerate(heights)
        ]
    return out


_teeth = st.lists(st.integers(0, 5_000_000), min_size=0, max_size=4)


def _simulated(rate: int, lengths: list[float], limit: int | None) -> tuple[list[Reading], float]:
    """The lag readings of a simulated dagger (busy_dagger.py: records arriving at ``rate``/s, batches back to
    back of ``lengths`` seconds reading at most ``limit`` records, the lag read every 5 s and soon after each
    batch), and when its last batch ended."""
    dagger = BusyDagger(rate=lambda t: float(rate), batches=batches_of(lengths, limit=limit))
    end = dagger.batches[-1].end
    facts = dagger.facts(end + 2.0, window_s=end + 10.0)
    return lag_readings(facts.samples, None, None, 0), end


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(1, 5000),
    lengths=st.lists(st.floats(1.0, 15.0), min_size=12, max_size=40),
)
def test_a_bounded_sawtooth_of_slow_batches_is_never_growing(rate: int, lengths: list[float]) -> None:
    """Records arrive at a steady rate; batches of 1 to 15 s, in any order (slower and slower too), each read
    all that waits when it starts: the troughs rise with the batch time, yet the lag is never growing,
    whenever it is judged."""
    readings, end = _simulated(rate, lengths, None)
    now = 30.0
    while now <= end + 2.0:
        seen = [r for r in readings if r[0] <= now]
        trend = lag_trend(seen, now, WINDOW, max_window_s=300.0, max_gap_s=30.0)
        assert trend is None or not trend.growing(GROWTH), (now, trend)
        now += 5.0


@settings(max_examples=60, deadline=None)
@given(
    rate=st.integers(500, 5000),
    lengths=st.lists(st.floats(2.0, 15.0), min_size=30, max_size=40),
)
def test_a_dagger_reading_less_than_arrives_is_growing(rate: int, lengths: list[float]) -> None:
    """Batches of 2 to 15 s read at most half a second of arrivals each: the lag really grows, and a window
    judged after thirty batches says so."""
    readings, end = _simulated(rate, lengths, rate // 2)
    trend = lag_trend(readings, end + 2.0, WINDOW, max_window_s=300.0, max_gap_s=30.0)
    assert trend is not None
    assert trend.growing(GROWTH), trend


@settings(max_examples=200, deadline=None)
@given(batch_s=st.floats(4.0, 60.0), reads=st.integers(1, 4), data=st.data())
def test_slow_batches_stretch_the_window_and_fill_each_third(
    batch_s: float, reads: int, data: st.DataObject
) -> None:
    """Batches of ``batch_s`` each read ``reads`` times: a verdict, when there is one, holds at least six
    batches, two to a third, however slow the batches (the window stretches back, up to 300 s)."""
    n = int(300 / batch_s)
    troughs = data.draw(st.lists(st.integers(0, 100_000), min_size=n, max_size=n))
    readings = _batches(troughs, [[1000] * (reads - 1)] * n, NOW - n * batch_s, batch_s)
    trend = lag_trend(readings, NOW, WINDOW, max_window_s=300.0)
    if n >= MIN_BATCHES:
        assert trend is not None
        assert trend.batches >= max(MIN_BATCHES, int(WINDOW / batch_s))
        assert trend.batches // 3 >= MIN_PER_THIRD
    else:
        assert trend is None


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(6, 20),
    before=st.lists(st.integers(0, 1_000_000), min_size=1, max_size=20),
    gap=st.floats(31.0, 600.0),
    data=st.data(),
)
def test_no_verdict_across_a_gap(n: int, before: list[int], gap: float, data: st.DataObject) -> None:
    """Readings taken before a gap longer than max_gap_s (a controller that was down) change nothing: the
    trend is that of the readings after the gap alone."""
    troughs = data.draw(st.lists(st.integers(0, 100_000), min_size=n, max_size=n))
    after = _batches(troughs, [[500]] * n, NOW - WINDOW, WINDOW / n)
    first = after[0][0] - gap
    old: list[Reading] = [(first - 5.0 * i, lag, -1 - i) for i, lag in enumerate(before)]
    assert lag_trend(old + after, NOW, WINDOW, max_window_s=900, max_gap_s=30) == lag_trend(
        after, NOW, WINDOW, max_window_s=900, max_gap_s=30
    )


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(6, 30),
    low=st.integers(0, 1000),
    peak=st.integers(20_000, 1_000_000),
    step=st.integers(1, 10_000),
    data=st.data(),
)
def test_catching_up_after_a_stall_is_not_growing(
    n: int, low: int, peak: int, step: int, data: st.DataObject
) -> None:
    """Small troughs, then a stall's backlog read off over the last ``m`` batches, each trough below the one
    before: the lag is high but falling, not growing (wherever the backlog begins). Falling over two batches
    at least: one lower trough is one batch, not yet evidence (test_one_batch_dips.py)."""
    m = data.draw(st.integers(3, n))
    troughs = [low] * (n - m) + [max(peak - step * i, low + m - i) for i in range(m)]
    trend = lag_trend(_batches(troughs, [[100]] * n, NOW - WINDOW, WINDOW / n), NOW, WINDOW)
    assert trend is not None
    assert not trend.growing(GROWTH)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(6, 20), silent=st.floats(31.0, 240.0), data=st.data())
def test_no_verdict_from_readings_that_ended_long_ago(n: int, silent: float, data: st.DataObject) -> None:
    """Climbing troughs whose newest reading is older than max_gap_s (nothing read since): no verdict now."""
    troughs = [10_000 * i for i in range(n)]
    readings = _batches(troughs, [[]] * n, NOW - silent - WINDOW, WINDOW / n)
    assert lag_trend(readings, NOW - silent, WINDOW, max_gap_s=30) is not None
    assert lag_trend(readings, NOW, WINDOW, max_window_s=600, max_gap_s=30) is None


def test_batches_that_grow_slower_with_what_they_read_are_growing() -> None:
    """3,000 records/s into a dagger that reads all that waits, each batch 30% longer than the one before (it
    processes less than arrives): no batch leaves records behind, yet the lag soon holds more than a window
    of arrivals, and never fell: growing. The same batch times, shortest last, are not (the lag falls)."""
    lengths = [2.0 * 1.3**k for k in range(15)]  # 2 s ... 79 s
    readings, end = _simulated(3000, lengths, None)
    trend = lag_trend(readings, end + 2.0, WINDOW, max_window_s=300.0, max_gap_s=30.0)
    assert trend is not None and trend.growing(GROWTH), trend
    assert trend.reason().endswith("and it holds more than 60 s of arrivals (3,000/s)")
    readings, end = _simulated(3000, lengths[::-1], None)
    trend = lag_trend(readings, end + 2.0, WINDOW, max_window_s=300.0, max_gap_s=30.0)
    assert trend is None or not trend.growing(GROWTH)
