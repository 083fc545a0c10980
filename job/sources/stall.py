"""Noticing a range read that stops moving, and what the Kafka client said meanwhile.

A task reads a range of offsets that the driver saw on the broker, so its records exist. When a
read stops moving anyway (a fetch the broker never answers, a consumer that went back to an older
offset, an offset the broker calls out of range for a moment), the reader does not wait out its
whole ``read_timeout_s``: every ``RESEEK_AFTER_S`` without a record it assigns the partition again
at the next offset it needs, on a new consumer (new connections: a request the broker never answers
holds up every later answer on its connection). What librdkafka logged meanwhile goes into the notice and into the
error raised at the timeout, so a stall names its cause.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from dataclasses import dataclass, field

RESEEK_AFTER_S = 2.5  # seconds without a record before the reader assigns the partition again
RESEEK_OUT_OF_RANGE_S = 0.5  # ... when the broker called it out of range, or the consumer went back
CLIENT_LOG_KEEP = 5  # librdkafka messages kept for the notice


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


@dataclass
class StallWatch:
    """The clock of one range read: when it last moved, and when to assign it again.

    ``now`` comes from the caller (``time.monotonic()``), so the rule is testable without waiting.
    """

    timeout_s: float
    reseek_after_s: float = RESEEK_AFTER_S
    started: float = field(default_factory=time.monotonic)
    last_progress: float = 0.0
    last_reseek: float = 0.0
    reseeks: int = 0  # of the current stall
    behind: int = 0  # records below the next offset: the consumer had gone back
    out_of_range: int = 0  # fetches the broker answered with "offset out of range"
    urgent: bool = False  # an "out of range" since the last re-seek: assign again soon

    def __post_init__(self) -> None:
        self.last_progress = self.last_reseek = self.started

    def moved(self, now: float) -> None:
        """A record (or the partition's end) arrived: a stall, if any, is over."""
        self.last_progress = self.last_reseek = now
        self.reseeks = 0
        self.urgent = False

    def stalled_s(self, now: float) -> float:
        return now - self.last_progress

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

    def reseeked(self, now: float) -> None:
        self.reseeks += 1
        self.last_reseek = now
        self.urgent = False

    def timed_out(self, now: float) -> bool:
        return now - self.last_progress > self.timeout_s

    def describe(self) -> str:
        """The counts of a stall, for a notice or an error: re-seeks, records from below the range,
        "out of range" answers (those that happened)."""
        parts = [f"{self.reseeks} re-seek{'s' * (self.reseeks != 1)}"] if self.reseeks else []
        if self.behind:
            parts.append(f"{self.behind} records below the next offset (the consumer went back)")
        if self.out_of_range:
            parts.append(f"{self.out_of_range} 'offset out of range' answers")
        return ", ".join(parts) or "no answer at all"


def notice(text: str) -> None:
    """One line on the executor's stderr (the dagger's log)."""
    print(f"daggers: {text}", file=sys.stderr, flush=True)
