"""How the console shows states, rates, ages and health: plain functions returning Rich text.

Text from users (names, comments, descriptions, errors, a preview's rows) is shown with :func:`plain`: as
text, never as markup (a string given to a ``DataTable`` cell, a ``Static`` or a ``Label`` is read as
markup) and with its control characters escaped (:func:`job.common.text.safe_text`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.text import Text

from job.common.text import safe_text

STATE_STYLES = {
    "running": "bold green",
    "starting": "yellow",
    "pending": "yellow",
    "stopping": "yellow",
    "crashed": "bold dark_orange",
    "failed": "bold red",
    "stopped": "dim",
    "created": "dim",
    "deleted": "dim strike",
    # the health model's states (job.control.health_model)
    "catching up": "green",
    "lagging": "bold yellow",
    "stalled": "bold red",
    "crash-looping": "bold red",
    "unknown": "bold magenta",
    # a cluster's
    "healthy": "bold green",
    "degraded": "bold yellow",
    "unhealthy": "bold red",
}


def plain(value: object, style: str = "", *, multiline: bool = False) -> Text:
    """Return ``value`` (a user's string; ``None`` is empty) as text shown as it is: ``[bold]`` stays
    ``[bold]``, ESC shows as ``\\x1b``; ``multiline`` keeps its newlines."""
    return Text(safe_text(None if value is None else str(value), multiline=multiline), style=style)


def state_text(state: str) -> Text:
    """Return the actual state coloured: green running, yellow on its way, orange crashed, red failed."""
    return plain(state, STATE_STYLES.get(state, ""))


def number(value: float | int | None) -> str:
    """Return ``value`` short: 950, 12.3k, 4.1M; "-" for None."""
    if value is None:
        return "-"
    v = float(value)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= size:
            return f"{v / size:.1f}{unit}"
    return f"{v:.0f}"


def age(now: float, then: float | None) -> str:
    """Return how long ago ``then`` was: 4s, 3m, 2h, 5d; "-" for None."""
    if not then:
        return "-"
    return span(now - then)


def span(seconds: float) -> str:
    """Return a duration short: 4s, 3m, 2h, 5d (negative counts as 0)."""
    s = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit}"
    return f"{s:.0f}s"


def when(ts: float | None) -> str:
    """Return a UTC time as ``YYYY-MM-DD HH:MM``; "-" for None."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M") if ts else "-"


#: How a cluster part's state (job.control.health_model.PART_STATES) is shown.
PART_STYLES = {"ok": "green", "slow": "yellow", "down": "bold red", "stale": "dim", "unknown": "dim"}


def part_text(state: str | None, detail: str = "", age_s: float | None = None) -> Text:
    """Return a cluster part as the health model judges it, with the age of the probe it comes from: ``● ok
    … 4s`` in green, ``● slow 4s`` in yellow (one probe unanswered: a busy machine, not yet a dead part),
    ``● down 4s`` in red, ``○ stale 3m`` dim, ``○ unknown`` dim (never probed)."""
    state = state if state in PART_STYLES else "unknown"
    age = f" {span(age_s)}" if age_s is not None and state != "unknown" else ""
    if state == "ok":
        return Text(f"● ok {detail}".rstrip() + age, style=PART_STYLES[state])
    return Text(f"{'○' if state in ('unknown', 'stale') else '●'} {state}{age}", style=PART_STYLES[state])


def spark_detail(spark: dict[str, Any] | None) -> str:
    """Return workers and cores of a Spark health part: ``1/1 w 0/2 cores`` or ``local 2 cores``."""
    if not spark:
        return ""
    if spark.get("mode") == "local":
        return f"local {spark.get('cores', 0)}c"
    return f"{spark.get('workers_alive', 0)}/{spark.get('workers', 0)}w {spark.get('cores_used', 0)}/{spark.get('cores', 0)}c"


def figure(fig: dict[str, Any] | None, unit: str = "") -> str:
    """Return a health-model figure short, with its ``unit`` and then its age when it is old: ``967``,
    ``967 (4m old)``, ``9.2k ms (9m old)``; "-" for none (a stopped, failed, crash-looping or silent dagger
    shows no figure)."""
    if not fig:
        return f"- {unit}" if unit else "-"
    text = f"{number(fig.get('value'))} {unit}" if unit else number(fig.get("value"))
    return text if fig.get("fresh") else f"{text} ({span(float(fig.get('age_s') or 0.0))} old)"
