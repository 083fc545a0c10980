"""The console shows text from users as text (issue 49, item 8): an editor's version comment, a dagger's last
error and a preview's values with ESC sequences, an OSC-8 link and Rich markup are drawn as written, escaped,
with no style of theirs, on the screen Textual's Pilot drives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text
from sqlalchemy import select
from textual.widgets import DataTable, Label, Static

from job.control import ControlPlane, Registry
from job.control.models import Dagger, DaggerStatus
from tests.job.control.control_seed import bookings_spec
from tests.tui.tui_world import NOW, build, until
from tui.app import DaggersApp
from tui.detail import DaggerScreen
from tui.modals import RowsScreen

EVIL = (
    "\x1b[2J \x1b[31mred [bold red]x[/] \x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\ [link=http://e]l[/link]"
)
SHOWN = "\\x1b[2J \\x1b[31mred [bold red]x[/] \\x1b]8;;http://evil\\x1b\\click\\x1b]8;;\\x1b\\ [link=http://e]l[/link]"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Registry]:
    """tui_world's registry; alice saved live-bookings' version 2 with EVIL as its comment, and its last error
    quotes EVIL (as a bad record's value would be)."""
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    build(registry)
    ControlPlane(registry, "alice").edit(
        "live-bookings",
        bookings_spec("live-bookings").replace("trigger_interval_s: 1", "trigger_interval_s: 2"),
        comment=EVIL,
    )
    with registry.session() as s:
        status = s.get(DaggerStatus, s.scalars(select(Dagger.id).where(Dagger.name == "live-bookings")).one())
        assert status is not None
        status.last_error = f"Sink error: {EVIL}"
    yield registry
    registry.close()


def drawn(widget: DataTable) -> list[str]:  # type: ignore[type-arg]
    """The lines ``widget`` draws now, as the terminal would get their text."""
    return ["".join(segment.text for segment in widget.render_line(y)) for y in range(widget.size.height)]


def literal(cell: object, plain: str) -> None:
    """``cell`` is text shown as ``plain``: no markup read, no style of its own."""
    assert isinstance(cell, Text) and cell.plain == plain and not cell.spans, repr(cell)


@pytest.mark.asyncio
async def test_a_comment_an_error_and_a_preview_are_shown_as_text(world: Registry) -> None:
    app = DaggersApp(ControlPlane(world, "vera"), clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=(160, 40)) as pilot:  # a viewer reads what an editor wrote
        app.open_dagger("team-a/live-bookings")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DaggerScreen)
        error = screen.query_one("#error", Static).content
        assert (
            isinstance(error, Text)
            and error.plain == f"last error (before it started again 1h ago): Sink error: {SHOWN}"
        )
        assert [str(span.style) for span in error.spans] == [] and str(error.style) == "red"

        screen.action_tab("versions-tab")
        versions = screen.query_one("#versions", DataTable)
        await until(pilot, lambda: versions.row_count == 2 and versions.size.height > 0, "the versions table")
        newest = versions.get_row_at(0)
        assert str(newest[0]) == "2"
        literal(newest[2], "alice")
        literal(newest[4], SHOWN)
        lines = drawn(versions)
        assert not any("\x1b" in line or "\x9b" in line for line in lines)
        assert any(SHOWN[:60] in line for line in lines), lines  # drawn as written (the column is wide)

        app.push_screen(
            RowsScreen(f"preview of {EVIL}", ["city", "bookings"], [{"city": EVIL, "bookings": 3}])
        )
        await pilot.pause()
        rows = app.screen.query_one("#rows", DataTable)
        literal(rows.get_row_at(0)[0], SHOWN)
        literal(rows.get_row_at(0)[1], "3")
        title = app.screen.query_one("#question", Label).content
        assert isinstance(title, Text) and title.plain.startswith(f"preview of {SHOWN}, ")
