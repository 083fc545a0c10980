"""The daggers of one cluster: search, sort, pages, and states in colour."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Input, Static

from job.common.words import counted
from job.control.health_model import DAGGER_STATES
from job.control.views import DaggerView
from tui.actions import ConsoleApp
from tui.format import age, figure, plain, state_text
from tui.late import RefreshingScreen

COLUMNS = ("dagger", "team", "v", "desired", "state", "rows/s", "lag", "batch ms", "restarts", "updated")


def _value(d: DaggerView, key: str) -> float:
    """Return a health-model figure's value for sorting (0 when the dagger shows none)."""
    return float((d.health.get(key) or {}).get("value") or 0.0)


#: The sort keys ``s`` cycles through: (label, key function).
SORTS: list[tuple[str, Any]] = [
    ("name", lambda d: (d.name, d.team)),
    ("state", lambda d: (d.state, d.name)),
    ("rows/s", lambda d: (-_value(d, "rows_per_s"), d.name)),
    ("lag", lambda d: (-_value(d, "lag"), d.name)),
    ("batch ms", lambda d: (-_value(d, "batch_ms"), d.name)),
]


def _counts(daggers: list[DaggerView]) -> list[tuple[str, int]]:
    """Return how many daggers are in each health state, in the model's order (states with none left out)."""
    states = [d.state for d in daggers]
    return [(s, states.count(s)) for s in DAGGER_STATES if s in states]


class DaggersScreen(RefreshingScreen):
    """One cluster's daggers. ``/`` searches, ``s`` sorts, ``[`` ``]`` page, Enter opens, ``n`` creates."""

    reload_on_resume = True

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("n", "new", "New"),
        Binding("slash", "search", "Search"),
        Binding("s", "sort", "Sort"),
        Binding("left_square_bracket", "page(-1)", "Prev page"),
        Binding("right_square_bracket", "page(1)", "Next page"),
        Binding("r", "reload", "Refresh"),
        Binding("escape", "back", "Back"),
    ]

    app: ConsoleApp

    def __init__(self, cluster: str, page_size: int = 15) -> None:
        super().__init__()
        self.cluster = cluster
        self.page_size = page_size
        self.page = 0
        self.sort_index = 0
        self.all: list[DaggerView] = []
        self.shown: list[DaggerView] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="title")
        yield Input(placeholder="search daggers (/)", id="search")
        yield DataTable(id="daggers", cursor_type="row", zebra_stripes=True)
        yield Static(id="pager")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.reload()
        self.query_one(DataTable).focus()
        self.refresh_every()

    @property
    def filtered(self) -> list[DaggerView]:
        """The daggers that match the search, in the current sort order."""
        needle = self.query_one("#search", Input).value.strip().lower()
        rows = [d for d in self.all if not needle or needle in d.name or needle in d.team]
        return sorted(rows, key=SORTS[self.sort_index][1])

    @property
    def pages(self) -> int:
        """How many pages the filtered daggers fill (at least 1)."""
        return max((len(self.filtered) + self.page_size - 1) // self.page_size, 1)

    def fetch(self) -> list[DaggerView]:
        """Read the cluster's daggers."""
        return self.app.plane.daggers(self.cluster)

    def draw(self, data: list[DaggerView]) -> None:
        """Show the daggers read."""
        self.all = data
        self.redraw()

    def redraw(self) -> None:
        """Show the current page of the filtered, sorted daggers (keeping the cursor row)."""
        table = self.query_one(DataTable)
        keep = table.cursor_row
        table.clear()
        rows = self.filtered
        self.page = min(self.page, self.pages - 1)
        self.shown = rows[self.page * self.page_size : (self.page + 1) * self.page_size]
        now = self.app.clock()
        for d in self.shown:
            h = d.health
            table.add_row(
                plain(d.name),
                plain(d.team),
                str(d.current_version),
                plain(d.desired_state),
                state_text(d.state),
                figure(h.get("rows_per_s")),
                figure(h.get("lag")),
                figure(h.get("batch_ms")),
                str(d.restarts),
                age(now, d.status_updated_at),
                key=d.ref,
            )
        if table.row_count:
            table.move_cursor(row=min(keep, table.row_count - 1))
        self.query_one("#title", Static).update(
            Text.assemble(
                "cluster ",
                plain(self.cluster, "bold"),
                f" · {counted(len(self.all), 'dagger')}"
                + "".join(f", {n} {state}" for state, n in _counts(self.all)),
            )
        )
        self.query_one("#pager", Static).update(
            f"page {self.page + 1}/{self.pages} · {len(rows)} shown · sorted by {SORTS[self.sort_index][0]}"
        )

    def selected(self) -> DaggerView | None:
        """Return the dagger under the cursor."""
        table = self.query_one(DataTable)
        if not table.row_count or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def on_input_changed(self, event: Input.Changed) -> None:
        self.page = 0
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        dagger = self.selected()
        if dagger is not None:
            self.app.open_dagger(dagger.ref)

    def action_new(self) -> None:
        self.app.new_dagger(self.cluster)

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_sort(self) -> None:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self.redraw()

    def action_page(self, delta: int) -> None:
        self.page = min(max(self.page + delta, 0), self.pages - 1)
        self.redraw()

    def action_reload(self) -> None:
        self.reload()

    def action_back(self) -> None:
        search = self.query_one("#search", Input)
        if search.has_focus:
            self.query_one(DataTable).focus()
        else:
            self.app.pop_screen()
