"""Small dialogs: confirm an action, ask for one value, show a table of rows (a preview's: by window)."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, Static

from tui.format import plain


def window_column(columns: list[str]) -> str | None:
    """Return the column that holds a row's window (``window_timestamp``, else the first ``window…``
    column); None when the rows have no window."""
    if "window_timestamp" in columns:
        return "window_timestamp"
    return next((c for c in columns if c.startswith("window")), None)


def by_window(columns: list[str], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return ``rows`` sorted by their window, then by the other columns in order (as shown, as text);
    as they are when there is no window column."""
    window = window_column(columns)
    if window is None:
        return rows
    rest = [c for c in columns if c != window]
    return sorted(
        rows, key=lambda r: (r.get(window) is None, str(r.get(window)), *(str(r.get(c)) for c in rest))
    )


def rows_hint(columns: list[str], count: int) -> str:
    """Return how the rows are shown: ``sorted by window_timestamp; ↑↓ or the wheel scroll them``."""
    window = window_column(columns)
    return (f"sorted by {window}" if window else "as the query returned them") + (
        "; ↑↓ or the mouse wheel scroll them" if count > 1 else ""
    )


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question; dismisses with True for yes (``y``/Enter on Yes), False otherwise."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, detail: str = "") -> None:
        super().__init__()
        self.question, self.detail = question, detail

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(plain(self.question), id="question")  # it may quote a user's text: shown as text
            if self.detail:
                yield Static(plain(self.detail, multiline=True), id="detail")
            with Horizontal(id="buttons"):
                yield Button("Yes (y)", id="yes", variant="warning")
                yield Button("No (n)", id="no", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class AskScreen(ModalScreen["str | None"]):
    """Ask for one value; dismisses with the text (Enter) or None (Escape)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, question: str, placeholder: str = "", value: str = "") -> None:
        super().__init__()
        self.question, self.placeholder, self.value = question, placeholder, value

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(plain(self.question), id="question")
            yield Input(value=self.value, placeholder=self.placeholder, id="answer")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class RowsScreen(ModalScreen[None]):
    """Show rows (e.g. a preview's result) in a table; Escape closes it."""

    BINDINGS = [Binding("escape,q", "close", "Close")]

    def __init__(self, title: str, columns: list[str], rows: list[dict[str, Any]]) -> None:
        super().__init__()
        self.title_text, self.columns, self.rows = title, columns, by_window(columns, rows)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(plain(f"{self.title_text}, {rows_hint(self.columns, len(self.rows))}"), id="question")
            yield DataTable(id="rows", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*(plain(c) for c in self.columns))
        for row in self.rows:  # a preview's values come from the topics: shown as text
            table.add_row(*(plain(str(row.get(c))) for c in self.columns))
        table.focus()

    def action_close(self) -> None:
        self.dismiss(None)
