"""Slack incoming webhooks: one message per state change, coloured by level."""

from __future__ import annotations

from typing import Any

import requests

from alerting.config import SlackChannel
from alerting.notifiers.base import HttpNotifier, Notification
from alerting.secrets import public_url, url_secrets

COLOURS = {"CRIT": "#d50200", "WARN": "#de9e31", "OK": "#2eb886"}


def slack_body(n: Notification, spec: SlackChannel | None = None) -> dict[str, Any]:
    """Return the incoming-webhook JSON for ``n``: a fallback ``text`` and one coloured attachment."""
    fields = [
        {"title": "level", "value": f"{n.previous_level} → {n.level}", "short": True},
        {"title": "team", "value": n.team, "short": True},
    ]
    if n.value is not None:
        fields.append({"title": "value", "value": f"{n.value:.6g}", "short": True})
    if n.condition:
        fields.append({"title": "condition", "value": n.condition, "short": True})
    fields += [{"title": k, "value": v, "short": True} for k, v in sorted(n.tags.items())]
    body: dict[str, Any] = {
        "text": f"{n.title}: {n.message}",
        "attachments": [
            {
                "color": COLOURS[n.level],
                "title": n.title,
                "text": n.message,
                "fields": fields,
                "footer": f"daggers alerts · {n.dedup_key}",
                "ts": int(n.at),
            }
        ],
    }
    if spec is not None:
        for key in ("channel", "username", "icon_emoji"):
            value = getattr(spec, key)
            if value:
                body[key] = value
    return body


class SlackNotifier(HttpNotifier):
    """Posts to a Slack incoming webhook (Slack answers 200 ``ok``; 4xx such as ``no_service`` are final)."""

    type = "slack"

    def __init__(
        self, name: str, spec: SlackChannel, timeout: float = 10.0, session: requests.Session | None = None
    ) -> None:
        super().__init__(name, timeout, session)
        self.spec = spec

    def send(self, notification: Notification) -> None:
        self.post_json(
            self.spec.url.get_secret_value(),
            slack_body(notification, self.spec),
            headers={"X-Daggers-Notification-Id": notification.id},
        )

    def secrets(self) -> list[str]:
        return url_secrets(self.spec.url.get_secret_value())

    def describe(self) -> str:
        return f"slack {public_url(self.spec.url.get_secret_value())}"
