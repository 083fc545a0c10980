"""Generic HTTP webhooks: each notification POSTed as JSON (see Notification.to_json).

Headers: ``Idempotency-Key`` (the notification id: a receiver can drop a repeat after a crash) and,
when ``hmac_secret`` is set, ``X-Daggers-Signature: sha256=<hex HMAC of the body>``.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import requests

from alerting.config import WebhookChannel
from alerting.notifiers.base import HttpNotifier, Notification
from alerting.secrets import public_url, url_secrets


def sign(body: bytes, secret: str) -> str:
    """Return ``sha256=<hex HMAC-SHA256 of body>``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookNotifier(HttpNotifier):
    """POSTs the notification JSON to a URL (2xx: delivered; 429/5xx/connection errors: retried)."""

    type = "webhook"

    def __init__(
        self, name: str, spec: WebhookChannel, timeout: float = 10.0, session: requests.Session | None = None
    ) -> None:
        super().__init__(name, timeout, session)
        self.spec = spec

    def send(self, notification: Notification) -> None:
        data = json.dumps(notification.to_json(), separators=(",", ":"), sort_keys=True).encode()
        headers = {k: v.get_secret_value() for k, v in self.spec.headers.items()}
        headers["Idempotency-Key"] = notification.id
        if self.spec.hmac_secret is not None:
            headers["X-Daggers-Signature"] = sign(data, self.spec.hmac_secret.get_secret_value())
        self.post_json(self.spec.url.get_secret_value(), {}, headers=headers, data=data)

    def secrets(self) -> list[str]:
        out = url_secrets(self.spec.url.get_secret_value())
        out += [v.get_secret_value() for v in self.spec.headers.values()]
        if self.spec.hmac_secret is not None:
            out.append(self.spec.hmac_secret.get_secret_value())
        return out

    def describe(self) -> str:
        return f"webhook {public_url(self.spec.url.get_secret_value())}"
