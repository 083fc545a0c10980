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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


def boundary_before(t_s: float, period_ms: int, delay_ms: int) -> float:
    """Return the last boundary (seconds since the epoch) at or before ``t_s``: ``k * period + delay``."""
    period, delay = period_ms / 1000, delay_ms / 1000
    return math.floor((t_s - delay) / period) * period + delay


@dataclass
class ClosePacer:
    """Decides, at each plan of a micro-batch, whether to plan it empty (see the module docstring).

    ``period_ms`` 0 turns it off. Times are record timestamps in seconds since the epoch.
    """

    period_ms: int = 0
    delay_ms: int = 0
    _newest_s: float | None = field(default=None, init=False)  # the newest record a planned batch reads
    _closed_for: float = field(default=-math.inf, init=False)  # the last boundary an empty batch was planned for

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

    def planned(self, newest_s: float) -> None:
        """Record that the batch just planned reads records up to one stamped ``newest_s``."""
        self._newest_s = newest_s if self._newest_s is None else max(self._newest_s, newest_s)
