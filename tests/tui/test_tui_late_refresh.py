"""The console never dies of a late refresh. A refresh reads the plane in a worker thread; its answer may come
after the operator left the screen, while Textual is still taking the screen's widgets down (a widget whose
children are gone is still mounted, its worker not yet cancelled): the console once exited with ``NoMatches:
No nodes match '#output-chart'`` when the Output tab's answer landed then.

Each test holds one plane call of a screen (:class:`tests.tui.tui_world.HeldPlane`), leaves the screen, releases
the call in that very moment (once a widget of the screen has left the DOM, the screen not yet) and lets the
answer land; the console still runs and shows the screen it went back to."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from job.control import ControlPlane, Registry
from job.sinks.influx import InfluxSink
from job.spec import InfluxSinkSpec
from tests.job.control.control_seed import bookings_spec
from tests.tui.tui_world import NOW, HeldPlane, build, copy_registry, until
from tui.app import DaggersApp
from tui.cluster_health import ClusterHealthScreen
from tui.clusters import ClustersScreen
from tui.daggers import DaggersScreen
from tui.detail import DaggerScreen
from tui.form import DaggerFormScreen

SIZE = (120, 40)
REFRESH_S = 0.2
OUTPUT_DB = "tui_late_refresh"


@pytest.fixture
def world(built: Path, tmp_path: Path) -> Iterator[Registry]:
    """The world of :func:`build`: a copy of the module's, each test its own."""
    reg = copy_registry(built, tmp_path / "registry.db")
    yield reg
    reg.close()


def console(plane: HeldPlane, refresh_s: float = 0) -> DaggersApp:
    return DaggersApp(plane, clock=lambda: NOW, refresh_s=refresh_s, warm_preview=False)


async def leave_while_held(pilot: Pilot[None], plane: HeldPlane, gone: str, kept: str) -> Screen[Any]:
    """Leave the app's screen while a held call of it waits in a worker thread, and let the call answer while
    Textual takes the screen down: widget ``gone`` has left the DOM, the screen (and widget ``kept``, held busy
    meanwhile) not yet. Return the screen the console went back to, once the left one is removed."""
    app = pilot.app
    await until(pilot, plane.held.is_set, "the held call")
    left = app.screen
    leaf: Widget = left.query_one(gone)
    busy = asyncio.Event()
    left.query_one(kept).call_later(busy.wait)  # its removal waits for this: so does the screen's
    try:
        app.pop_screen()
        for _ in range(10_000):  # step the event loop until the first widget is gone
            if not leaf.is_attached:
                break
            await asyncio.sleep(0)
        assert not leaf.is_attached and left.is_attached, (
            "the screen went down at once: no late answer to land"
        )
        plane.release.set()
        # the app's own messages wait for the removal meanwhile: poll the event loop, not the Pilot
        deadline = time.monotonic() + 60
        while not (plane.answered.is_set() and all(w.is_finished for w in app.workers)):
            assert time.monotonic() < deadline, "waited 60 s for the held call's answer to land"
            await asyncio.sleep(0.05)
        assert app.return_code is None, "the console exited"
    finally:
        busy.set()
    await until(pilot, lambda: not left.is_attached, "the screen to be removed")
    await pilot.pause()
    assert app.is_running and app.return_code is None
    return app.screen


@pytest.fixture
def output_world(tmp_path: Path, influxdb) -> Iterator[Registry]:  # type: ignore[no-untyped-def]
    """The console's world over a real InfluxDB, with dagger out-late whose sink holds one window."""
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    build(reg, influx=influxdb.url)
    ControlPlane(reg, "alice").create(
        "a-jkt", bookings_spec("out-late", db=OUTPUT_DB, measurement="bookings")
    )
    influxdb.query(f'DROP DATABASE "{OUTPUT_DB}"')
    influxdb.create_database(OUTPUT_DB)
    sink = InfluxSink(
        InfluxSinkSpec(type="influx", url=influxdb.url, database=OUTPUT_DB, measurement="bookings")
    )
    sink.open()
    sink.write(
        pa.table(
            {
                "tag_city_id": pa.array([1], pa.int32()),
                "bookings": pa.array([7], pa.int64()),
                "window_timestamp": pa.array(
                    [datetime.fromtimestamp(NOW - 60, UTC)], pa.timestamp("us", tz="UTC")
                ),
            }
        ),
        0,
    )
    sink.close()
    yield reg
    reg.close()


