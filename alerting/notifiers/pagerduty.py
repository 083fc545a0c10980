"""PagerDuty Events API v2: ``trigger`` on WARN/CRIT and ``resolve`` on OK, with one dedup_key per alert."""

from __future__ import annotations

from typing import Any

import requests

from alerting.config import PagerDutyChannel
from alerting.notifiers.base import HttpNotifier, Notification
from alerting.secrets import public_url

SEVERITIES = {"CRIT": "critical", "WARN": "warning", "OK": "info"}


def pagerduty_body(n: Notification, routing_key: str, source: str = "daggers") -> dict[str, Any]:
    """Return the Events API v2 body: a trigger with payload, or a resolve with only the dedup_key."""
    if n.status == "resolved":
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": n.dedup_key}
    return {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": n.dedup_key,
        "client": "Daggers alerts",
        "payload": {
            "summary": f"{n.title}: {n.message}"[:1024],
            "source": source,
            "severity": SEVERITIES[n.level],
            "timestamp": n.iso(n.at),
            "component": n.labels.get("dagger") or n.rule,
            "group": n.team,
            "class": n.rule,
            "custom_details": {
                "value": n.value,
                "condition": n.condition,
                "labels": n.labels,
                "previous_level": n.previous_level,
                "started_at": n.iso(n.started_at),
                "notification_id": n.id,
            },
        },
    }


class PagerDutyNotifier(HttpNotifier):
    """Sends events to PagerDuty (202 accepted; 400 is final; 429 and 5xx are retried)."""

    type = "pagerduty"

    def __init__(
        self,
        name: str,
        spec: PagerDutyChannel,
        timeout: float = 10.0,
        session: requests.Session | None = None,
    ) -> None:
        super().__init__(name, timeout, session)
        self.spec = spec

    def send(self, notification: Notification) -> None:
        self.post_json(
            self.spec.url,
            pagerduty_body(notification, self.spec.routing_key.get_secret_value(), self.spec.source),
        )

    def secrets(self) -> list[str]:
        return [self.spec.routing_key.get_secret_value()]

    def describe(self) -> str:
        return f"pagerduty {public_url(self.spec.url)}"
