"""The console shows a cluster's parts (Spark master, brokers, InfluxDB) as the health model judges them, with
the age of the probe they come from when it is old: a probe 3 minutes old reads "○ stale 3m", never "● ok"; a
part that missed one probe is "● slow" (a busy machine), two in a row or a refused connection "● down". A live
probe (``h``) shows its own verdict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from job.control import ControlPlane, Registry
from job.control.models import Cluster
from tests.tui.tui_world import HEALTH, NOW, HeldPlane, build, until
from tui.app import DaggersApp
from tui.cluster_health import ClusterHealthScreen
from tui.clusters import ClustersScreen

SIZE = (120, 40)
TIMED_OUT = {
    "ok": False,
    "bootstrap": "127.0.0.1:9",
    "refused": False,
    "error": 'KafkaError{code=_TIMED_OUT,val=-185,str="Failed to get metadata: Local: Timed out"}',
}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    build(reg)
    yield reg
    reg.close()


def record(registry: Registry, health: dict[str, Any], at: float) -> None:
    """Record ``health`` as a-jkt's last probe, taken at ``at`` (its controller beats at NOW - 5)."""
    with registry.session() as s:
        c = s.query(Cluster).filter(Cluster.name == "a-jkt").one()
        c.health, c.health_at = {**health, "checked_at": at}, at


def row(screen: ClustersScreen) -> list[str]:
    """a-jkt's row: state, spark, kafka, influx, controller."""
    table = screen.query_one(DataTable)
    cells = [str(c) for c in table.get_row(f"cluster:{screen.clusters[0].name}")]
    return [cells[3], *cells[5:]]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("health", "age_s", "shown"),
    [
        (HEALTH, 10, ["healthy", "● ok 2/2w 3/8c 10s", "● ok 96p 10s", "● ok 10s", "● 5s ago"]),
        (HEALTH, 180, ["degraded", "○ stale 3m", "○ stale 3m", "○ stale 3m", "● 5s ago"]),
        (
            {**HEALTH, "kafka": {**TIMED_OUT, "failures": 1}},
            10,
            ["healthy", "● ok 2/2w 3/8c 10s", "● slow 10s", "● ok 10s", "● 5s ago"],
        ),
        (
            {**HEALTH, "kafka": {**TIMED_OUT, "failures": 2}},
            10,
            ["unhealthy", "● ok 2/2w 3/8c 10s", "● down 10s", "● ok 10s", "● 5s ago"],
        ),
        (
            {
                **HEALTH,
                "influx": {"ok": False, "refused": True, "failures": 1, "error": "Connection refused"},
            },
            10,
            ["unhealthy", "● ok 2/2w 3/8c 10s", "● ok 96p 10s", "● down 10s", "● 5s ago"],
        ),
    ],
    ids=["fresh", "stale", "slow", "down", "refused"],
)
async def test_a_part_shows_the_health_models_state_with_its_probes_age(
    world: Registry, health: dict[str, Any], age_s: float, shown: list[str]
) -> None:
    record(world, health, NOW - age_s)
    app = DaggersApp(ControlPlane(world, "alice"), clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClustersScreen) and screen.clusters[0].name == "a-jkt"
        assert row(screen) == shown
        styles = {str(c): c.style for c in screen.query_one(DataTable).get_row("cluster:a-jkt")[5:8]}
        expected = {"●": {"slow": "yellow", "down": "bold red"}, "○": {"stale": "dim"}}
        for text, style in styles.items():
            word = text.split()[1]
            if word != "ok":
                assert style == expected[text[0]][word], (text, style)


@pytest.mark.asyncio
async def test_a_live_probe_shows_its_own_verdict_and_the_spark_screen_its_age(world: Registry) -> None:
    """The recorded probe is 3 minutes old: stale on both screens. ``h`` probes the (unreachable) parts from
    here: the master does not answer (slow: one probe), the brokers and InfluxDB refuse (down)."""
    record(world, HEALTH, NOW - 180)
    plane = HeldPlane(world, "alice")
    plane.hold = {"cluster_health live"}  # the Spark screen's own live probe waits: its recorded one shows
    app = DaggersApp(plane, clock=lambda: NOW, refresh_s=0, warm_preview=False)
    async with app.run_test(size=SIZE) as pilot, plane.holding():
        await pilot.pause()
        clusters = app.screen
        assert isinstance(clusters, ClustersScreen)
        app.open_spark("a-jkt")
        await pilot.pause()
        spark = app.screen
        assert isinstance(spark, ClusterHealthScreen)
        assert str(spark.query_one("#title", Static).render()) == "Spark of a-jkt  (recorded 3m ago)"
        master = str(spark.query_one("#master", Static).render())
        assert master == "-  ○ stale 3m  status ALIVE  memory 6144/16384 MB", master
        await pilot.press("escape")
        assert app.screen is clusters
        plane.hold = set()
        plane.release.set()
        await pilot.press("h")
        await until(pilot, lambda: row(clusters)[2] != "○ stale 3m", "the live probe's verdict", timeout=60)
        assert row(clusters) == ["unhealthy", "● slow 0s", "● down 0s", "● down 0s", "● 5s ago"]
