"""Errors of the alert engine, in the DaggerError hierarchy (``title`` + a message naming what to fix).

The CLI prints ``title: message`` for these and never a traceback.
"""

from __future__ import annotations

from job.errors import DaggerError, SpecError


class AlertConfigError(SpecError):
    """The alerting configuration or a rule file is invalid; the message names each bad field and line."""

    title = "Invalid alerting configuration"


class AlertQueryError(DaggerError):
    """InfluxDB could not be reached or refused a rule's query."""

    title = "Alert query failed"


class StoreError(DaggerError):
    """The alert store (SQLite or PostgreSQL) cannot be opened or written."""

    title = "Alert store error"


class EngineBusyError(StoreError):
    """Another alert engine holds the store's lease: two engines must not evaluate the same rules."""

    title = "Alert engine already running"


class DeliveryError(DaggerError):
    """A notification could not be delivered to a channel.

    ``retryable`` says whether trying again later may succeed (the receiver is down, overloaded or
    asks to slow down); ``retry_after`` is the delay the receiver asked for, in seconds, if any.
    The message never holds a secret (webhook URL path, routing key, password).
    """

    title = "Notification not delivered"

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
