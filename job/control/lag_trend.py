"""Is a dagger's lag growing? A trend over a window of micro-batches, never two samples.

A micro-batch engine's lag is a saw-tooth: it grows between batches and drops when a batch commits. Two
samples (the newest minus the oldest) read one tooth as growth, and so does a window of seconds that holds
one or two slow batches. As Burrow judges a consumer over a window of its last N commits (linkedin/Burrow,
``core/internal/evaluator``: OK as soon as any lag in the window is zero, a warning only when the lag never
goes down), this module judges the lag over the last micro-batches:

- each lag reading carries the batch it was read in (the rows read in all when it was read: a batch that
  read rows moves it); a batch's *trough* is its lowest reading, taken soon after its commit;
- the window holds at least :data:`MIN_BATCHES` batches: ``window_s`` when batches are fast, stretched back
  (up to ``max_window_s``) when they are slow; it is cut in thirds *by batches*, each holding at least
  :data:`MIN_PER_THIRD` of them;
- readings before a gap longer than ``max_gap_s`` (a controller that was down, brokers that did not
  answer) are not judged with those after it, and readings that ended more than ``max_gap_s`` ago are not
  judged at all.

The lag grows when the troughs rise third by third, the newest third's lowest trough clears the oldest
third's highest trough by ``min_growth``, and the troughs of the newest third do not fall (a dagger that
catches up after a stall does not read as growing). It is *not growing* when the newest third's lowest
trough came back down to the oldest third's highest. Otherwise the window does not tell. A bounded
saw-tooth, however tall its teeth, never grows; a dagger that falls behind does within a window. Pure:
plain numbers in, a verdict out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: The share of ``window_s`` the readings must span for a verdict (less: not enough evidence yet).
MIN_SPAN = 0.75
#: Batches each third of the window must hold: a third of one batch is one tooth, not a trend.
MIN_PER_THIRD = 2
#: Batches the window holds at least (it stretches back in time to hold them).
MIN_BATCHES = 3 * MIN_PER_THIRD

Reading = tuple[float, int | None, int]  # (at, lag, rows read in all when the lag was read)


@dataclass(frozen=True)
class LagTrend:
    """The lag troughs of one window: its span (s), its batches, the lowest trough of each third (oldest
    first), the highest trough of the oldest third, the lowest of all, the newest reading, and whether the
    newest third's troughs do not fall."""

    span_s: float
    batches: int
    lows: tuple[int, int, int]
    first_high: int
    low: int
    latest: int
    last_rising: bool = True

    def growing(self, min_growth: int) -> bool:
        """Return True when the troughs rise third by third, the newest third's lowest clears the oldest
        third's highest by at least ``min_growth`` records, and the newest third's troughs do not fall."""
        a, b, c = self.lows
        return a < b < c and c - self.first_high >= min_growth and self.last_rising

    def shrinking_or_flat(self) -> bool:
        """Return True when the newest third's lowest trough is not above the oldest third's highest: the lag
        came back down to where it was (evidence that it is not growing)."""
        return self.lows[2] <= self.first_high

    def reason(self) -> str:
        """Say what shows the growth: ``lag 19000 growing over 9 batches in 61 s: its lowest in the last 3
        batches (12000) is above its highest in the first 3 (4750)``."""
        return (
            f"lag {self.latest} growing over {self.batches} batches in {self.span_s:.0f} s: its lowest in the "
            f"newest third ({self.lows[2]}) is above its highest in the oldest third ({self.first_high})"
        )

    def not_growing(self) -> str:
        """Say what shows it does not grow: ``its lowest in the newest third (900) is not above its highest in
        the oldest third (1200), over 9 batches in 61 s``."""
        return (
            f"its lowest in the newest third ({self.lows[2]}) is not above its highest in the oldest third "
            f"({self.first_high}), over {self.batches} batches in {self.span_s:.0f} s"
        )


def after_gap(points: list[tuple[float, int, int]], max_gap_s: float) -> list[tuple[float, int, int]]:
    """Return the readings (sorted by time) after the last gap longer than ``max_gap_s`` between two of them."""
    for i in range(len(points) - 1, 0, -1):
        if points[i][0] - points[i - 1][0] > max_gap_s:
            return points[i:]
    return points


def troughs(points: list[tuple[float, int, int]]) -> list[tuple[float, int]]:
    """Return each batch's first reading time and lowest lag, oldest first: consecutive readings with the
    same rows read belong to one batch."""
    out: list[tuple[float, int]] = []
    key: int | None = None
    for at, lag, rows in points:
        if out and rows == key:
            out[-1] = (out[-1][0], min(out[-1][1], lag))
        else:
            out.append((at, lag))
            key = rows
    return out


def lag_trend(
    readings: Iterable[Reading],
    now: float,
    window_s: float,
    *,
    max_window_s: float | None = None,
    max_gap_s: float = float("inf"),
) -> LagTrend | None:
    """Return the trend of the lag readings ``(at, lag, rows read)`` up to ``now``, over the batches of the
    ``window_s`` before ``now``, stretched back up to ``max_window_s`` to hold :data:`MIN_BATCHES`; None when
    the readings (after the last gap longer than ``max_gap_s``, the newest no older than that) hold fewer
    batches, or span less than :data:`MIN_SPAN` of ``window_s``."""
    longest = max(window_s, max_window_s or window_s)
    points = after_gap(
        sorted(
            (at, int(lag), rows)
            for at, lag, rows in readings
            if lag is not None and now - longest <= at <= now
        ),
        max_gap_s,
    )
    if not points or now - points[-1][0] > max_gap_s:
        return None
    batches = troughs(points)
    start = len(batches) - sum(1 for at, _ in batches if at >= now - window_s)
    newest = points[-1][0]
    # stretch back, a batch at a time, until the window holds six batches and spans enough of window_s
    while start > 0 and (
        len(batches) - start < MIN_BATCHES or newest - batches[start][0] < window_s * MIN_SPAN
    ):
        start -= 1
    batches = batches[start:]
    if len(batches) < MIN_BATCHES or newest - batches[0][0] < window_s * MIN_SPAN:
        return None
    n = len(batches)
    thirds = [[lag for _, lag in batches[i * n // 3 : (i + 1) * n // 3]] for i in range(3)]
    a, b, c = (min(t) for t in thirds)
    return LagTrend(
        span_s=newest - batches[0][0],
        batches=n,
        lows=(a, b, c),
        first_high=max(thirds[0]),
        low=min(a, b, c),
        latest=points[-1][1],
        last_rising=thirds[2][-1] >= thirds[2][0],
    )
