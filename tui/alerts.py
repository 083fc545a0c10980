"""The alerts feed: active alerts of the user's teams and their latest history, from the alert store.

Alerts carry their team in the ``team`` label; the feed shows only the teams the user is in (all of
them for a superuser), like every other screen.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Label, Static

from alerting.errors import StoreError
from job.common.text import safe_text
from tui.actions import ConsoleApp
from tui.format import age, plain, when
from tui.late import RefreshingScreen

LEVEL_STYLES = {"CRIT": "bold red", "WARN": "bold yellow", "OK": "green"}
HIDDEN_LABELS = {"alertname", "rule", "team"}


class AlertsScreen(RefreshingScreen):
    """Active alerts first (critical, then warning), then the newest history lines."""

    BINDINGS = [Binding("r", "reload", "Refresh"), Binding("escape", "back", "Back")]

    app: ConsoleApp
    errors: ClassVar[tuple[type[Exception], ...]] = (StoreError,)

    def __init__(self, store: Any) -> None:
        super().__init__()
        self.store = store

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="alerts-summary")
        yield DataTable(id="alerts", cursor_type="row", zebra_stripes=True)
        yield Label("History")
        yield DataTable(id="alert-history", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#alerts", DataTable).add_columns(
            "level", "rule", "team", "labels", "value", "since", "message"
        )
        self.query_one("#alert-history", DataTable).add_columns(
            "when (UTC)", "rule", "event", "level", "detail"
        )
        self.reload()
        self.refresh_every()

    def is_mine(self, labels: dict[str, str]) -> bool:
        """Return whether an alert with ``labels`` belongs to one of the user's teams."""
        return bool(self.app.me["superuser"]) or labels.get("team") in self.app.me["teams"]

    def fetch(self) -> tuple[list[Any], list[Any]]:
        """Read the active alerts of the user's teams and their newest history lines."""
        states = [s for s in self.store.states(active_only=True) if self.is_mine(s.labels)]
        mine = {s.fingerprint for s in self.store.states() if self.is_mine(s.labels)}
        return states, [h for h in self.store.history(limit=200) if h.fingerprint in mine][:50]

    def failed(self, exc: Exception) -> None:
        self.notify(safe_text(str(exc), multiline=True), title="Alert store", severity="error", markup=False)

    def draw(self, data: tuple[list[Any], list[Any]]) -> None:
        """Redraw the alerts and the history read."""
        states, history = data
        now = self.app.clock()
        states.sort(key=lambda s: (-int(s.level), s.rule, s.fingerprint))
        table = self.query_one("#alerts", DataTable)
        table.clear()
        for s in states:
            level = s.level.name
            labels = ", ".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if k not in HIDDEN_LABELS)
            table.add_row(
                Text(level, style=LEVEL_STYLES.get(level, "")),
                plain(s.rule),
                plain(s.labels.get("team", "-")),
                plain(labels),
                "-" if s.value is None else f"{s.value:g}",
                age(now, s.since),
                plain(s.message),
                key=s.fingerprint,
            )  # labels and messages carry the data's values
        hist = self.query_one("#alert-history", DataTable)
        hist.clear()
        for h in history:
            to = "" if h.to_level is None else ["OK", "WARN", "CRIT"][int(h.to_level)]
            hist.add_row(
                when(h.at),
                plain(h.rule),
                plain(h.event),
                Text(to, style=LEVEL_STYLES.get(to, "")),
                plain(h.detail),
            )
        crit = sum(1 for s in states if s.level.name == "CRIT")
        warn = sum(1 for s in states if s.level.name == "WARN")
        self.query_one("#alerts-summary", Static).update(
            Text.assemble(
                (f"{crit} critical", "bold red" if crit else "dim"),
                " · ",
                (f"{warn} warning", "bold yellow" if warn else "dim"),
                plain(f" · teams {', '.join(sorted(self.app.me['teams'])) or '-'}"),
            )
        )

    def action_reload(self) -> None:
        self.reload()

    def action_back(self) -> None:
        self.app.pop_screen()
