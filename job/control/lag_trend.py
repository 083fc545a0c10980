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

The lag grows, as Burrow's warning, only when no reading in the window is zero, each batch's trough is at
least the one before (it never went down from one batch to the next), the newest clears the oldest by
``min_growth``, and the dagger falls behind. A state changes only on evidence that outlasts one micro-batch,
so a *one-batch dip* is not a fall:

- a trough below the one before that the next batch made up (its trough at least the one before the dip)
  is left out of the troughs compared; at most a third of the window's batches may be such dips (more is a
  saw-tooth, not a trend);
- a newest trough below the one before, when that one was not itself below its own predecessor, is one
  batch, not yet evidence: the trend is the window's as of the batch before (``held``: the newest trough),
  until the next batch tells a dip (made up) from a fall (lower again).

The dagger falls behind when:

- it left records behind: each batch's trough (but the newest) is above the rows the next batch read, by
  more than arrives between two lag readings (a trough is read a little after its commit). A batch reads
  all that waits when it starts, unless the dagger reads less than arrives (a capped batch). Slow batches
  raise the troughs (a trough is the arrivals of about one batch) but never leave records behind;
- or the newest trough holds more than ``window_s`` of arrivals: a dagger whose batches read all that waits
  but grow slower with what they read. A trough of slow batches holds about one batch of arrivals (and
  the lag read a few seconds after it); so the troughs must have risen before the newest one too: one
  long batch (the first after a restart on a busy machine) among short ones is one batch, not evidence.

