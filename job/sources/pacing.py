"""Close windows in a short batch: when to plan one micro-batch with no new data.

Spark evicts the windows a batch's watermark closed in the *next* micro-batch. When new data is
waiting, that next batch is a full one (read, decode, update every open window's state, then
evict), so a window's result leaves about two batch times after the event that closed it arrived.
When no new data is waiting, Spark runs a *no-data* batch instead, which only evicts: a fraction of
a full batch.

A source that knows where the window boundaries fall (every ``period_ms`` of event time, closed
``delay_ms`` later by the watermark) can ask for that short batch: right after the first batch
planned once a boundary has passed in wall-clock time, it plans one batch with no new data. When
events arrive in real time, that first batch read the event that moved the watermark past the
boundary, and the empty batch closes the window at once. When they do not (a backlog, a replay),
the empty batch costs one eviction pass per window period and nothing is lost: the data waits for
the next trigger.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

SLACK_S = 0.25  # a batch planned this soon after a boundary may not hold the events sent at it yet


def boundary_before(t_s: float, period_ms: int, delay_ms: int) -> float:
    """Return the last boundary (seconds since the epoch) at or before ``t_s``: ``k * period + delay``."""
    period, delay = period_ms / 1000, delay_ms / 1000
    return math.floor((t_s - delay) / period) * period + delay


@dataclass
class ClosePacer:
    """Decides, at each plan of a micro-batch, whether to plan it empty (see the module docstring).

    ``period_ms`` 0 turns it off. Times are wall-clock seconds since the epoch, passed in by the
    caller so that the rule is a pure function of them.
    """

    period_ms: int = 0
    delay_ms: int = 0
    slack_s: float = SLACK_S
    _planned_at: float | None = field(default=None, init=False)  # the last plan that read new data
    _closed_for: float = field(default=-math.inf, init=False)  # the last boundary an empty batch was planned for

    @property
    def enabled(self) -> bool:
        """Whether the source has window boundaries to pace (a windowed aggregation)."""
        return self.period_ms > 0

    def hold(self, now_s: float) -> bool:
        """Return True when the batch planned at ``now_s`` should read nothing: the previous batch
        with data was planned at least ``slack_s`` after a boundary not yet closed by an empty batch."""
        if not self.enabled:
            return False
        if self._planned_at is None:
            self._closed_for = boundary_before(now_s - self.slack_s, self.period_ms, self.delay_ms)
            return False
        boundary = boundary_before(self._planned_at - self.slack_s, self.period_ms, self.delay_ms)
        if boundary <= self._closed_for:
            return False
        self._closed_for = boundary
        return True

    def planned(self, now_s: float) -> None:
        """Record that the batch planned at ``now_s`` reads new data."""
        self._planned_at = now_s
