"""A state changes only on evidence that outlasts one micro-batch: a dagger whose lag really grows and dips for
one batch (the producer paused while that batch ran) stays ``lagging`` through the dip, and a lag that stays
bounded is never ``lagging``, dips or not. Simulated daggers (busy_dagger.py) judged every 5 s as a scraper of
/metrics samples them, and troughs built by hand."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from job.control.health_model import LAGGING, RUNNING
from job.control.lag_trend import lag_trend, one_batch_dips
from tests.job.control.busy_dagger import BusyDagger, batches_of, changes, timeline
from tests.job.control.test_lag_trend import GROWTH, NOW, WINDOW, _batches, _teeth


def _paused(rate: float, lengths: list[float], dips: set[int]) -> tuple[list[tuple[float, float]], float]:
    """The spans (start, end) of the batches in ``dips`` (the producer sends nothing while they run), and when
    the last batch ends."""
    spans, t = [], 0.0
    for i, length in enumerate(lengths):
        if i in dips:
            spans.append((t, t + length))
        t += length
    return spans, t


def _dagger(rate: int, lengths: list[float], dips: set[int], limit: int | None) -> tuple[BusyDagger, float]:
    spans, end = _paused(rate, lengths, dips)
    dagger = BusyDagger(
        rate=lambda t: 0.0 if any(a <= t < b for a, b in spans) else float(rate),
        batches=batches_of(lengths, limit=limit),
    )
    return dagger, end


_dip_every = st.integers(4, 9)  # a dip every 4 to 9 batches: isolated, at most a third of a window


@settings(max_examples=40, deadline=None)
@given(
    rate=st.integers(500, 5000),
    lengths=st.lists(st.floats(4.0, 12.0), min_size=30, max_size=40),
    every=_dip_every,
    offset=st.integers(0, 8),
)
def test_a_growing_lag_with_one_batch_dips_stays_lagging(
    rate: int, lengths: list[float], every: int, offset: int
) -> None:
    """Batches of 4 to 12 s read at most a third of the shortest batch's arrivals: the lag grows by at least a
    batch's arrivals each batch, but for the batches while which the producer paused, whose lag dips by what
    they read (the next batch makes it up). Once lagging, the dagger stays lagging at every 5-s verdict: the
    dips never flip it to catching up or running and back."""
    limit = int(rate * min(lengths) / 3)
    dips = {i for i in range(12, len(lengths) - 1) if (i - offset) % every == 0}
    dagger, end = _dagger(rate, lengths, dips, limit)
    verdicts = timeline(dagger, 60.0, end + 1.0)
    states = [h.state for _, h in verdicts]
    assert LAGGING in states
    first = states.index(LAGGING)
    assert changes(verdicts[first:]) == [], changes(verdicts)


@settings(max_examples=40, deadline=None)
@given(
    rate=st.integers(1, 5000),
    lengths=st.lists(st.floats(1.0, 15.0), min_size=20, max_size=40),
    every=_dip_every,
    offset=st.integers(0, 8),
)
def test_a_bounded_sawtooth_with_dips_never_lags(
    rate: int, lengths: list[float], every: int, offset: int
) -> None:
    """Batches of 1 to 15 s that read all that waits, and a producer that pauses for single batches: the lag
    is a saw-tooth bounded by the longest batch's arrivals, with dips; the dagger is never lagging."""
    dips = {i for i in range(len(lengths)) if (i - offset) % every == 0}
    dagger, end = _dagger(rate, lengths, dips, None)
    assert LAGGING not in {h.state for _, h in timeline(dagger, 30.0, end + 2.0)}


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(6, 30),
    base=st.integers(1, 1_000_000),
    data=st.data(),
)
def test_troughs_within_a_band_narrower_than_the_growth_are_never_growing(
    n: int, base: int, data: st.DataObject
) -> None:
    """Troughs anywhere in a band narrower than lag_growth_min, in any order (dips of one batch or more, a
    newest trough below the one before), however tall the teeth between them: never growing."""
    troughs = data.draw(st.lists(st.integers(base, base + GROWTH - 1), min_size=n, max_size=n))
    teeth = data.draw(st.lists(_teeth, min_size=n, max_size=n))
    trend = lag_trend(_batches(troughs, teeth, NOW - WINDOW, WINDOW / n), NOW, WINDOW)
    assert trend is not None
    assert not trend.growing(GROWTH), trend


def test_one_batch_dips_are_those_the_next_batch_made_up() -> None:
    assert one_batch_dips([10, 40, 30, 50, 45, 60]) == {2, 4}
    assert one_batch_dips([10, 40, 30, 35, 60]) == set()  # 35 < 40: two batches below
    assert one_batch_dips([50, 60, 70], before=80) == set()  # 60 < 80: it did not make 50 up
    assert one_batch_dips([50, 90, 100], before=80) == {0}
    assert one_batch_dips([10, 20, 5]) == set()  # the newest: not yet told (lag_trend holds it)


def _growing_with(troughs: list[int]) -> tuple[str, str]:
    """The state and reason of a dagger whose batches (10 s, one read each, reading 100 rows) left ``troughs``."""
    from job.control.health_model import DaggerFacts, HealthSettings, Point, dagger_health

    n = len(troughs)
    points = tuple(
        Point(at=NOW - 10 * (n - 1 - i), input_rows=100 * i, lag=lag) for i, lag in enumerate(troughs)
    )
    progress = {"updated_at": NOW, "batch_at": NOW, "input_rows": 100 * (n - 1), "batch_duration_ms": 9000}
    f = DaggerFacts(
        desired_state="running",
        actual_state="running",
        started_at=NOW - 3600,
        progress=progress,
        lag=troughs[-1],
        lag_at=NOW,
        samples=points,
        controller_heartbeat=NOW,
    )
    h = dagger_health(f, NOW + 1, HealthSettings())
    return h.state, h.reason


def test_the_reason_names_the_dips_it_looked_past() -> None:
    """A dip the next batch made up, and a newest trough below the one before: still lagging, and the reason
    says what it looked past; a second lower trough is a fall."""
    made_up = [2000, 3000, 4000, 3500, 5000, 6000, 7000]
    assert _growing_with(made_up) == (
        LAGGING,
        "lag 7,000 growing over 6 batches in 50 s: after each batch but for 1 one-batch dip it was no lower than "
        "after the one before (3,000 → 7,000), and each time the next batch left records unread",
    )
    assert _growing_with([*made_up, 6500]) == (
        LAGGING,
        "lag 6,500 growing over 6 batches in 50 s: after each batch but for 1 one-batch dip it was no lower than "
        "after the one before (3,000 → 7,000; its newest batch's 6,500 is one batch, not yet a fall), and each "
        "time the next batch left records unread",
    )
    assert _growing_with([*made_up, 6500, 6800]) == (RUNNING, "reading")  # below 7000 for two batches: a fall
    assert _growing_with([*made_up, 0]) == (RUNNING, "reading")  # a zero is never held: it caught up
