"""The dagger page's Output tab: known points written at known times to a real InfluxDB, charted with
D-1 and D-7 overlaid; the series it reads are exact, a tag filter and a range change re-read them, and
the screen matches its SVG snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from textual.widgets import Checkbox, Input, Label, Select, TabbedContent

from job.control import ControlPlane, Registry
from job.sinks.influx import InfluxSink
from job.spec import InfluxSinkSpec
from tests.job.control.control_seed import bookings_spec
from tests.tui.tui_world import NOW, build, check_snapshot, keys, pin_times, settle
from tui.app import DaggersApp
from tui.detail import DaggerScreen
from tui.output import OutputPane

pytestmark = pytest.mark.integration

DB = "tui_output_chart"
END = datetime.fromtimestamp(NOW, UTC)  # 2026-03-02 10:01:00 UTC, the console's pinned clock


def known_rows() -> pa.Table:
    """A ramp over the last 15 minutes (city 1 and 2), the day before lower, the week before flat."""
    rows = []
    for i in range(30):  # one window every 30 s, (09:46:00, 10:01:00]
        at = END - timedelta(seconds=30 * i)
        rows += [(at, 1, 30 - i), (at, 2, 2)]
        rows.append((at - timedelta(days=1), 1, (30 - i) // 2))
        rows.append((at - timedelta(days=7), 1, 5))
    return pa.table(
        {
            "tag_city_id": pa.array([r[1] for r in rows], pa.int32()),
            "bookings": pa.array([r[2] for r in rows], pa.int64()),
            "window_timestamp": pa.array([r[0] for r in rows], pa.timestamp("us", tz="UTC")),
        }
    )


@pytest.fixture
def world(tmp_path: Path, influxdb) -> Iterator[tuple[Registry, str]]:  # type: ignore[no-untyped-def]
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    build(reg, influx=influxdb.url)
    ControlPlane(reg, "alice").create("a-jkt", bookings_spec("out-chart", db=DB, measurement="bookings"))
    pin_times(reg, NOW - 60)
    influxdb.query(f'DROP DATABASE "{DB}"')
    influxdb.create_database(DB)
    sink = InfluxSink(InfluxSinkSpec(type="influx", url=influxdb.url, database=DB, measurement="bookings"))
    sink.open()
    sink.write(known_rows(), 0)
    sink.close()
    yield reg, influxdb.url
    reg.close()


@pytest.mark.asyncio
async def test_the_output_tab_charts_now_d1_and_d7(world: tuple[Registry, str]) -> None:
    registry, influx_url = world
    app = DaggersApp(ControlPlane(registry, "alice"), clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_dagger("out-chart")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DaggerScreen)
        await pilot.press("4")
        assert screen.query_one(TabbedContent).active == "output-tab"
        pane = screen.query_one(OutputPane)

        async def settled() -> None:
            for _ in range(3):  # fields, then the output
                await settle(app)
                await pilot.pause()

        await settled()
        assert screen.query_one("#output-field", Select).value == "bookings"
        out = pane.output
        assert out is not None and [s.label for s in out.series] == ["now", "D-1", "D-7"]
        assert out.server == influx_url
        now, d1, d7 = ([v for _, v in s.points] for s in out.series)
        assert now == [float(30 - i + 2) for i in reversed(range(30))]
        assert d1 == [float((30 - i) // 2) for i in reversed(range(30))]
        assert d7 == [5.0] * 30
        assert [t for t, _ in out.series[1].points] == [
            t for t, _ in out.series[0].points
        ]  # on one time axis
        summary = str(screen.query_one("#output-summary", Label).render())
        assert summary == (
            f"from measurement bookings in database {DB} · 30 steps · last: now 32 · D-1 15 · D-7 5"
        )
        await check_snapshot(pilot, "detail-output")

        # one tag value, without D-7, over an hour
        screen.query_one("#output-tag", Input).focus()
        await pilot.press(*keys("tag_city_id=2"), "enter")
        screen.query_one("#output-d7", Checkbox).value = False
        screen.query_one("#output-range", Select).value = "1h"
        await settled()
        out = pane.output
        assert out is not None and out.tag == ("tag_city_id", "2") and out.step_s == 120
        assert [s.label for s in out.series] == ["now", "D-1"]
        assert out.series[1].points == []  # the day before had no city 2
        # 2-minute steps from 09:46 hold 3 windows (09:46:30 to 09:47:30), then 4 each, then 3 (10:00:00 to 10:01:00)
        assert [v for _, v in out.series[0].points] == [6.0] + [8.0] * 6 + [6.0]
        assert out.series[0].points[0][0] == datetime(2026, 3, 2, 9, 46, tzinfo=UTC)


@pytest.mark.asyncio
async def test_a_dagger_without_a_readable_sink_says_so(world: tuple[Registry, str]) -> None:
    registry, _ = world
    head, _, _ = bookings_spec("out-log").partition("sink:\n")
    ControlPlane(registry, "alice").create("a-jkt", head + "sink:\n  type: log\n")
    app = DaggersApp(ControlPlane(registry, "alice"), clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_dagger("out-log")
        await pilot.pause()
        await pilot.press("4")
        await settle(app)
        await pilot.pause()
        summary = str(app.screen.query_one("#output-summary", Label).render())
        assert summary == (
            "Cannot read the dagger's output: dagger out-log writes to log: its output can be read "
            "from an influx, postgres or elasticsearch sink only"
        )
        assert app.screen.query_one(OutputPane).output is None
