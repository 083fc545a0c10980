"""Preview from the console on a real broker and real Spark: the form's F5 and the detail screen's ``p``
show the query's rows over the last minutes of the topic, exactly, without deploying anything."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from job.control import ControlPlane, Registry
from job.produce.generator import generate
from job.produce.producer import produce
from job.stack.broker import create_topic
from tests.helpers import unique
from tests.job.control.control_seed import seed
from tests.tui.tui_world import new_dagger_preview, settle
from tui.app import DaggersApp
from tui.detail import DaggerScreen
from tui.modals import RowsScreen

pytestmark = pytest.mark.integration


def _end_s(value: datetime) -> int:
    return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp())


@pytest.mark.asyncio
async def test_preview_from_the_form_and_the_detail_screen(tansu_broker: str, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = unique("preview-bookings")
    create_topic(tansu_broker, topic, 2)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=90)
    batch = generate("booking", 600, seed=7, start=start, duration_s=20)
    produce(tansu_broker, topic, batch, progress=False)
    want = Counter(
        (r["city_id"], (int(r["event_timestamp"].timestamp()) // 60) * 60 + 60)
        for r in batch.table.to_pylist()
    )

    registry = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(registry, kafka=tansu_broker, influx="http://127.0.0.1:9")
    app = DaggersApp(ControlPlane(registry, "alice"), spark=spark, refresh_s=0)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await new_dagger_preview(app, pilot, "a-jkt", "previewed", topic)
        started = time.monotonic()
        await settle(app)
        await pilot.pause()
        seconds = time.monotonic() - started
        table = form.query_one("#preview-rows", DataTable)
        columns = [str(c.label) for c in table.columns.values()]
        assert columns == ["tag_city_id", "events", "window_timestamp"]
        status = str(form.query_one("#preview-status", Static).content)
        assert status.startswith(f"preview: {table.row_count} rows in ") and "nothing deployed" in status
        assert app.plane.daggers() == []  # nothing was created or deployed
        shown = {
            (int(str(r[0])), _end_s(datetime.fromisoformat(str(r[2])))): int(str(r[1]))
            for r in (table.get_row_at(i) for i in range(table.row_count))
        }
        assert shown == dict(want)
        print(f"\nform preview: {table.row_count} rows in {seconds:.1f} s")

        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen)
        await pilot.press("p")
        await settle(app)
        await pilot.pause()
        rows_screen = app.screen
        assert isinstance(rows_screen, RowsScreen)
        assert {
            (int(r["tag_city_id"]), _end_s(r["window_timestamp"])): int(r["events"]) for r in rows_screen.rows
        } == dict(want)
        await pilot.press("escape")
    registry.close()
