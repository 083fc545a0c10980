"""The console driven by keys with Textual's Pilot, asserting on screens and on the registry, with an
SVG snapshot of each screen (tests/tui/snapshots/). Team isolation holds in the console too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Collapsible, DataTable, Input, Select, SelectionList, Sparkline, Static, Switch

from job.control import ControlPlane, Registry
from job.control.models import Dagger
from job.control.rates import rate_series
from job.control.specs import raw_spec
from tests.tui.tui_world import NOW, check_snapshot, copy_registry, keys, settle, until
from tui.app import DaggersApp
from tui.clusters import ClustersScreen
from tui.daggers import DaggersScreen
from tui.detail import DaggerScreen
from tui.form import DaggerFormScreen
from tui.modals import AskScreen, ConfirmScreen
from tui.sql_area import SqlArea

SIZE = (120, 40)


@pytest.fixture
def world(built: Path, tmp_path: Path) -> Iterator[Registry]:
    """The world of :func:`build`: a copy of the module's, each test its own (tests here change it)."""
    reg = copy_registry(built, tmp_path / "registry.db")
    yield reg
    reg.close()


def console(registry: Registry, user: str) -> DaggersApp:
    return DaggersApp(ControlPlane(registry, user), clock=lambda: NOW, refresh_s=0, warm_preview=False)


@asynccontextmanager
async def detail_of(
    registry: Registry, user: str, ref: str
) -> AsyncIterator[tuple[DaggersApp, Pilot[None], DaggerScreen]]:
    """Run the console as ``user`` with dagger ``ref``'s detail screen open."""
    app = console(registry, user)
    async with app.run_test(size=SIZE) as pilot:
        app.open_dagger(ref)
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen)
        yield app, pilot, app.screen


def text_of(widget: Static) -> str:
    """The text a Static shows (Rich Text, Syntax or plain string content)."""
    content = widget.content
    return str(getattr(content, "plain", None) or getattr(content, "code", None) or content)


def rows(table: DataTable) -> list[list[str]]:  # type: ignore[type-arg]
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


@pytest.mark.asyncio
async def test_clusters_grouped_by_datacentre_with_health(world: Registry) -> None:
    app = console(world, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClustersScreen)
        table = screen.query_one(DataTable)
        assert [str(k.value) for k in table.rows] == ["dc:jkt", "cluster:a-jkt", "dc:sgp", "cluster:a-sgp"]
        jkt = rows(table)[1]
        assert jkt[:5] == ["  a-jkt", "team-a", "spark://gw-1:7077", "healthy", "1/21"]
        assert jkt[5:] == ["● ok 2/2w 3/8c 10s", "● ok 96p 10s", "● ok 10s", "● 5s ago"]
        assert rows(table)[3][3:] == ["unhealthy", "0/0", "○ unknown", "○ unknown", "○ unknown", "○ none"]
        assert table.cursor_row == 1  # the first cluster, not the data-centre row
        await check_snapshot(pilot, "clusters")
        await pilot.press("down", "down", "enter")
        assert isinstance(app.screen, DaggersScreen) and app.screen.cluster == "a-sgp"


@pytest.mark.asyncio
async def test_daggers_search_sort_and_pages(world: Registry) -> None:
    app = console(world, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DaggersScreen) and screen.cluster == "a-jkt"
        table = screen.query_one("#daggers", DataTable)
        assert table.row_count == 15 and rows(table)[0][0] == "dag-00"
        assert text_of(screen.query_one("#pager", Static)) == "page 1/2 · 21 shown · sorted by name"
        await check_snapshot(pilot, "daggers")
        await pilot.press("right_square_bracket")
        assert [r[0] for r in rows(table)] == [
            "dag-15",
            "dag-16",
            "dag-17",
            "dag-18",
            "dag-19",
            "live-bookings",
        ]
        await pilot.press("right_square_bracket")  # no page 3
        assert screen.page == 1
        await pilot.press("left_square_bracket")
        assert rows(table)[0][0] == "dag-00"
        await pilot.press("s")  # by state: created ones, then running
        assert text_of(screen.query_one("#pager", Static)).endswith("sorted by state")
        await pilot.press("s")  # by rows/s: the running one first
        assert rows(table)[0][:5] == ["live-bookings", "team-a", "1", "running", "running"]
        assert rows(table)[0][5:9] == ["4.2k", "1.2k", "1.4k", "1"]  # rows over wall time, not Spark's 4.8k
        await pilot.press("slash", *keys("dag-1"))
        assert screen.query_one("#search", Input).value == "dag-1"
        assert [r[0] for r in rows(table)] == [f"dag-1{i}" for i in range(10)]
        await pilot.press("enter")  # back to the table, then open the highlighted dagger
        await pilot.press("down", "enter")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen) and app.screen.ref == "team-a/dag-11"
        await pilot.press("escape")
        assert app.screen is screen


