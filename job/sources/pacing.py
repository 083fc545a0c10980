"""Close windows in a short batch: when to plan one micro-batch with no new data.

Spark evicts the windows a batch's watermark closed in the *next* micro-batch. When new data is
waiting, that next batch is a full one (read, decode, update every open window's state, then
evict), so a window's result leaves about two batch times after the event that closed it arrived.
When no new data is waiting, Spark runs a *no-data* batch instead, which only evicts: a fraction of
a full batch.

A source that knows where the window boundaries fall (every ``period_ms`` of event time, closed
``delay_ms`` later by the watermark) can ask for that short batch: right after planning a batch that
reads a record stamped at or past a boundary, it plans one batch with no new data. The stamp is the
Kafka record timestamp of the newest record the driver probed (``job.sources.offsets.probe_ends``):
the event time when producers set it, as ``daggers produce`` does, else the time the record was
sent. When the two differ, the empty batch may come a batch early (it closes nothing) or late (the
window closes as it would without it); nothing is lost either way, the data waits one trigger.

**Reading at window close** (``read_at_close``, the spec's ``read_at_window_close``): a windowed query
in append mode writes nothing until a window closes, so the batches between two boundaries only move
records into the window state. With it, the source plans new data only when the newest record waiting
is stamped past the boundary after the newest record read so far (:meth:`ClosePacer.worth_reading`),
or once a period of wall time has passed since the last read. A window then costs about two
micro-batches (the read that crosses its boundary, and the short one that closes it) instead of one
per trigger, and its result leaves as early as before: what a light dagger in a shared application
needs, where each micro-batch costs a few hundred milliseconds of CPU whatever its size.

**Gathering** (``gather_s``): the same idea for a heavy dagger, whose windows must close within seconds. Far
from a boundary, the source plans new data only every ``gather_s`` of wall time, so a micro-batch holds
that many seconds of records; once the newest record waiting is stamped within ``gather_s`` of the next
boundary, it reads at every trigger again, so the batch that reads the closing record is as small and
quick as without it. (Holding instead until the closing record waits, so that it never waits for a batch
under way, was tried and measured worse: the closing batch then held 2-9 s of records instead of 1-2, and
took 1.7-2.6 s instead of 1.0-1.5, more than the short batch it no longer waited for.) How long before the
boundary is the *lead*: a gathered batch planned just before the lead must have ended by the boundary, or the batch that reads the closing record waits for it. So the lead follows
the source's own measure of its gathered batches: the wall time from planning one to planning the next
(Spark plans the next micro-batch when the last one ended), the longest of the last ``LEAD_SAMPLES`` times
``LEAD_FACTOR`` plus ``LEAD_MARGIN_S``; ``gather_s`` until one has been measured. A slow machine, a cold JIT or a
larger batch lengthens the lead; a quick batch lets records gather longer. Much of a windowed aggregation's work in a micro-batch is per window key it touches
(the state store's read and write of the key's whole state, the sort, the shuffle) and per batch (its
planning, the state store's scan for windows to evict), and a batch of 4 s touches hardly more keys than
one of 1 s: gathering spreads that work over more records.

**No batch without new data, but the ones that close a window** (a gathering source's query,
``job.query.runner.eviction_conf``): Spark runs a no-data micro-batch after every batch that moved the
watermark, so after every gathered read it ran one more (its planning, the state store's scan for windows to
evict and its commit) that closed nothing. Such a query turns them off, and its source asks for the ones that
close a window by moving the tick in its offsets on (``job.sources.kafka.TICK_KEY``): when :meth:`ClosePacer.hold`
says so, and once when nothing new waits after a batch that read records (record timestamps that are not event
times can hide a boundary from the pacer; a quiet topic's last windows close then).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

#: The lead of a gathering source (how long before a boundary it reads at every trigger again) is this many
#: times the longest of its last ``LEAD_SAMPLES`` gathered micro-batches, plus ``LEAD_MARGIN_S``.
LEAD_FACTOR = 1.5
LEAD_MARGIN_S = 0.5
LEAD_SAMPLES = 3


def boundary_before(t_s: float, period_ms: int, delay_ms: int) -> float:
    """Return the last boundary (seconds since the epoch) at or before ``t_s``: ``k * period + delay``."""
    period, delay = period_ms / 1000, delay_ms / 1000
    return math.floor((t_s - delay) / period) * period + delay


def stamps_stalled(near_s: float, lead_s: float, took_s: float) -> bool:
    """Return whether the stamps stopped following the clock before a boundary: the source has been within
    ``lead_s`` of it ``near_s`` seconds, longer than stamps that move with the clock allow (the lead, then
    twice the last reading batch, ``took_s``, plus ``LEAD_MARGIN_S``): a producer that stopped, a partition
    that runs ahead of the others and stopped, a replay slower than the clock."""
    return near_s >= lead_s + 2 * took_s + LEAD_MARGIN_S


@dataclass
class ClosePacer:
    """Decides, at each plan of a micro-batch, whether to plan it empty (see the module docstring).

    ``period_ms`` 0 turns it off. Times are record timestamps in seconds since the epoch.
    """

    period_ms: int = 0
    delay_ms: int = 0
    read_at_close: bool = False
    gather_s: float = 0.0  # far from a boundary, plan new data at most this often (0: at every trigger)
    _newest_s: float | None = field(default=None, init=False)  # the newest record a planned batch reads
    _read_at: float | None = field(
        default=None, init=False
    )  # when (monotonic s) a batch last planned new data
    _closed_for: float = field(
        default=-math.inf, init=False
    )  # the last boundary an empty batch was planned for
    _timing: bool = field(default=False, init=False)  # a gathered batch planned, its end not seen yet
    _took: deque[float] = field(
        default_factory=lambda: deque(maxlen=LEAD_SAMPLES), init=False
    )  # wall seconds of the last gathered batches
    _reading: bool = field(default=False, init=False)  # a batch that reads planned, its end not seen yet
    _last_took: float | None = field(default=None, init=False)  # wall seconds of the last batch that read
    _near: tuple[float, float] = field(
        default=(-math.inf, 0.0), init=False
    )  # the boundary it came within the lead of, and when (monotonic s)
    _stalled: float = field(
        default=-math.inf, init=False
    )  # the last boundary the stamps stalled before (see stamps_stalled)

    @property
    def enabled(self) -> bool:
        """Whether the source has window boundaries to pace (a windowed aggregation)."""
        return self.period_ms > 0

    def hold(self) -> bool:
        """Return True when the batch to plan now should read nothing: a batch planned before read a record
        at or past a boundary that no empty batch has followed yet."""
        if not self.enabled or self._newest_s is None:
            return False
        boundary = boundary_before(self._newest_s, self.period_ms, self.delay_ms)
        if boundary <= self._closed_for:
            return False
        self._closed_for = boundary
        return True

    def plan_starts(self, now_s: float) -> None:
        """Record that a micro-batch is being planned at monotonic ``now_s``: the batch planned before it has
        ended. The first plan after a gathered read times that read (see :meth:`lead_s`)."""
        if self._timing and self._read_at is not None:
            self._took.append(max(0.0, now_s - self._read_at))
        if self._reading and self._read_at is not None:
            self._last_took = max(0.0, now_s - self._read_at)
        self._timing = self._reading = False

    def lead_s(self) -> float:
        """Return how long before a boundary a gathering source reads at every trigger: ``LEAD_FACTOR`` times
        the longest of its last gathered batches plus ``LEAD_MARGIN_S`` (``gather_s`` before one was timed),
        at most one window period."""
        if not self._took:
            return self.gather_s
        return min(LEAD_FACTOR * max(self._took) + LEAD_MARGIN_S, self.period_ms / 1000)

    def planned(self, newest_s: float | None, now_s: float = 0.0) -> None:
        """Record that the batch just planned (at monotonic ``now_s``) reads records up to one stamped
        ``newest_s`` (None: not known, e.g. a batch capped by a read limit)."""
        # a gathered read: records waited gather_s since the last read, the newest of both known (not the
        # first read, nor a capped one while catching up)
        self._timing = (
            self.gather_s > 0
            and not self.read_at_close
            and newest_s is not None
            and self._newest_s is not None
            and self._read_at is not None
            and now_s - self._read_at >= self.gather_s
        )
        self._read_at = now_s
        self._reading = True
        if newest_s is not None:
            self._newest_s = newest_s if self._newest_s is None else max(self._newest_s, newest_s)

    def worth_reading(self, newest_s: float | None, now_s: float) -> bool:
        """With ``read_at_close`` or ``gather_s``: whether the batch to plan at monotonic ``now_s`` should read
        the records waiting, the newest stamped ``newest_s`` (None: not known). Always True without either
        or without windows, for the first read, for a newest record not known, when ``newest_s`` (plus
        :meth:`lead_s` when gathering) is past the boundary after the newest record read so far, and a period
        (``gather_s`` when gathering) of wall time after the last read.

        Gathering, a stay within the lead longer than the lead and twice the last reading batch means the
        stamps do not follow the clock (the newest one can stay put while records come, as when a partition
        ahead of the others stops): until that boundary is read past, it reads every ``gather_s`` as far from
        one, not at every trigger."""
        if self.read_at_close:
            wait_s = self.period_ms / 1000
        elif self.gather_s > 0:
            wait_s = self.gather_s
        else:
            return True
        if not self.enabled or self._newest_s is None or newest_s is None or self._read_at is None:
            return True
        boundary = boundary_before(self._newest_s, self.period_ms, self.delay_ms) + self.period_ms / 1000
        if newest_s >= boundary:
            return True  # the record that closes the window is waiting
        if self.read_at_close or newest_s + self.lead_s() < boundary:
            return now_s - self._read_at >= wait_s
        # within the lead of the boundary: at every trigger, unless the stamps stalled
        if self._near[0] != boundary:
            self._near = (boundary, now_s)
        took = self._last_took if self._last_took is not None else self.lead_s()
        if self._stalled < boundary and stamps_stalled(now_s - self._near[1], self.lead_s(), took):
            self._stalled = boundary
        if self._stalled >= boundary:  # gather as far from a boundary until it is read past
            return now_s - self._read_at >= wait_s
        return True
