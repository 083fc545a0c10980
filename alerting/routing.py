"""Routing: which channels an alert's notifications go to, from its labels (team, severity, tags…)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from alerting.config import AlertsConfig
from alerting.matchers import Matcher, all_match


@dataclass(frozen=True)
class Route:
    """Alerts whose labels match every matcher go to ``channels``; ``cont`` goes on to later routes."""

    matchers: tuple[Matcher, ...]
    channels: tuple[str, ...]
    cont: bool = False


class Router:
    """Routes are tried in order; the first that matches wins unless it has ``continue``.
    Alerts no route takes go to the default channels."""

    def __init__(self, routes: list[Route], default: tuple[str, ...] = ()) -> None:
        self.routes = routes
        self.default = default

    @classmethod
    def from_config(cls, config: AlertsConfig) -> Router:
        """Return the router of ``config``'s routes and default channels."""
        return cls(
            [Route(r.parsed(), tuple(r.channels), r.continue_) for r in config.routes],
            tuple(config.default_channels),
        )

    def channels(self, labels: Mapping[str, str]) -> list[str]:
        """Return the channels for an alert with ``labels`` (including severity), each once, in route order."""
        out: list[str] = []
        matched = False
        for route in self.routes:
            if all_match(route.matchers, labels):
                matched = True
                out.extend(c for c in route.channels if c not in out)
                if not route.cont:
                    break
        if not matched:
            out.extend(c for c in self.default if c not in out)
        return out