@pytest.mark.asyncio
async def test_dagger_detail_and_its_actions(world: Registry) -> None:
    async with detail_of(world, "alice", "live-bookings") as (app, pilot, screen):
        plane = app.plane
        status = text_of(screen.query_one("#status", Static))
        assert (
            "team-a/live-bookings  on a-jkt (jkt)  running (reading)  controller: running  desired running"
            in status
        )
        assert "pid 4242 on gw-1 · up 1h · restarts 1" in status
        assert "rows read 3.5M · 4.2k rows/s · batch 1.4k ms · lag 1.2k" in status
        samples = plane.samples("live-bookings")
        # rows/s over wall time (the health model's figure), not each batch's own rate
        assert screen.query_one("#throughput-spark", Sparkline).data == rate_series(samples, 60.0)
        assert screen.query_one("#lag-spark", Sparkline).data == [float(s.lag or 0) for s in samples]
        assert "Sink error: InfluxDB answered 503" in text_of(screen.query_one("#error", Static))
        await check_snapshot(pilot, "detail")

        await pilot.press("s")
        assert plane.dagger("live-bookings").desired_state == "stopped"
        await pilot.press("d")
        assert plane.dagger("live-bookings").desired_state == "running"
        await pilot.press("r")
        with world.session() as s:
            assert s.query(Dagger).filter_by(name="live-bookings").one().restart_generation == 1

        await pilot.press("k")
        assert isinstance(app.screen, AskScreen)
        app.screen.query_one(Input).value = ""
        await pilot.press(*keys("bookings-out"), "enter")
        await pilot.pause()
        assert plane.dagger("live-bookings").current_version == 2
        sinks = raw_spec(plane.version("live-bookings", 2).spec_text)["sinks"]
        assert sinks[1]["type"] == "kafka" and sinks[1]["topic"] == "bookings-out"

        versions = screen.query_one("#versions", DataTable)
        assert [r[0] for r in rows(versions)] == ["2", "1"]
        assert "+  topic: bookings-out" in text_of(screen.query_one("#diff", Static))
        await pilot.press("2", "down")  # the Versions tab; select v1
        assert screen.selected_version() == 1
        await pilot.press("b")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
        assert plane.dagger("live-bookings").current_version == 3
        assert plane.version("live-bookings", 3).spec_text == plane.version("live-bookings", 1).spec_text

        await pilot.press("x")  # alice is an editor: deleting needs the admin role
        await pilot.press("y")
        await pilot.pause()
        assert plane.dagger("live-bookings").desired_state == "running"
        assert any("needs the admin role" in n.message for n in app._notifications)
        assert isinstance(app.screen, DaggerScreen)


@pytest.mark.asyncio
async def test_moving_a_dagger_to_another_cluster_of_the_team(world: Registry) -> None:
    async with detail_of(world, "alice", "live-bookings") as (app, pilot, screen):
        plane = app.plane
        await pilot.press("m")
        ask = app.screen
        assert isinstance(ask, AskScreen) and ask.query_one(Input).placeholder == "a-sgp"
        await pilot.press(*keys("b-jkt"), "enter")  # team-b's cluster: refused by the control plane
        await pilot.pause()
        assert plane.dagger("live-bookings").cluster == "a-jkt"
        assert any(
            "a cluster of another team" in n.message or "b-jkt" in n.message for n in app._notifications
        )
        await pilot.press("m", *keys("a-sgp"), "enter")
        await pilot.pause()
        moved = plane.dagger("live-bookings")
        assert (moved.cluster, moved.moving_from, moved.desired_state) == ("a-sgp", "a-jkt", "running")
        assert "on a-sgp (sgp)  moving from a-jkt" in text_of(screen.query_one("#status", Static))
        assert [(m.user, m.details["from"], m.details["to"]) for m in plane.moves("live-bookings")] == [
            ("alice", "a-jkt", "a-sgp")
        ]


