"""The console's dagger screen shows no watermark for a query without one: Spark reports the epoch
(``1970-01-01T00:00:00.000Z``) for a query with no event time, which read as a watermark of 1970."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.text import Text
from sqlalchemy import select
from textual.widgets import Static

from job.control import ControlPlane, Registry
from job.control.models import Dagger, DaggerStatus
from tests.tui.tui_world import NOW, build
from tui.app import DaggersApp
from tui.detail import DaggerScreen


@pytest.mark.asyncio
async def test_a_query_without_event_time_shows_no_watermark(tmp_path: Path) -> None:
    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    try:
        build(registry)
        with registry.session() as s:
            status = s.get(
                DaggerStatus, s.scalars(select(Dagger.id).where(Dagger.name == "live-bookings")).one()
            )
            assert status is not None
            status.progress = {**status.progress, "watermark": "1970-01-01T00:00:00.000Z"}
        app = DaggersApp(ControlPlane(registry, "alice"), clock=lambda: NOW, refresh_s=0, warm_preview=False)
        async with app.run_test(size=(160, 40)) as pilot:
            app.open_dagger("team-a/live-bookings")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DaggerScreen)
            status_text = screen.query_one("#status", Static).content
            assert isinstance(status_text, Text)
            line = next(x for x in status_text.plain.splitlines() if x.startswith("watermark"))
            assert line.startswith("watermark - · last update "), line
    finally:
        registry.close()
