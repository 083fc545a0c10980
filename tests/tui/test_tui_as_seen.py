"""The console as a new user saw it (issue 36): a sparkline of zeros lies flat, nouns agree with their
counts, picked topics carry a mark, a blank form shows no error, and a local cluster's Spark screen says
why it has no workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import DataTable, SelectionList, Static

from job.control import ControlPlane, Registry
from job.control.models import Dagger, Sample
from tests.job.control.control_seed import bookings_spec
from tests.tui.tui_world import NOW, T, build, keys, settle, until
from tui.app import DaggersApp
from tui.cluster_health import ClusterHealthScreen
from tui.detail import DaggerScreen
from tui.form import DaggerFormScreen

SIZE = (120, 40)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    build(reg)
    yield reg
    reg.close()


def console(registry: Registry, user: str = "alice") -> DaggersApp:
    return DaggersApp(ControlPlane(registry, user), clock=lambda: NOW, refresh_s=0, warm_preview=False)


def drawn(widget: Widget) -> list[str]:
    """Return the lines ``widget`` draws, as plain text."""
    width, height = widget.outer_size
    return [strip.text for strip in widget.render_lines(Region(0, 0, width, height))]


def text_of(widget: Static) -> str:
    """The text a Static shows."""
    content = widget.content
    return str(getattr(content, "plain", None) or content)


def options(widget: Widget) -> list[str]:
    """Return the options a selection list draws (its border left out), with their toggles."""
    return [line[line.index("▐") :].rstrip(" ▎▊") for line in drawn(widget) if "▐" in line]


def add_samples(registry: Registry, name: str, rows_per_s: list[float]) -> None:
    """Give dagger ``name`` one sample a second per value of ``rows_per_s`` (the rows read in all rising so;
    lag and batch time 0)."""
    with registry.session() as s:
        dagger = s.query(Dagger).filter_by(name=name).one()
        s.add_all(
            Sample(
                dagger_id=dagger.id,
                at=T + i,
                input_rows=int(sum(rows_per_s[: i + 1])),
                input_rows_per_s=v,
                processed_rows_per_s=v,
                batch_duration_ms=0,
                lag=0,
            )
            for i, v in enumerate(rows_per_s)
        )


@pytest.mark.asyncio
@pytest.mark.parametrize("samples", [[0.0], [0.0, 0.0, 0.0]])
async def test_a_sparkline_of_zeros_lies_flat(world: Registry, samples: list[float]) -> None:
    add_samples(world, "dag-01", samples)
    app = console(world)
    async with app.run_test(size=SIZE) as pilot:
        app.open_dagger("dag-01")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DaggerScreen)
        for key in ("throughput", "lag", "batch"):
            lines = drawn(screen.query_one(f"#{key}-spark"))
            assert len(lines) == 3
            assert lines[:2] == [" " * len(lines[0])] * 2 and set(lines[2]) == {"▁"}, (key, lines)
        # a series with something in it still rises to its peak
        add_samples(world, "dag-02", [0.0, 5.0])
        app.open_dagger("dag-02")
        await pilot.pause()
        assert "█" in "".join(drawn(app.screen.query_one("#throughput-spark")))


@pytest.mark.asyncio
async def test_one_of_a_kind_is_said_in_the_singular(tmp_path: Path) -> None:
    from job.control import bootstrap_admin

    registry = Registry(f"sqlite:///{tmp_path / 'one.db'}")
    bootstrap_admin(registry, "root")
    root = ControlPlane(registry, "root")
    root.add_team("solo")
    root.add_datacentre("jkt")
    root.add_cluster(
        "only",
        team="solo",
        datacentre="jkt",
        spark_master="local[2]",
        kafka_bootstrap="127.0.0.1:9",
        influx_url="http://127.0.0.1:9",
    )
    root.create("only", bookings_spec("lonely"))
    app = DaggersApp(root, clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert str(app.screen.query_one("#summary").content).startswith("1 cluster in 1 data centre · ")
        await pilot.press("enter")
        await pilot.pause()
        assert (
            str(app.screen.query_one("#title").content) == "cluster only · 1 dagger, 1 stopped"
        )  # the health model's states
    registry.close()


@pytest.mark.asyncio
async def test_picked_topics_carry_a_mark(world: Registry) -> None:
    app = console(world)
    async with app.run_test(size=SIZE) as pilot:
        app.open_dagger("dag-07")
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await settle(app)  # the broker is not reachable: the spec's topic stays
        form._set_topics(["booking-log", "other-log"], ["booking-log"])
        topics = form.query_one("#topics", SelectionList)
        await pilot.pause()
        assert options(topics) == ["▐✓▌ booking-log", "▐ ▌ other-log"]
        topics.focus()
        topics.highlighted = 1
        await pilot.press("space")  # pick other-log too
        await pilot.pause()
        assert options(topics) == ["▐✓▌ booking-log", "▐✓▌ other-log"]


@pytest.mark.asyncio
async def test_the_spark_screen_of_a_local_cluster_says_why_it_lists_no_workers(world: Registry) -> None:
    ControlPlane(world, "root").add_cluster(
        "a-local",
        team="team-a",
        datacentre="jkt",
        spark_master="local[2]",
        kafka_bootstrap="127.0.0.1:9",
        influx_url="http://127.0.0.1:9",
    )
    app = console(world)
    async with app.run_test(size=SIZE) as pilot:
        app.open_spark("a-local")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClusterHealthScreen)
        await settle(app)
        await pilot.pause()
        assert screen.live
        spark = screen.health["spark"]
        note = screen.query_one("#local-note", Static)
        assert note.display and str(note.content) == (
            "Local mode (local[2]): no Spark workers nor applications to list. Each dagger runs Spark inside its own "
            f"process on the gateway machine itself, with 2 cores and {spark['memory_mb']:,} MB of memory "
            f"({spark['memory_used_mb']:,} MB in use)."
        )
        assert screen.query_one("#workers", DataTable).row_count == 0
        await pilot.press("escape")
        app.open_spark("a-jkt")  # a standalone cluster: no such note
        await pilot.pause()
        assert not app.screen.query_one("#local-note", Static).display


@pytest.mark.asyncio
async def test_a_blank_form_says_nothing_until_the_user_types_then_names_the_field(world: Registry) -> None:
    app = console(world)
    async with app.run_test(size=SIZE) as pilot:
        app.new_dagger("a-jkt")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await settle(app)  # the topics: the broker is not reachable, none to pick
        await until(pilot, lambda: form.validation is not None, "the first validation")
        shown = form.query_one("#validation", Static)
        assert form.validation is not None and not form.validation.ok  # known, but not said yet
        assert str(shown.content) == "" and not shown.has_class("invalid")
        await pilot.press("x")
        said = (
            "✗ Name: 'x' must be 2-63 lower-case letters, digits or dashes, starting with a letter\n"
            "✗ Topics: pick at least one topic"
        )
        await until(pilot, lambda: text_of(shown) != "", "the errors said")
        assert text_of(shown) == said
        await pilot.press(*keys("-counts"))
        await until(pilot, lambda: "Name" not in text_of(shown), "the name's error gone")
        assert text_of(shown) == "✗ Topics: pick at least one topic"
        await pilot.press("ctrl+s")  # refused, and still said by field
        assert (
            isinstance(app.screen, DaggerFormScreen) and text_of(shown) == "✗ Topics: pick at least one topic"
        )


@pytest.mark.asyncio
async def test_deploying_a_blank_form_says_what_is_missing(world: Registry) -> None:
    app = console(world)
    async with app.run_test(size=SIZE) as pilot:
        app.new_dagger("a-jkt")
        await pilot.pause()
        await settle(app)
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert text_of(form.query_one("#validation", Static)) == (
            "✗ Name: '' must be 2-63 lower-case letters, digits or dashes, starting with a letter\n"
            "✗ Topics: pick at least one topic"
        )


@pytest.mark.asyncio
async def test_a_preview_shows_every_row_by_window_and_its_progress_while_it_runs(world: Registry) -> None:
    from datetime import UTC, datetime

    from job.query.preview import PreviewProgress

    # 11 rows, as Spark may return them: not in window order
    ends = [datetime(2026, 3, 2, 9, 55 + m, tzinfo=UTC) for m in (3, 1, 4, 0, 2, 3, 1, 0, 4, 2, 3)]
    rows = [{"tag_city_id": 10 + i, "events": i, "window_timestamp": end} for i, end in enumerate(ends)]
    columns = ["tag_city_id", "events", "window_timestamp"]
    app = console(world)
    async with app.run_test(size=(160, 48)) as pilot:
        app.new_dagger("a-jkt")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, DaggerFormScreen)
        await settle(app)
        status = form.query_one("#preview-status", Static)
        form._preview_progress(PreviewProgress(111.4, stages_done=1, stages=2, tasks_done=3, tasks=4))
        assert text_of(status) == (
            "preview: reading the last 5 minutes of the topics… 111 s · Spark stage 2 of 2 · "
            "3 of 4 tasks done"
        )
        form._show_preview(columns, rows, 3.21)
        await pilot.pause()
        await pilot.pause()  # the table has its height; then the form scrolls it into view
        table = form.query_one("#preview-rows", DataTable)
        shown = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        want = sorted(
            ([str(r["tag_city_id"]), str(r["events"]), str(r["window_timestamp"])] for r in rows),
            key=lambda r: (r[2], r[0]),
        )
        assert shown == want and len(shown) == 11
        assert text_of(status) == (
            "preview: 11 rows in 3.2 s (nothing deployed, no consumer group used), below, "
            "sorted by window_timestamp; ↑↓ or the mouse wheel scroll them"
        )
        # every row is on the screen: the header and 11 rows, inside the 160x48 terminal
        region = table.region
        assert region.height >= 12 and region.y >= 0 and region.bottom <= 48, region