@pytest.mark.asyncio
async def test_an_admin_deletes_from_the_console(world: Registry) -> None:
    app = console(world, "adam")
    async with app.run_test(size=SIZE) as pilot:
        app.open_dagger("team-a/dag-03")
        await pilot.pause()
        await pilot.press("x")
        assert isinstance(app.screen, ConfirmScreen)
        await check_snapshot(pilot, "confirm-delete")
        await pilot.press("y")
        await pilot.pause()
        assert not isinstance(app.screen, DaggerScreen)
        assert "dag-03" not in [d.name for d in app.plane.daggers()]


@pytest.mark.asyncio
async def test_new_dagger_form_validates_as_you_type_and_deploys(world: Registry, tansu_broker: str) -> None:
    from job.stack.broker import create_topic

    for topic in ("form-bookings", "form-other"):
        create_topic(tansu_broker, topic, 1)
    root = ControlPlane(world, "root")
    root.add_cluster(
        "a-live",
        team="team-a",
        datacentre="jkt",
        spark_master="local[2]",
        kafka_bootstrap=tansu_broker,
        influx_url="http://127.0.0.1:9",
    )
    app = console(world, "alice")
    async with app.run_test(size=SIZE) as pilot:
        app.new_dagger("a-live")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await settle(app)
        await pilot.pause()
        topics = form.query_one("#topics", SelectionList)
        names = [topics.get_option_at_index(i).value for i in range(topics.option_count)]
        assert "form-bookings" in names and "form-other" in names
        assert form.query_one("#proto", Select).value == "daggers.events.BookingLog"
        timestamps = form.query_one("#timestamp", Select)
        assert timestamps.value == "event_timestamp"

        await pilot.press(*keys("fresh-counts"))
        assert form.query_one("#group", Input).value == "dagger-fresh-counts"  # filled in
        topics.focus()
        await pilot.pause()
        if topics.highlighted is None:
            await pilot.press("down")
        while topics.get_option_at_index(topics.highlighted).value != "form-bookings":
            await pilot.press("down")
        await pilot.press("space")
        assert topics.selected == ["form-bookings"]
        await until(pilot, lambda: form.validation is not None and form.validation.ok, "a valid form")

        area = form.query_one("#sql", SqlArea)
        area.focus()
        await pilot.press(
            "ctrl+home", "end", *keys(" cty AS x,")
        )  # "SELECT city_id AS tag_city_id, cty AS x,"
        await until(pilot, lambda: not form.validation.ok, "the SQL error")
        result = form.validation
        assert result is not None and not result.ok
        assert (result.message, result.line, result.col) == ("unknown column cty", 1, 32)
        assert area.error_at == (1, 32)
        assert "line 1, column 32: unknown column cty — did you mean city_id?" in text_of(
            form.query_one("#validation", Static)
        )
        await pilot.press("ctrl+s")  # refused while invalid
        assert isinstance(app.screen, DaggerFormScreen)
        await pilot.press(*["backspace"] * 10)
        await until(pilot, lambda: form.validation.ok, "a valid form again")

        form.query_one("#advanced", Collapsible).collapsed = False
        await pilot.pause()
        light = form.query_one("#light", Switch)
        light.focus()
        await pilot.press("space")  # the light switch, by key
        assert light.value is True
        # a dagger of the cluster that reads the stream alike: the new one could be one query with it
        app.plane.create("a-live", form.spec_text().replace("fresh-counts", "twin-counts"), deploy=True)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen) and app.screen.ref == "team-a/fresh-counts"
        hints = [n.message for n in app._notifications if n.title == "Hint"]
        assert len(hints) == 1 and "as 1 other dagger of a-live does (team-a/twin-counts)" in hints[0], hints
        d = app.plane.dagger("fresh-counts")
        assert (d.cluster, d.desired_state, d.actual_state, d.created_by) == (
            "a-live",
            "running",
            "pending",
            "alice",
        )
        spec = raw_spec(app.plane.version("fresh-counts").spec_text)
        assert spec["streams"][0] | {} == {
            "table": "data_stream",
            "topics": ["form-bookings"],
            "proto_class": "daggers.events.BookingLog",
            "timestamp_field": "event_timestamp",
            "bootstrap_servers": tansu_broker,
            "group": "dagger-fresh-counts",
            "start_from": "earliest",
        }
        assert spec["sinks"] == [
            {
                "type": "influx",
                "url": "http://127.0.0.1:9",
                "database": "daggers",
                "measurement": "fresh_counts",
            }
        ]
        assert spec["light"] is True and "isolation" not in spec  # shared: the spec's default, not written


