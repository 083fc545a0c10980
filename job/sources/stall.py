"""Noticing a range read that stops moving, and what the Kafka client said meanwhile.

A task reads a range of offsets that the driver saw on the broker, so its records exist. When a
read stops moving anyway (a fetch the broker never answers, a consumer that went back to an older
offset, an offset the broker calls out of range for a moment), the reader does not wait out its
whole ``read_timeout_s``: every ``RESEEK_AFTER_S`` without a record it assigns the partition again
at the next offset it needs, on a new consumer (new connections: a request the broker never answers
holds up every later answer on its connection). A re-seek after a read that got no record at all also
makes the new consumer's fetches wait longer (job.sources.read.PATIENT_WAITS_MS): tansu answers a fetch
empty when listing the partition's batches outlasts the fetch's max wait (issue 36). What librdkafka
logged meanwhile goes into the notice and into the error raised at the timeout, so a stall names its cause.

A slow machine makes a read slower, never failed: the read timeout counts only the time this process
could have run. A heartbeat thread (:class:`Starvation`) sleeps a short tick over and over and adds up
how late it wakes: time in which the process (and, on a machine whose cores are all taken, the broker
too) got no CPU. :class:`StallWatch` takes that lost time off a stall before it compares it with
``read_timeout_s`` ("the broker returns nothing" against "this process got no CPU").
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

RESEEK_AFTER_S = 2.5  # seconds without a record before the reader assigns the partition again
RESEEK_OUT_OF_RANGE_S = 0.5  # ... when the broker called it out of range, or the consumer went back
CLIENT_LOG_KEEP = 5  # librdkafka messages kept for the notice
HEARTBEAT_S = 0.1  # the starvation heartbeat's tick
HEARTBEAT_SLACK_S = 0.05  # lateness a tick may have before it counts as time without CPU


class ClientLog(logging.Handler):
    """Keeps the last few warnings and errors librdkafka logged (``logger`` in its config) or
    reported (``error_cb``) for one consumer."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.recent: deque[str] = deque(maxlen=CLIENT_LOG_KEEP)

    def emit(self, record: logging.LogRecord) -> None:
        self.recent.append(record.getMessage())

    def error(self, err: object) -> None:
        """librdkafka's ``error_cb``: a client-wide error such as all brokers down."""
        self.recent.append(str(err))

    def line(self, level: int, text: str) -> None:
        """A line librdkafka logged at syslog ``level`` (kept from warnings up: 4 and below)."""
        if level <= 4:
            self.recent.append(text)

    def logger(self, name: str) -> logging.Logger:
        """A logger that feeds this handler only: outside logging's registry (so it goes with its consumer,
        however many consumers a worker makes) and not propagated to the root."""
        out = logging.Logger(f"daggers.source.kafka.client.{name}", logging.WARNING)
        out.propagate = False
        out.addHandler(self)
        return out

    def said(self) -> str:
        """What the client said lately, or that it said nothing."""
        return "; ".join(self.recent) if self.recent else "the Kafka client logged nothing"


class Starvation:
    """Time this process got no CPU, measured by a heartbeat: a daemon thread that sleeps ``tick_s`` in a
    loop and adds up how much later than ``tick_s + slack_s`` it woke (a process that is not scheduled
    wakes late). :meth:`lost` is the running total in seconds; the thread starts on the first call.

    ``clock`` and :meth:`beat` make the rule testable without a thread: ``beat(now)`` is one wake-up."""

    def __init__(
        self,
        tick_s: float = HEARTBEAT_S,
        slack_s: float = HEARTBEAT_SLACK_S,
        clock: Callable[[], float] = time.monotonic,
        thread: bool = True,
    ) -> None:
        self.tick_s, self.slack_s, self._clock = tick_s, slack_s, clock
        self._lost = 0.0
        self._last = clock()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._want_thread = thread

    def beat(self, now: float) -> float:
        """Record a wake-up at ``now``; return the time it counted as lost (its lateness past the slack)."""
        with self._lock:
            late = max(0.0, now - self._last - self.tick_s - self.slack_s)
            self._lost += late
            self._last = now
            return late

    def lost(self) -> float:
        """Return the seconds without CPU seen so far (starting the heartbeat on the first call)."""
        if self._want_thread and self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._last = self._clock()
                    self._thread = threading.Thread(target=self._run, name="daggers-starvation", daemon=True)
                    self._thread.start()
        with self._lock:
            return self._lost

    def _run(self) -> None:
        while True:
            time.sleep(self.tick_s)
            self.beat(self._clock())


_STARVATION: Starvation | None = None


_STARVATION_PID = 0


