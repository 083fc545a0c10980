"""Daggers alerting: threshold, no-data and platform alerts on the daggers' output, delivered to Slack,
PagerDuty, webhooks and e-mail.

Public API:

* :func:`load_config` / :func:`parse_config` → :class:`AlertsConfig` (rules, channels, routes, silences);
* :class:`AlertEngine`: ``evaluate_rule``, ``evaluate_platform``, ``dispatch``, ``firing``, ``start``/``stop``;
* :class:`AlertStore`: state, history, outbox, silences (SQLite or PostgreSQL);
* :class:`DaggerHealthSource` / :class:`DaggerHealth`: plug in where dagger health comes from.

This package never imports a UI toolkit (textual, streamlit, pydeck).
"""

from __future__ import annotations

from alerting.config import AlertsConfig, load_config, load_rule_file, parse_config
from alerting.engine import AlertEngine, EvaluationReport, GroupOutcome
from alerting.errors import AlertConfigError, AlertQueryError, DeliveryError, EngineBusyError, StoreError
from alerting.health import CheckpointHealthSource, DaggerHealth, DaggerHealthSource
from alerting.notifiers import Notification, Notifier
from alerting.rules import Condition, DeadmanRule, ThresholdRule
from alerting.state import AlertState, Level
from alerting.store import AlertStore, Silence

__all__ = [
    "AlertConfigError",
    "AlertEngine",
    "AlertQueryError",
    "AlertState",
    "AlertStore",
    "AlertsConfig",
    "CheckpointHealthSource",
    "Condition",
    "DaggerHealth",
    "DaggerHealthSource",
    "DeadmanRule",
    "DeliveryError",
    "EngineBusyError",
    "EvaluationReport",
    "GroupOutcome",
    "Level",
    "Notification",
    "Notifier",
    "Silence",
    "StoreError",
    "ThresholdRule",
    "load_config",
    "load_rule_file",
    "parse_config",
]
