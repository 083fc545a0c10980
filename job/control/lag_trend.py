"""Is a dagger's lag growing? A trend over a window of lag readings, never two samples.

A micro-batch engine's lag is a saw-tooth: it grows between batches and drops when a batch commits. Two
samples (the newest minus the oldest) read one tooth as growth. As Burrow judges a consumer over a window
of commits (linkedin/Burrow, ``core/internal/evaluator``: OK as soon as any lag in the window is zero, a
warning only when the lag never goes down), this module looks at the lag's *lows*: the window is cut in
thirds, and the lag grows only when

- the lowest lag of each third is above the one before (the troughs rise), and
- the lowest lag of the newest third is above the *highest* of the oldest third: it never came back down
  to where it was.

A bounded saw-tooth, however tall, never does both; a dagger that falls behind does within a window. A
lag of zero anywhere in the window means it keeps up. Pure: plain numbers in, a verdict out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The share of the window the readings must span for a verdict (less: not enough evidence yet).
MIN_SPAN = 0.75


@dataclass(frozen=True)
class LagTrend:
    """The lag readings of one window: their span, the lowest lag of each third (oldest first), the highest
    of the oldest third, the lowest of all and the newest."""

    span_s: float
    lows: tuple[int, int, int]
    first_high: int
    low: int
    latest: int

    def growing(self, min_growth: int) -> bool:
        """Return True when the troughs rise third by third, the newest third's lowest lag is above the
        oldest third's highest, and it grew by at least ``min_growth`` records."""
        a, b, c = self.lows
        return a < b < c and c > self.first_high and c - a >= min_growth

    def reason(self) -> str:
        """Say what shows the growth: ``lag 9800: the lowest of the last 20 s (8100) is above the highest of the
        first 20 s (4100)``."""
        third = self.span_s / 3
        return (
            f"lag {self.latest} growing: its lowest in the last {third:.0f} s ({self.lows[2]}) is above its "
            f"highest in the first {third:.0f} s ({self.first_high})"
        )


def lag_trend(readings: Iterable[tuple[float, int | None]], now: float, window_s: float) -> LagTrend | None:
    """Return the trend of the lag readings ``(at, lag)`` taken in the ``window_s`` before ``now``, or None
    when they span less than :data:`MIN_SPAN` of the window or leave a third of it without a reading."""
    points = sorted((at, int(lag)) for at, lag in readings if lag is not None and now - window_s <= at <= now)
    if len(points) < 3:
        return None
    start, span = points[0][0], points[-1][0] - points[0][0]
    if span < window_s * MIN_SPAN:
        return None
    thirds: tuple[list[int], list[int], list[int]] = ([], [], [])
    for at, lag in points:
        thirds[min(int((at - start) * 3 / span), 2)].append(lag)
    if not all(thirds):
        return None
    a, b, c = (min(t) for t in thirds)
    return LagTrend(
        span_s=span, lows=(a, b, c), first_high=max(thirds[0]), low=min(a, b, c), latest=points[-1][1]
    )
