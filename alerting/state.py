"""The state of one alert (a rule and one group of tags) and how an evaluation moves it.

Semantics, as in Prometheus/Kapacitor:

* **levels** OK < WARN < CRIT; an evaluation finds a *raw* level per group.
* **pending**: a level fires only once the raw level has been at or above it, evaluation after
  evaluation, for the rule's ``for`` period; a lower raw level takes effect at once (recovery and
  de-escalation are not delayed).
* **state changes only**: a notification goes out when the effective level differs from the level
  last notified (OK→WARN, WARN→CRIT, CRIT→WARN, and →OK as a resolve), never on every evaluation.
* **flapping** (optional): over the last ``history`` levels (a ring that starts full of OK, as in
  Kapacitor), the share of changes, weighted from 0.8 for the oldest to 1.2 for the newest, above
  ``high`` marks the alert as flapping and holds its notifications back; below ``low`` it stops, and
  the level it then has is notified if it differs from the last one notified.
* **silences** hold a notification back in the same way; when the silence ends the current level is
  notified if it differs from the last one notified (so a resolve that happened during the silence of
  an alert that was never notified sends nothing).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Literal

from alerting.rules import FlappingSpec

DEFAULT_HISTORY = 21


class Level(IntEnum):
    """An alert level."""

    OK = 0
    WARN = 1
    CRIT = 2

    @property
    def severity(self) -> str:
        """``ok``, ``warn`` or ``crit`` (the ``severity`` label)."""
        return self.name.lower()

    @classmethod
    def of(cls, name: str) -> Level:
        """Return the level called ``name`` (ok/warn/crit, any case)."""
        return cls[name.upper()]


def fingerprint(rule: str, tags: Mapping[str, str]) -> str:
    """Return the alert's identity: a hash of its rule name and its group's tags (stable across restarts)."""
    body = json.dumps([rule, sorted(tags.items())], separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def dedup_key(rule: str, fp: str) -> str:
    """Return the PagerDuty dedup_key of an alert: the same for its trigger and its resolve."""
    return f"daggers/{rule}/{fp[:16]}"


@dataclass
class AlertState:
    """What the engine remembers about one alert between evaluations (persisted in the store)."""

    fingerprint: str
    rule: str
    kind: Literal["rule", "platform"] = "rule"
    labels: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    level: Level = Level.OK
    raw_level: Level = Level.OK
    warn_since: float | None = None
    crit_since: float | None = None
    since: float | None = None
    started_at: float | None = None
    value: float | None = None
    past_value: float | None = None
    flapping: bool = False
    history: list[int] = field(default_factory=list)
    notified_level: Level = Level.OK
    notify_seq: int = 0
    last_eval: float | None = None
    message: str = ""
    condition: str = ""

    @property
    def pending(self) -> bool:
        """True when the raw level is above the effective one (waiting out the ``for`` period)."""
        return self.raw_level > self.level

    def severity_labels(self, level: Level | None = None) -> dict[str, str]:
        """Return the labels with ``severity`` (of ``level``; default: the level, or the one last notified
        when the alert is OK, so a resolve is routed and silenced like its trigger)."""
        lv = level if level is not None else (self.level if self.level > Level.OK else self.notified_level)
        return {**self.labels, "severity": lv.severity}


@dataclass(frozen=True)
class StepResult:
    """What one evaluation changed."""

    previous: Level
    level: Level
    flapping: Literal["start", "stop"] | None = None

    @property
    def changed(self) -> bool:
        """True when the effective level changed."""
        return self.previous != self.level


def flap_share(history: list[int]) -> float:
    """Return the weighted share of level changes in ``history`` (oldest first), 0..1.

    Changes weigh from 0.8 (oldest) to 1.2 (newest), as in Nagios and Kapacitor.
    """
    n = len(history)
    if n < 3:
        return 0.0
    total = 0.0
    for i in range(n - 1):
        if history[i] != history[i + 1]:
            total += 0.8 + 0.4 * i / (n - 2)
    return total / (n - 1)


def step(
    state: AlertState, raw: Level, at: float, pending_s: float, flapping: FlappingSpec | None
) -> StepResult:
    """Apply an evaluation that found ``raw`` at time ``at`` to ``state`` (in place).

    Returns:
        The previous and new effective level and whether flapping started or stopped.
    """
    state.raw_level = raw
    state.last_eval = at
    state.warn_since = (
        (state.warn_since if state.warn_since is not None else at) if raw >= Level.WARN else None
    )
    state.crit_since = (
        (state.crit_since if state.crit_since is not None else at) if raw >= Level.CRIT else None
    )
    level = Level.OK
    for lv, since in ((Level.CRIT, state.crit_since), (Level.WARN, state.warn_since)):
        if since is not None and at - since >= pending_s:
            level = lv
            break
    previous = state.level
    if level != previous:
        state.level = level
        state.since = at
        if previous == Level.OK:
            state.started_at = at
    size = flapping.history if flapping else DEFAULT_HISTORY
    history = state.history or [int(Level.OK)] * size
    state.history = (history + [int(level)])[-size:]
    change: Literal["start", "stop"] | None = None
    if flapping is not None:
        share = flap_share(state.history)
        if not state.flapping and share > flapping.high:
            state.flapping, change = True, "start"
        elif state.flapping and share < flapping.low:
            state.flapping, change = False, "stop"
    elif state.flapping:
        state.flapping, change = False, "stop"
    return StepResult(previous, level, change)


@dataclass(frozen=True)
class Decision:
    """What to do about notifications after an evaluation: send one (``notify``), hold one back
    (``held`` says why: ``flapping`` or ``silenced``), or nothing."""

    notify: bool
    previous: Level
    level: Level
    held: Literal["flapping", "silenced"] | None = None


def decide(state: AlertState, silenced: bool) -> Decision | None:
    """Return whether ``state``'s level must be notified now (None when it already was).

    Call after :func:`step`; when it says notify, the caller sends and then sets
    ``notified_level`` (see :func:`mark_notified`).
    """
    if state.level == state.notified_level:
        return None
    if state.flapping:
        return Decision(False, state.notified_level, state.level, "flapping")
    if silenced:
        return Decision(False, state.notified_level, state.level, "silenced")
    return Decision(True, state.notified_level, state.level)


def mark_notified(state: AlertState) -> int:
    """Record that ``state``'s current level was notified; return the notification's sequence number."""
    state.notified_level = state.level
    state.notify_seq += 1
    return state.notify_seq