@pytest.mark.asyncio
async def test_editing_through_the_form_says_when_it_cannot_resume(world: Registry) -> None:
    app = console(world, "alice")
    async with app.run_test(size=SIZE) as pilot:
        app.open_dagger("dag-07")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen) and form.query_one("#name", Input).disabled
        await settle(app)  # the broker is not reachable: the spec's topic stays
        assert form.query_one("#topics", SelectionList).selected == ["booking-log"]
        await pilot.press("ctrl+home", "down", "end", *keys(" DistinctCount(nosuch),"))
        await pilot.pause(0.5)
        assert form.validation is not None and (
            form.validation.message,
            form.validation.line,
            form.validation.col,
        ) == ("unknown column nosuch", 2, 44)
        app.clear_notifications()
        await pilot.pause()
        await check_snapshot(pilot, "form-invalid")
        await pilot.press(*["backspace"] * len(" DistinctCount(nosuch),"))
        form.query_one("#watermark", Input).value = "20000"
        await pilot.pause(0.5)
        await pilot.press("ctrl+s")  # compatible: saved at once
        await pilot.pause()
        assert app.plane.dagger("dag-07").current_version == 2
        assert app.plane.history("dag-07")[-1].checkpoint_epoch == 1
        await pilot.press("e")
        await pilot.pause()
        form = app.screen
        area = form.query_one("#sql", SqlArea)
        area.text = area.text.replace("count(1) AS bookings", "sum(fare_idr) AS fares")
        await pilot.pause(0.5)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen), form.validation
        assert "the aggregation changed" in text_of(app.screen.query_one("#detail", Static))
        await pilot.press("y")
        await pilot.pause()
        history = app.plane.history("dag-07")
        assert [(v.version, v.checkpoint_epoch) for v in history] == [(1, 1), (2, 1), (3, 2)]


@pytest.mark.asyncio
async def test_team_b_sees_nothing_of_team_a_in_the_console(world: Registry) -> None:
    app = console(world, "bob")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        assert [str(k.value) for k in table.rows] == ["dc:jkt", "cluster:b-jkt"]
        await pilot.press("enter")
        await pilot.pause()
        assert [r[0] for r in rows(app.screen.query_one("#daggers", DataTable))] == ["b-secret"]
        for attempt in (
            lambda: app.open_dagger("team-a/live-bookings"),
            lambda: app.open_cluster("a-jkt"),
            lambda: app.new_dagger("a-jkt"),
        ):
            attempt()
            await pilot.pause()
            assert isinstance(app.screen, DaggersScreen)
        messages = [n.message for n in app._notifications]
        assert any("no dagger 'team-a/live-bookings' in your teams" in m for m in messages)
        assert sum("no cluster 'a-jkt' in your teams" in m for m in messages) == 2
        await pilot.press("ctrl+p", *keys("live"))
        await pilot.pause(0.5)
        from textual.command import CommandPalette

        palette = app.screen
        assert isinstance(palette, CommandPalette)
        assert "live-bookings" not in str(palette.query_one("CommandList").render())
        await pilot.press("escape")


@pytest.mark.asyncio
async def test_command_palette_opens_a_dagger(world: Registry) -> None:
    app = console(world, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p", *keys("open dagger team-a/dag-05"))
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen) and app.screen.ref == "team-a/dag-05"


@pytest.mark.asyncio
async def test_a_screen_reads_once_as_it_opens_and_again_when_it_comes_back(world: Registry) -> None:
    app = console(world, "alice")
    reads: list[str] = []
    for name in ("clusters", "dagger_screen"):
        read = getattr(app.plane, name)
        setattr(app.plane, name, lambda *a, _n=name, _r=read, **k: reads.append(_n) or _r(*a, **k))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert reads == ["clusters"]
        app.open_dagger("team-a/dag-05")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen)
        assert reads == ["clusters", "dagger_screen"]
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ClustersScreen)
        assert reads == ["clusters", "dagger_screen", "clusters"]


