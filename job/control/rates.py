"""A dagger's pace from its progress samples: rows read per second of wall time, and how far apart its
micro-batches come. Pure functions over ``(at, rows read in all)`` pairs.

Spark reports a rate per micro-batch: ``inputRowsPerSecond`` is the batch's rows over the time since the
batch before, and 0 for a batch that found nothing new (a no-data batch), while a batch's rows over its own
duration is a processing rate, not what arrives (25,000 rows/s shown for a producer sending 3,000). The
rate shown is the rows read over a window of batches divided by the wall time the window spans: never one
batch, never one empty batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Protocol


class Counted(Protocol):
    """A progress sample: when, and the rows read in all so far."""

    @property
    def at(self) -> float: ...

    @property
    def input_rows(self) -> int: ...


@dataclass(frozen=True)
class Rate:
    """Rows read per second over ``since``..``until`` (the samples' times)."""

    rows_per_s: float
    since: float
    until: float


def batch_times(samples: Sequence[Counted]) -> list[float]:
    """Return when each batch that read rows was reported: the samples whose rows read in all went up."""
    return [b.at for a, b in zip(samples, samples[1:], strict=False) if b.input_rows > a.input_rows]


def batch_interval(samples: Sequence[Counted], batch_s: float = 0.0) -> float:
    """Return the time between two micro-batches: the median gap between the batches the samples show,
    and at least ``batch_s`` (the last batch's duration)."""
    times = batch_times(samples)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    return max(median(gaps) if gaps else 0.0, batch_s)


def rows_rate(samples: Sequence[Counted], window_s: float) -> Rate | None:
    """Return the rows read per second of wall time over the newest ``window_s`` of ``samples`` (sorted by
    time): from the newest sample back to the newest one at least ``window_s`` older (or the oldest), with
    each rise of the rows read in all counted (a count that went back, a new checkpoint, counts from there).
    None with fewer than two samples apart in time."""
    if len(samples) < 2:
        return None
    until = samples[-1].at
    start = 0
    for i, sample in enumerate(samples):
        if sample.at <= until - window_s:
            start = i
    window = samples[start:]
    rows = sum(max(b.input_rows - a.input_rows, 0) for a, b in zip(window, window[1:], strict=False))
    # The first batch counted read what arrived since the batch before it: the span starts when the count
    # the window starts from was first reported, not at a later sample of the same count (three batches'
    # rows over less than three batches' time read a third too high).
    while start > 0 and samples[start - 1].input_rows == samples[start].input_rows:
        start -= 1
    since = samples[start].at
    # and it ends at the newest batch, unless no batch came for longer than batches come: the time since then
    # read nothing (a window ending between two batches counts the wait without the rows it brings)
    rises = batch_times(samples[start:])
    end = max(rises[-1], until - batch_interval(samples)) if rises else until
    if end - since <= 0:
        return None
    return Rate(rows_per_s=rows / (end - since), since=since, until=until)


def rate_series(samples: Sequence[Counted], window_s: float) -> list[float]:
    """Return, for each sample after the first, :func:`rows_rate` over the samples up to it (for a chart)."""
    out: list[float] = []
    for i in range(1, len(samples)):
        start = i - 1
        while start > 0 and samples[i].at - samples[start - 1].at <= window_s:
            start -= 1
        rate = rows_rate(samples[max(start - 1, 0) : i + 1], window_s)
        out.append(round(rate.rows_per_s, 1) if rate is not None else 0.0)
    return out
