"""Delivering the outbox: every queued notification reaches its channel once, in order, despite outages.

The dispatcher sends what is due, oldest first. A failed send is retried with exponential back-off
(``backoff_initial`` × ``backoff_factor``^n, at most ``backoff_max``, plus jitter; longer when the
receiver sends Retry-After) until it is delivered or ``give_up_after`` has passed; a final error
(e.g. HTTP 400/404, SMTP 5xx) is not retried. While a channel is failing its other notifications
wait too, and a later notification of an alert never overtakes an earlier one on the same channel
(a resolve does not arrive before its trigger).

Delivery is at least once: a process killed after a receiver accepted a notification but before the
store recorded it sends it again on restart. Receivers can drop the repeat by its id (webhook
``Idempotency-Key``, mail Message-ID, and PagerDuty's dedup_key makes a repeated event harmless).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from alerting.config import DeliverySpec
from alerting.errors import DeliveryError, StoreError
from alerting.notifiers.base import Notification, Notifier
from alerting.secrets import Redactor
from alerting.store import AlertStore, HistoryEvent, OutboxItem

log = logging.getLogger("daggers.alerts")


@dataclass(frozen=True)
class Backoff:
    """Exponential back-off: try n waits ``min(maximum, initial * factor**(n-1)) * (1 + jitter * U[0,1))``."""

    initial: float = 5.0
    factor: float = 2.0
    maximum: float = 300.0
    jitter: float = 0.1

    @classmethod
    def from_spec(cls, spec: DeliverySpec) -> Backoff:
        """Return the back-off of a delivery spec."""
        return cls(spec.backoff_initial, spec.backoff_factor, spec.backoff_max, spec.backoff_jitter)

    def delay(self, attempts: int, rng: Callable[[], float] = random.random) -> float:
        """Return the wait after the ``attempts``-th failed try (1-based)."""
        base = min(self.maximum, self.initial * self.factor ** max(0, attempts - 1))
        return base * (1.0 + self.jitter * rng())


@dataclass(frozen=True)
class DispatchReport:
    """What one dispatch round did."""

    sent: int = 0
    retried: int = 0
    failed: int = 0
    waiting: int = 0
    skipped: bool = False


class Dispatcher:
    """Sends due outbox items through the notifiers. One round at a time (other callers skip)."""

    def __init__(
        self,
        store: AlertStore,
        notifiers: dict[str, Notifier],
        *,
        backoff: Backoff | None = None,
        give_up_after: float = 86400.0,
        batch: int = 200,
        redact: Redactor | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.notifiers = notifiers
        self.backoff = backoff or Backoff()
        self.give_up_after = give_up_after
        self.batch = batch
        self.redact = redact or Redactor([s for n in notifiers.values() for s in n.secrets()])
        self.clock = clock
        self._lock = threading.Lock()
        self._channel_retry_at: dict[str, float] = {}

    def dispatch(self) -> DispatchReport:
        """Send every due notification once; return what happened.

        Never raises for a delivery problem (those are retried or recorded); raises StoreError when
        the store cannot be read or written.
        """
        if not self._lock.acquire(blocking=False):
            return DispatchReport(skipped=True)
        try:
            return self._round()
        finally:
            self._lock.release()

    def _round(self) -> DispatchReport:
        now = self.clock()
        sent = retried = failed = waiting = 0
        blocked: set[tuple[str, str]] = set()
        for item in self.store.due(now, self.batch):
            key = (item.channel, item.fingerprint)
            channel_wait = self._channel_retry_at.get(item.channel, 0.0)
            if key in blocked or item.next_attempt_at > now or channel_wait > now:
                blocked.add(key)
                waiting += 1
                continue
            assert item.id is not None
            outcome = self._send(item, now)
            if outcome == "sent":
                sent += 1
                self._channel_retry_at.pop(item.channel, None)
            else:
                blocked.add(key)
                if outcome == "retry":
                    retried += 1
                else:
                    failed += 1
        return DispatchReport(sent, retried, failed, waiting)

    def _send(self, item: OutboxItem, now: float) -> str:
        assert item.id is not None
        attempts = item.attempts + 1
        notifier = self.notifiers.get(item.channel)
        event = HistoryEvent(
            at=now,
            fingerprint=item.fingerprint,
            rule=item.rule,
            event="delivered",
            detail=f"{item.channel}: {item.key}",
        )
        if notifier is None:
            error = f"channel {item.channel!r} is no longer configured"
            self.store.mark_failed(
                item.id,
                attempts,
                error,
                HistoryEvent(
                    **{**event.__dict__, "event": "delivery_failed", "detail": f"{item.channel}: {error}"}
                ),
            )
            log.error("notification %s dropped: %s", item.key, error)
            return "failed"
        try:
            notification = Notification.model_validate(item.payload)
            notifier.send(notification)
        except ValidationError:
            error = "the queued notification does not parse (written by another version?)"
            self.store.mark_failed(item.id, attempts, error)
            log.error("notification %s to %s dropped: %s", item.key, item.channel, error)
            return "failed"
        except DeliveryError as exc:
            return self._failed(item, attempts, now, self.redact(exc.message), exc.retryable, exc.retry_after)
        except StoreError:
            raise
        except Exception as exc:  # a notifier bug must not stop the outbox; keep the item and retry
            return self._failed(item, attempts, now, self.redact(f"{type(exc).__name__}: {exc}"), True, None)
        self.store.mark_sent(item.id, self.clock(), attempts, event)
        log.info(
            "delivered %s of %s to channel %r (%s) after %d tr%s",
            notification.status,
            item.rule,
            item.channel,
            notifier.type,
            attempts,
            "y" if attempts == 1 else "ies",
        )
        return "sent"

    def _failed(
        self,
        item: OutboxItem,
        attempts: int,
        now: float,
        error: str,
        retryable: bool,
        retry_after: float | None,
    ) -> str:
        assert item.id is not None
        age = now - item.created_at
        if not retryable or age >= self.give_up_after:
            why = error if not retryable else f"gave up after {attempts} tries in {age:.0f}s: {error}"
            self.store.mark_failed(
                item.id,
                attempts,
                why,
                HistoryEvent(
                    at=now,
                    fingerprint=item.fingerprint,
                    rule=item.rule,
                    event="delivery_failed",
                    detail=f"{item.channel}: {why}",
                ),
            )
            log.error("notification %s to channel %r failed for good: %s", item.key, item.channel, why)
            return "failed"
        delay = max(self.backoff.delay(attempts), retry_after or 0.0)
        self.store.mark_retry(item.id, attempts, now + delay, error)
        self._channel_retry_at[item.channel] = now + delay
        log.warning(
            "notification %s to channel %r not delivered (try %d), retrying in %.1fs: %s",
            item.key,
            item.channel,
            attempts,
            delay,
            error,
        )
        return "retry"