The lag *falls* when the newest trough is below the oldest. Otherwise the window does not tell. Pure: plain
numbers in, a verdict out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

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
    first), the highest trough of the oldest third, the lowest of all, the newest reading, the troughs of
    the first and the newest batch, how often a trough went down from one batch to the next (one-batch dips
    aside), how many one-batch dips the next batch made up, the first and the newest trough but for those,
    the newest batch's trough when it dipped and the trend is the batch before's, how many batches' waiting
    records the next batch did not read (of how many that can tell), and whether a reading was zero."""

    span_s: float
    batches: int
    lows: tuple[int, int, int]
    first_high: int
    low: int
    latest: int
    first: int = 0
    last: int = 0
    decreases: int = 0
    dips: int = 0
    ends: tuple[int, int] = (0, 0)
    held: int | None = None
    left_behind: int = 0
    judged: int = 0
    zero: bool = False
    arrival_per_s: float = 0.0
    horizon_s: float = 0.0
    #: how far the trough before the newest is above the first (dips left out)
    risen: int = field(default=0, compare=False)

    def growing(self, min_growth: int) -> bool:
        """Return True when no reading was zero, no trough went down from one batch to the next (one-batch
        dips aside, at most a third of the batches), the newest clears the first by at least ``min_growth``
        records (dips left out), and every batch that can tell left records that the next batch did not
        read, or the newest trough holds more than the window's arrivals and the troughs rose before it too
        (one long batch is not evidence)."""
        return (
            not self.zero
            and self.decreases == 0
            and self.dips <= self.batches // 3
            and self.ends[1] - self.ends[0] >= min_growth
            and (self.judged > 0 and self.left_behind == self.judged or self.over_window() and self.risen > 0)
        )

    def over_window(self) -> bool:
        """Return True when the newest trough holds more than ``window_s`` of arrivals (the span when no
        window is given): more than a slow batch leaves (a dagger whose batches read all that waits, but grow
        slower with what they read)."""
        horizon = self.horizon_s or self.span_s
        return self.arrival_per_s > 0 and self.ends[1] > self.arrival_per_s * horizon

    def falling(self) -> bool:
        """Return True when the newest batch's trough is below the first one's: the lag came down (a newest
        trough held as one batch, :attr:`held`, counts: it is lower still than the batch before's)."""
        return (self.held if self.held is not None else self.last) < self.first

    def shrinking_or_flat(self) -> bool:
        """Return True when the newest third's lowest trough is not above the oldest third's highest."""
        return self.lows[2] <= self.first_high

    def reason(self, lag: int | None = None) -> str:
        """Say what shows the growth, with ``lag``, the lag the dagger's view shows (None: no lag read now):
        ``lag 19,000 growing over 9 batches in 61 s: after each batch it was no lower than after the one before
        (4,750 → 12,000), and each time the next batch left records unread``."""
        evidence = (
            "and each time the next batch left records unread"
            if self.judged > 0 and self.left_behind == self.judged
            else f"and it holds more than {self.horizon_s or self.span_s:.0f} s of arrivals "
            f"({self.arrival_per_s:,.0f}/s)"
        )
        dips = f" but for {self.dips} one-batch dip{'s' if self.dips != 1 else ''}" if self.dips else ""
        held = (
            f"; its newest batch's {self.held:,} is one batch, not yet a fall"
            if self.held is not None
            else ""
        )
        now = f"lag {lag:,}" if lag is not None else "lag (not read now)"
        return (
            f"{now} growing over {self.batches} batches in {self.span_s:.0f} s: after each batch"
            f"{dips} it was no lower than after the one before ({self.ends[0]:,} → {self.ends[1]:,}{held}), "
            f"{evidence}"
        )

    def not_growing(self) -> str:
        """Say what shows it comes down: ``after its batches it fell from 50,000 to 44,000, over 7 batches in
        60 s``."""
        if self.held is not None:
            return (
                f"after its batches it fell from {self.first:,} to {self.held:,} (its newest batch's), over "
                f"{self.batches} batches in {self.span_s:.0f} s before it"
            )
        return (
            f"after its batches it fell from {self.first:,} to {self.last:,}, over {self.batches} batches in "
            f"{self.span_s:.0f} s"
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
    return [(at, lag) for at, lag, _ in batch_troughs(points)]


def batch_troughs(points: list[tuple[float, int, int]]) -> list[tuple[float, int, int]]:
    """Return each batch's first reading time, lowest lag and rows read in all, oldest first."""
    out: list[tuple[float, int, int]] = []
    for at, lag, rows in points:
        if out and rows == out[-1][2]:
            out[-1] = (out[-1][0], min(out[-1][1], lag), rows)
        else:
            out.append((at, lag, rows))
    return out


def one_batch_dips(lags: list[int], before: int | None = None) -> set[int]:
    """Return the indexes of the one-batch dips of the troughs ``lags`` (oldest first; ``before``: the trough
    of the batch before them, when known) that the next batch made up: a trough below the one before it,
    whose next trough is at least that one."""
    out = set()
    for i, lag in enumerate(lags[:-1]):
        prior = lags[i - 1] if i > 0 else before
        if prior is not None and lag < prior <= lags[i + 1]:
            out.add(i)
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
    batches, or span less than :data:`MIN_SPAN` of ``window_s``. A newest trough below the one before (not
    itself below its own) holds the trend of the batch before, see the module docstring."""
    readings = list(readings)
    trend = _window_trend(readings, now, window_s, max_window_s, max_gap_s)
    if trend is None:
        return None
    troughs_ = trend[1]  # a zero is never held: the dagger caught up (Burrow's OK)
    if len(troughs_) >= 3 and 0 < troughs_[-1][1] < troughs_[-2][1] and troughs_[-2][1] >= troughs_[-3][1]:
        newest_at = troughs_[-1][0]
        before = _window_trend(
            [r for r in readings if r[0] < newest_at], newest_at, window_s, max_window_s, max_gap_s
        )
        if before is not None:
            return replace(before[0], latest=trend[0].latest, held=troughs_[-1][1])
    return trend[0]


def _window_trend(
    readings: list[Reading], now: float, window_s: float, max_window_s: float | None, max_gap_s: float
) -> tuple[LagTrend, list[tuple[float, int, int]]] | None:
    """Return the trend of the window ending at ``now`` (see :func:`lag_trend`, but for a held dip) and the
    troughs it judged back to the batch before the window, when there is one."""
    longest = max(window_s, max_window_s or window_s)
    points = after_gap(
        sorted((at, int(lag), rows) for at, lag, rows in readings if lag is not None and at <= now),
        max_gap_s,
    )
    if not points or now - points[-1][0] > max_gap_s:
        return None
    # whole batches only: one that began before the longest window would show a late reading as its trough
    batches = [b for b in batch_troughs(points) if b[0] >= now - longest]
    points = [p for p in points if p[0] >= now - longest]
    if not batches:
        return None
    start = len(batches) - sum(1 for at, _, _ in batches if at >= now - window_s)
    newest = points[-1][0]
    # stretch back, a batch at a time, until the window holds six batches and spans enough of window_s
    while start > 0 and (
        len(batches) - start < MIN_BATCHES or newest - batches[start][0] < window_s * MIN_SPAN
    ):
        start -= 1
    before = batches[start - 1][1] if start > 0 else None
    judged_troughs = batches[max(start - 1, 0) :]
    batches = batches[start:]
    if len(batches) < MIN_BATCHES or newest - batches[0][0] < window_s * MIN_SPAN:
        return None
    n = len(batches)
    lags = [lag for _, lag, _ in batches]
    dips = one_batch_dips(lags, before)
    kept = [lag for i, lag in enumerate(lags) if i not in dips]
    thirds = [lags[i * n // 3 : (i + 1) * n // 3] for i in range(3)]
    a, b, c = (min(t) for t in thirds)
    elapsed = batches[-1][0] - batches[0][0]
    arrived = batches[-1][2] - batches[0][2] + lags[-1] - lags[0]  # rows read and lag gained
    rate = arrived / elapsed if elapsed > 0 and arrived > 0 else 0.0
    # a batch left records behind when its trough is above what the next batch read by more than what
    # arrived between two readings (a trough is read a little after its commit, when the next batch runs)
    window = [p for p in points if p[0] >= batches[0][0]]
    slack = rate * max((b[0] - a[0] for a, b in zip(window, window[1:], strict=False)), default=0.0)
    judged = [(lag - slack, batches[i + 1][2] - rows) for i, (_, lag, rows) in enumerate(batches[:-1])]
    return LagTrend(
        span_s=newest - batches[0][0],
        batches=n,
        lows=(a, b, c),
        first_high=max(thirds[0]),
        low=min(a, b, c),
        latest=points[-1][1],
        first=lags[0],
        last=lags[-1],
        decreases=sum(1 for x, y in zip(kept, kept[1:], strict=False) if y < x),
        dips=len(dips),
        ends=(kept[0], kept[-1]),
        risen=kept[-2] - kept[0] if len(kept) >= 2 else 0,
        left_behind=sum(1 for lag, read in judged if read >= 0 and lag > read),
        judged=len(judged),
        zero=any(lag == 0 for at, lag, _ in points if at >= batches[0][0]),
        arrival_per_s=rate,
        horizon_s=window_s,
    ), judged_troughs


@dataclass(frozen=True)
class NewestTrough:
    """The newest batch's trough of readings too few for a trend: its lag, the batches read, their span (s), and
    the first of those batches' trough."""

    lag: int
    batches: int
    span_s: float
    first: int | None = None

    def falling(self) -> bool:
        """Return True when the batches show the lag falling: more than one, the newest trough below the
        first."""
        return self.batches > 1 and self.first is not None and self.lag < self.first

    def not_growing(self) -> str:
        """Say what shows it comes down: ``after its batches it fell from 1,980,000 to 1,840,000, over 8
        batches in 42 s``."""
        return (
            f"after its batches it fell from {self.first or 0:,} to {self.lag:,}, over {self.batches} batches in "
            f"{self.span_s:.0f} s"
        )


def newest_trough(
    readings: Iterable[Reading], now: float, window_s: float, max_gap_s: float = float("inf")
) -> NewestTrough | None:
    """Return the newest batch's trough (its lowest lag reading) of the readings of the ``window_s`` up to
    ``now`` after the last gap longer than ``max_gap_s``, with how many batches they hold and their span (the
    first batch's first reading to the newest reading); None when there is none, or the newest is older
    than ``max_gap_s``. A dagger whose batches are too slow for :func:`lag_trend` (fewer than
    :data:`MIN_BATCHES` in its longest window: a fused group's) is still judged by it."""
    points = after_gap(
        sorted((at, int(lag), rows) for at, lag, rows in readings if lag is not None and at <= now), max_gap_s
    )
    if not points or now - points[-1][0] > max_gap_s:
        return None
    # whole batches only, as lag_trend counts them; the newest is always judged
    every = batch_troughs(points)
    batches = [b for b in every if b[0] >= now - window_s] or every[-1:]
    return NewestTrough(
        lag=batches[-1][1], batches=len(batches), span_s=points[-1][0] - batches[0][0], first=batches[0][1]
    )