@pytest.mark.asyncio
async def test_the_command_palette_lists_the_daggers_once_per_opening(world: Registry) -> None:
    app = console(world, "alice")
    listed: list[int] = []
    daggers = app.plane.daggers
    app.plane.daggers = lambda *a, **k: listed.append(1) or daggers(*a, **k)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert listed == []  # the clusters screen lists no dagger
        await pilot.press("ctrl+p", *keys("open dagger team-a/dag-05"))
        await pilot.pause(0.5)
        assert listed == [1]  # once as the palette opened, not once a key typed
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DaggerScreen) and app.screen.ref == "team-a/dag-05"


@pytest.mark.asyncio
async def test_alerts_feed_shows_only_my_teams(world: Registry, tmp_path: Path) -> None:
    from alerting import AlertState, AlertStore, Level
    from alerting.store import HistoryEvent
    from tests.tui.tui_world import T
    from tui.alerts import AlertsScreen

    url = f"sqlite:///{tmp_path / 'alerts.db'}"
    store = AlertStore(url)
    states = [
        AlertState(
            fingerprint="a1",
            rule="bookings-drop",
            labels={
                "alertname": "bookings-drop",
                "rule": "bookings-drop",
                "team": "team-a",
                "tag_city_id": "1",
            },
            level=Level.CRIT,
            raw_level=Level.CRIT,
            since=T - 300,
            value=12.0,
            message="bookings in Jakarta fell to 12/min",
        ),
        AlertState(
            fingerprint="a2",
            rule="lag-high",
            labels={"alertname": "lag-high", "rule": "lag-high", "team": "team-a", "dagger": "live-bookings"},
            level=Level.WARN,
            raw_level=Level.WARN,
            since=T - 60,
            value=1200.0,
            message="lag 1200 records",
        ),
        AlertState(
            fingerprint="a3", rule="quiet", labels={"alertname": "quiet", "rule": "quiet", "team": "team-a"}
        ),
        AlertState(
            fingerprint="b1",
            rule="b-secret-rule",
            labels={"alertname": "b-secret-rule", "team": "team-b"},
            level=Level.CRIT,
            raw_level=Level.CRIT,
            since=T - 30,
            value=1.0,
            message="team b only",
        ),
    ]
    history = [
        HistoryEvent(
            at=T - 300,
            fingerprint="a1",
            rule="bookings-drop",
            event="level",
            from_level=0,
            to_level=2,
            value=12.0,
            detail="OK -> CRIT",
        ),
        HistoryEvent(
            at=T - 40,
            fingerprint="b1",
            rule="b-secret-rule",
            event="level",
            from_level=0,
            to_level=2,
            value=1.0,
            detail="OK -> CRIT",
        ),
    ]
    store.commit_evaluation(states, history, [])
    app = DaggersApp(
        ControlPlane(world, "alice"), clock=lambda: NOW, refresh_s=0, warm_preview=False, alerts_url=url
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, AlertsScreen)
        assert rows(screen.query_one("#alerts", DataTable)) == [
            [
                "CRIT",
                "bookings-drop",
                "team-a",
                "tag_city_id=1",
                "12",
                "6m",
                "bookings in Jakarta fell to 12/min",
            ],
            ["WARN", "lag-high", "team-a", "dagger=live-bookings", "1200", "2m", "lag 1200 records"],
        ]
        assert rows(screen.query_one("#alert-history", DataTable)) == [
            ["2026-03-02 09:55", "bookings-drop", "level", "CRIT", "OK -> CRIT"]
        ]
        assert text_of(screen.query_one("#alerts-summary", Static)) == "1 critical · 1 warning · teams team-a"
        await check_snapshot(pilot, "alerts")
        await pilot.press("escape")
        assert isinstance(app.screen, ClustersScreen)
    store.close()
    no_store = DaggersApp(ControlPlane(world, "alice"), refresh_s=0, warm_preview=False)
    async with no_store.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(no_store.screen, ClustersScreen)
        assert any("no alert store configured" in n.message for n in no_store._notifications)