@pytest.mark.asyncio
async def test_leaving_the_output_tab_while_its_read_is_in_flight(output_world: Registry) -> None:
    """The crash as it was seen: the chart's series land after the operator left."""
    plane = HeldPlane(output_world, "alice")
    app = console(plane)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        app.open_dagger("out-late")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen)
        plane.hold = {"output"}
        await pilot.press("4")  # the Output tab reads the sink's fields, then its series, in workers
        assert await leave_while_held(pilot, plane, "#output-chart", "#output-summary") is clusters


@pytest.mark.asyncio
@pytest.mark.parametrize("tab", ["1", "2", "3", "4"], ids=["spec", "versions", "audit", "output"])
async def test_leaving_a_dagger_tab_while_its_periodic_refresh_is_in_flight(
    world: Registry, tab: str
) -> None:
    plane = HeldPlane(world, "alice")
    app = console(plane, REFRESH_S)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        app.open_dagger("live-bookings")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen)
        await pilot.press(tab)
        plane.hold = {"dagger_screen", "output", "output_fields"}
        assert await leave_while_held(pilot, plane, "#status", "#tabs") is clusters


@pytest.mark.asyncio
async def test_leaving_the_daggers_of_a_cluster_while_their_refresh_is_in_flight(world: Registry) -> None:
    plane = HeldPlane(world, "alice")
    app = console(plane, REFRESH_S)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        app.open_cluster("a-jkt")
        await pilot.pause()
        assert isinstance(app.screen, DaggersScreen)
        plane.hold = {"daggers"}
        assert await leave_while_held(pilot, plane, "#pager", "#daggers") is clusters


@pytest.mark.asyncio
async def test_leaving_the_spark_screen_while_its_probe_is_in_flight(world: Registry) -> None:
    plane = HeldPlane(world, "alice")
    plane.hold = {"cluster_health live"}
    app = console(plane)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        app.open_spark("a-jkt")
        await pilot.pause()
        assert isinstance(app.screen, ClusterHealthScreen)
        assert await leave_while_held(pilot, plane, "#title", "#apps") is clusters


@pytest.mark.asyncio
async def test_leaving_the_form_while_its_topics_are_read(world: Registry) -> None:
    plane = HeldPlane(world, "alice")
    plane.hold = {"cluster_topics"}
    app = console(plane)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        app.new_dagger("a-jkt")
        await pilot.pause()
        assert isinstance(app.screen, DaggerFormScreen)
        assert await leave_while_held(pilot, plane, "#topics", "#validation") is clusters


@pytest.mark.asyncio
async def test_the_form_validates_in_a_worker_while_the_user_types(world: Registry) -> None:
    """A check of the spec that takes its time (a server far away) never holds the keyboard: the user types
    meanwhile, the answer for a text the form no longer holds is dropped, and the newest one shows."""
    from textual.widgets import Input, Static

    plane = HeldPlane(world, "alice")
    plane.hold = {"validate"}
    app = console(plane)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        app.new_dagger("a-jkt")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await until(pilot, plane.held.is_set, "the first check, in a worker thread")
        await pilot.press("x")  # the form's first field, focused
        assert form.query_one("#name", Input).value == "x" and form.validation is None
        plane.release.set()
        shown = form.query_one("#validation", Static)

        def said() -> str:
            return str(getattr(shown.content, "plain", shown.content))

        await until(pilot, lambda: said() != "", "the check of the typed name")
        assert form.validation is not None and not form.validation.ok
        assert said() == (
            "✗ Name: 'x' must be 2-63 lower-case letters, digits or dashes, starting with a letter\n"
            "✗ Topics: pick at least one topic"
        )


@pytest.mark.asyncio
async def test_the_clusters_screen_keeps_refreshing_after_a_late_answer(world: Registry) -> None:
    """The first screen is never left: a refresh of it that waits does not stop the next ones."""
    plane = HeldPlane(world, "alice")
    app = console(plane, REFRESH_S)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        assert isinstance(clusters, ClustersScreen)
        plane.hold = {"clusters"}
        await until(pilot, plane.held.is_set, "the held refresh")
        plane.hold = set()
        plane.release.set()
        await until(pilot, plane.answered.is_set, "the released refresh")
        await pilot.pause()
        assert app.screen is clusters and app.is_running
