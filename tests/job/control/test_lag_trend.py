"""Properties of the lag trend (job.control.lag_trend): a bounded saw-tooth is never growing, however tall
and however its teeth fall; a lag that climbs faster than its teeth are tall always is."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from job.control.lag_trend import lag_trend

NOW = 1_000_000.0
WINDOW = 60.0


def _teeth(lows: list[int], highs: list[int], start: float, tooth_s: float) -> list[tuple[float, int]]:
    """Readings of teeth back to back: each tooth is read at its low, halfway, and at its high."""
    out = []
    for i, (low, high) in enumerate(zip(lows, highs, strict=True)):
        at = start + i * tooth_s
        out += [(at, low), (at + tooth_s / 3, (low + high) // 2), (at + 2 * tooth_s / 3, high)]
    return out


@settings(max_examples=300, deadline=None)
@given(bound=st.integers(1, 1_000_000), teeth=st.integers(6, 30), data=st.data())
def test_a_bounded_saw_tooth_is_never_growing(bound: int, teeth: int, data: st.DataObject) -> None:
    """Every tooth's low is at most ``bound`` and its high at least ``bound``: however the lows and highs
    fall, the lows of the newest third never clear the highs of the oldest."""
    lows = data.draw(st.lists(st.integers(0, bound), min_size=teeth, max_size=teeth))
    highs = data.draw(st.lists(st.integers(bound, 3 * bound), min_size=teeth, max_size=teeth))
    tooth_s = WINDOW / teeth
    trend = lag_trend(_teeth(lows, highs, NOW - WINDOW, tooth_s), NOW, WINDOW)
    assert trend is not None
    assert not trend.growing(1)


@settings(max_examples=300, deadline=None)
@given(
    rate=st.integers(100, 100_000), teeth=st.integers(6, 30), base=st.integers(0, 10_000_000), data=st.data()
)
def test_a_lag_climbing_faster_than_its_teeth_are_tall_is_growing(
    rate: int, teeth: int, base: int, data: st.DataObject
) -> None:
    """The lag grows by ``rate`` records a second; each tooth is less tall than what the lag grows in a
    third of the window: a dagger falling behind is lagging within one window."""
    tooth_s = WINDOW / teeth
    heights = data.draw(
        st.lists(st.integers(0, int(rate * WINDOW / 3 * 0.9)), min_size=teeth, max_size=teeth)
    )
    lows = [base + int(rate * i * tooth_s) for i in range(teeth)]
    trend = lag_trend(
        _teeth(lows, [lo + h for lo, h in zip(lows, heights, strict=True)], NOW - WINDOW, tooth_s),
        NOW,
        WINDOW,
    )
    assert trend is not None
    assert trend.growing(1), trend
