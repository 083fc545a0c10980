"""What every channel gets (:class:`Notification`) and the notifier contract.

A notifier turns a Notification into its channel's format and delivers it; it raises
:class:`~alerting.errors.DeliveryError` saying whether trying again later may help. Notifiers hold
their secrets (URLs, keys, passwords) and expose them only through :meth:`Notifier.secrets`, so the
engine can redact them from anything it logs or stores.
"""

from __future__ import annotations

import email.utils
from abc import ABC, abstractmethod
from datetime import UTC, datetime
from typing import Any, Literal

import requests
from pydantic import BaseModel, ConfigDict, Field

from alerting.errors import DeliveryError
from alerting.secrets import public_url

USER_AGENT = "daggers-alerts/1"


class Notification(BaseModel):
    """One state change of one alert, as queued in the outbox and sent to each routed channel."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Idempotency key: the alert's fingerprint and its notification number.")
    rule: str = Field(description="The rule (or platform check) name.")
    kind: Literal["rule", "platform"] = Field(
        default="rule", description="A rule's alert or a platform alert."
    )
    team: str = Field(description="The owning team.")
    status: Literal["firing", "resolved"] = Field(description="firing (WARN or CRIT) or resolved (OK).")
    level: Literal["OK", "WARN", "CRIT"] = Field(description="The level now.")
    previous_level: Literal["OK", "WARN", "CRIT"] = Field(description="The level notified before.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels including severity.")
    tags: dict[str, str] = Field(default_factory=dict, description="The group's tags.")
    value: float | None = Field(default=None, description="The value the rule found.")
    condition: str = Field(default="", description="The condition that holds (or that held, for a resolve).")
    message: str = Field(description="The rendered message.")
    fingerprint: str = Field(description="The alert's identity (rule + tags).")
    dedup_key: str = Field(
        description="Stable key of the alert for PagerDuty and other deduplicating receivers."
    )
    started_at: float | None = Field(default=None, description="When the incident began (epoch seconds).")
    at: float = Field(description="The evaluation that produced this notification (epoch seconds).")

    @property
    def title(self) -> str:
        """A one-line summary: ``[CRIT] rule city=Jakarta`` or ``[RESOLVED] …``."""
        tags = " ".join(f"{k}={v}" for k, v in sorted(self.tags.items()))
        head = "RESOLVED" if self.status == "resolved" else self.level
        return f"[{head}] {self.rule}" + (f" {tags}" if tags else "")

    def iso(self, epoch: float | None) -> str | None:
        """Return ``epoch`` as ISO 8601 UTC (None stays None)."""
        return (
            None
            if epoch is None
            else datetime.fromtimestamp(epoch, tz=UTC).isoformat().replace("+00:00", "Z")
        )

    def to_json(self) -> dict[str, Any]:
        """Return the notification as the generic webhook's JSON body."""
        body = self.model_dump(mode="json")
        body["version"] = "1"
        body["started_at"] = self.iso(self.started_at)
        body["at"] = self.iso(self.at)
        return body


class Notifier(ABC):
    """Delivers notifications to one named channel."""

    type: str = "channel"

    def __init__(self, name: str, timeout: float = 10.0) -> None:
        self.name = name
        self.timeout = timeout

    @abstractmethod
    def send(self, notification: Notification) -> None:
        """Deliver ``notification``.

        Raises:
            DeliveryError: with ``retryable`` True when trying again later may succeed.
        """

    @abstractmethod
    def secrets(self) -> list[str]:
        """Return the secret strings this notifier holds (for redaction)."""

    @abstractmethod
    def describe(self) -> str:
        """Return the channel for people, without secrets: ``slack https://hooks.slack.com``."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Default: nothing."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.describe()}>"


class HttpNotifier(Notifier):
    """A notifier that POSTs JSON; maps HTTP answers to delivered / retry / give up."""

    def __init__(self, name: str, timeout: float = 10.0, session: requests.Session | None = None) -> None:
        super().__init__(name, timeout)
        self._session = session or requests.Session()

    def post_json(
        self, url: str, body: dict[str, Any], headers: dict[str, str] | None = None, data: bytes | None = None
    ) -> requests.Response:
        """POST ``body`` (or pre-encoded ``data``) to ``url`` and return the response when it is 2xx.

        Raises:
            DeliveryError: connection problems, timeouts, 429 and 5xx are retryable (429 and 503 with the
                Retry-After they give); other 4xx are not. The message shows only scheme://host:port.
        """
        where = public_url(url)
        hdrs = {"Content-Type": "application/json", "User-Agent": USER_AGENT, **(headers or {})}
        try:
            if data is not None:
                resp = self._session.post(url, data=data, headers=hdrs, timeout=self.timeout)
            else:
                resp = self._session.post(url, json=body, headers=hdrs, timeout=self.timeout)
        except requests.Timeout:
            raise DeliveryError(
                f"{self.type} channel {self.name!r}: {where} did not answer within {self.timeout:g}s",
                retryable=True,
            ) from None
        except requests.ConnectionError:
            raise DeliveryError(
                f"{self.type} channel {self.name!r}: cannot connect to {where}", retryable=True
            ) from None
        except requests.RequestException as exc:
            raise DeliveryError(
                f"{self.type} channel {self.name!r}: request to {where} failed ({type(exc).__name__})",
                retryable=True,
            ) from None
        if 200 <= resp.status_code < 300:
            return resp
        detail = resp.text.strip().replace("\n", " ")[:200]
        message = f"{self.type} channel {self.name!r}: {where} answered HTTP {resp.status_code}" + (
            f": {detail}" if detail else ""
        )
        retry_after = _retry_after(resp.headers.get("Retry-After"))
        retryable = resp.status_code in (408, 425, 429) or resp.status_code >= 500
        raise DeliveryError(message, retryable=retryable, retry_after=retry_after if retryable else None)

    def close(self) -> None:
        self._session.close()


def _retry_after(value: str | None) -> float | None:
    """Return a Retry-After header (seconds or an HTTP date) in seconds from now."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - datetime.now(UTC).timestamp())
