"""Notification channels: Slack, PagerDuty Events API v2, generic webhooks and SMTP e-mail."""

from __future__ import annotations

from alerting.config import AlertsConfig, EmailChannel, PagerDutyChannel, SlackChannel, WebhookChannel
from alerting.notifiers.base import HttpNotifier, Notification, Notifier
from alerting.notifiers.email import EmailNotifier
from alerting.notifiers.pagerduty import PagerDutyNotifier
from alerting.notifiers.slack import SlackNotifier
from alerting.notifiers.webhook import WebhookNotifier


def build_notifier(name: str, spec: object, timeout: float = 10.0) -> Notifier:
    """Return the notifier of a channel spec.

    Raises:
        TypeError: an unknown channel spec type.
    """
    if isinstance(spec, SlackChannel):
        return SlackNotifier(name, spec, timeout)
    if isinstance(spec, PagerDutyChannel):
        return PagerDutyNotifier(name, spec, timeout)
    if isinstance(spec, WebhookChannel):
        return WebhookNotifier(name, spec, timeout)
    if isinstance(spec, EmailChannel):
        return EmailNotifier(name, spec, timeout)
    raise TypeError(f"unknown channel type {type(spec).__name__}")


def build_notifiers(config: AlertsConfig) -> dict[str, Notifier]:
    """Return a notifier for every channel of ``config``, by channel name."""
    return {
        name: build_notifier(name, spec, config.delivery.timeout) for name, spec in config.channels.items()
    }


__all__ = [
    "EmailNotifier",
    "HttpNotifier",
    "Notification",
    "Notifier",
    "PagerDutyNotifier",
    "SlackNotifier",
    "WebhookNotifier",
    "build_notifier",
    "build_notifiers",
]