def starvation() -> Starvation:
    """The process's one heartbeat (started when first asked for the lost time; a new one in a forked child,
    where the parent's thread does not run)."""
    global _STARVATION, _STARVATION_PID
    if _STARVATION is None or os.getpid() != _STARVATION_PID:
        _STARVATION, _STARVATION_PID = Starvation(), os.getpid()
    return _STARVATION


@dataclass
class StallWatch:
    """The clock of one range read: when it last moved, and when to assign it again.

    ``now`` comes from the caller (``time.monotonic()``), so the rule is testable without waiting; so does
    ``lost``, the process's running total of time without CPU (:meth:`Starvation.lost`): the timeout counts
    a stall's wall time less what was lost in it, so a starved process waits longer instead of failing.
    """

    timeout_s: float
    reseek_after_s: float = RESEEK_AFTER_S
    started: float = field(default_factory=time.monotonic)
    last_progress: float = 0.0
    last_reseek: float = 0.0
    reseeks: int = 0  # of the current stall
    behind: int = 0  # records below the next offset: the consumer had gone back
    out_of_range: int = 0  # fetches the broker answered with "offset out of range"
    short_ends: int = 0  # end-of-partition answers below the range's end: the broker lost records
    all_reseeks: int = 0  # of the whole read (``reseeks`` counts the current stall's)
    urgent: bool = False  # an "out of range" since the last re-seek: assign again soon
    lost_at_progress: float = 0.0  # the process's time without CPU when the read last moved
    lost_s: float = 0.0  # ... of the current stall, as of the last call that passed ``lost``

    def __post_init__(self) -> None:
        self.last_progress = self.last_reseek = self.started

    def moved(self, now: float, lost: float | None = None) -> None:
        """A record (or the partition's end) arrived: a stall, if any, is over."""
        self.last_progress = self.last_reseek = now
        self.reseeks = 0
        self.urgent = False
        if lost is not None:
            self.lost_at_progress, self.lost_s = lost, 0.0

    def starved(self, lost: float) -> None:
        """Take the process's running total of time without CPU: the part since the read last moved is
        not counted against the timeout."""
        self.lost_s = max(0.0, lost - self.lost_at_progress)

    def stalled_s(self, now: float) -> float:
        """Wall seconds since the read last moved."""
        return now - self.last_progress

    def served_s(self, now: float) -> float:
        """Seconds since the read last moved in which this process had the CPU: what the timeout counts."""
        return max(0.0, self.stalled_s(now) - min(self.lost_s, self.stalled_s(now)))

    def was_out_of_range(self) -> None:
        """The broker answered a fetch with "offset out of range" (``auto.offset.reset=error``)."""
        self.out_of_range += 1
        self.urgent = True

    def went_back(self, records: int) -> None:
        """Records below the next offset arrived: the consumer is reading from an older offset."""
        self.behind += records
        self.urgent = True

    def reseek_due(self, now: float) -> bool:
        """True once no record came for ``reseek_after_s`` since the last record or re-seek
        (``RESEEK_OUT_OF_RANGE_S`` after an "out of range" or records from below the range)."""
        wait = min(self.reseek_after_s, RESEEK_OUT_OF_RANGE_S) if self.urgent else self.reseek_after_s
        return now - self.last_reseek >= wait and not self.timed_out(now)

    def needs_patience(self) -> bool:
        """Whether the stall is one a longer fetch wait may cure: no record came at all (not an "out of
        range" answer, nor records from below the range). The range's records are on the broker (the
        driver saw its end there), so a quiet read is a broker that answers empty or not at all."""
        return not self.urgent

    def reseeked(self, now: float) -> None:
        self.reseeks += 1
        self.all_reseeks += 1
        self.last_reseek = now
        self.urgent = False

    def timed_out(self, now: float) -> bool:
        """True once the stall, less the time this process got no CPU, is longer than ``timeout_s``."""
        return self.served_s(now) > self.timeout_s

    def describe(self) -> str:
        """The counts of a stall, for a notice or an error: re-seeks, records from below the range,
        "out of range" answers (those that happened)."""
        parts = [f"{self.reseeks} re-seek{'s' * (self.reseeks != 1)}"] if self.reseeks else []
        if self.behind:
            parts.append(f"{self.behind} records below the next offset (the consumer went back)")
        if self.out_of_range:
            parts.append(f"{self.out_of_range} 'offset out of range' answers")
        said = ", ".join(parts) or "no answer at all"
        if self.lost_s >= 1:
            said += f", {self.lost_s:.0f} s more without CPU, not counted"
        return said


def notice(text: str) -> None:
    """One line on the executor's stderr (the dagger's log), stamped as the runner's lines are (``HH:MM:SS``,
    local time), so that a stall can be set against the micro-batches around it."""
    print(f"{time.strftime('%H:%M:%S')} daggers: {text}", file=sys.stderr, flush=True)
