"""Truth under real faults: a real broker (tansu), InfluxDB, Spark (one shared host, ``local[2]``) and a
controller process (bench/health_faults.py). After each fault, ``daggers dagger list --json`` (a separate
process) and the console (Textual Pilot) show the health model's state within the stated detection time;
the platform alerts for crash-looping, stalled, lagging and a silent controller fire once and resolve.

Detection times asserted (deadlines, generous; the thresholds are those of HEALTH_ENV):
first start 300 s; stopped 60 s; crash-looping 240 s, failed (after 5 restarts, the back-off 2 s doubling up to
8 s: crash-looping lasts ~25 s, the checks made in it take a few) 300 s; sink down 180 s; broker SIGSTOP (stalled
after 20 s silent) 120 s; lag growing (20 s window) 180 s; host JVM killed 120 s; host killed 120 s; controller
killed (silent after 10 s) 60 s; late events 120 s; broker down 180 s."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from alerting.health import CRASH_LOOPING, LAGGING, SILENT, STALLED
from bench import health_faults as faults
from bench.health_faults import HEALTH_ENV, Detection, HealthWorld
from tests.alerting.alert_setup import model_alert_engine

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]


class Watch:
    """The world, and a platform-alert engine over its registry that records what it sends."""

    def __init__(self, world: HealthWorld, root: Path) -> None:
        self.world = world
        self.engine, self.rec = model_alert_engine(world.plane, root)

    def alerts(self) -> list[tuple[str, str, str, dict[str, str]]]:
        """Evaluate the platform alerts now; return every notification sent so far."""
        self.engine.evaluate_platform()
        self.engine.dispatch()
        return [(n.rule, n.previous_level, n.level, n.tags) for n in self.rec.got]

    def console(self) -> dict[str, list[str]]:
        """Return the cluster a-jkt's dagger table in the console, by dagger: the cells as shown."""
        from textual.widgets import DataTable

        from tui.app import DaggersApp

        async def run() -> dict[str, list[str]]:
            app = DaggersApp(self.world.plane, refresh_s=0, warm_preview=False)
            async with app.run_test(size=(160, 40)) as pilot:
                app.open_cluster("a-jkt")
                await pilot.pause()
                table = app.screen.query_one("#daggers", DataTable)
                cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
                return {row[0]: row for row in cells}

        return asyncio.run(run())

    def console_shows(self, name: str, state: str, deadline_s: float = 30.0) -> dict[str, list[str]]:
        """Return the console's dagger table once dagger ``name`` shows ``state`` there, or as it was when
        ``deadline_s`` ran out (the CLI showed it first: on a loaded machine, a heartbeat can be late)."""
        started = time.monotonic()
        while True:
            cells = self.console()
            if cells.get(name, [""] * (STATE + 1))[STATE] == state or time.monotonic() - started > deadline_s:
                return cells
            time.sleep(0.5)


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watch]:
    root = tmp_path_factory.mktemp("health-faults")
    saved = {k: os.environ.get(k) for k in HEALTH_ENV}
    os.environ.update(HEALTH_ENV)  # this process (console, alerts) judges as the CLI and controller do
    world = HealthWorld(root / "world", backoff=(2.0, 8.0))
    try:
        world.start()
        w = Watch(world, root)
        yield w
        w.engine.close()
    finally:
        world.close(graceful=False)  # (no check is made of the end: a graceful one waits ~20 s on the broker)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def shown(d: Detection) -> dict[str, Any]:
    assert d.detected, f"{d.fault}: not {d.expected} within {d.deadline_s:.0f} s; last row {d.row}"
    return d.row


STATE, ROWS, LAG, BATCH = 4, 5, 6, 7  # the console's dagger table columns


def test_running_then_stopped_shows_no_figures(watch: Watch) -> None:
    row = shown(faults.first_running(watch.world))
    assert row["progress"]["input_rows"] == 2000 and row["health"]["rows_per_s"]["age_s"] >= 0
    assert watch.console_shows("steady", "running")["steady"][STATE] == "running"
    row = shown(faults.stopped(watch.world))
    assert row["health"]["reason"] == "stopped" and row["progress"]["input_rows"] == 2000  # kept, not shown
    assert watch.console_shows("steady", "stopped")["steady"][STATE : BATCH + 1] == ["stopped", "-", "-", "-"]
    shown(faults.redeployed(watch.world))


def test_crash_looping_then_failed_and_its_alert(watch: Watch) -> None:
    seen: dict[str, Any] = {}
    row = shown(
        faults.crash_looping(
            watch.world,
            during=lambda: seen.update(
                console=watch.console_shows("broken", "crash-looping"), alerts=watch.alerts()
            ),
        )
    )
    assert row["health"]["rows_per_s"] is None and "Sink error" in (row["last_error"] or "")
    assert seen["console"]["broken"][STATE] == "crash-looping"
    assert (CRASH_LOOPING, "OK", "CRIT", {"dagger": "broken"}) in seen["alerts"]
    row = shown(faults.failed_after_retries(watch.world))
    assert row["health"]["reason"].startswith("gave up after 6 crashes in a row: ")
    assert watch.console_shows("broken", "failed")["broken"][STATE] == "failed"
    sent = watch.alerts()
    assert [a for a in sent if a[0] == CRASH_LOOPING] == [
        (CRASH_LOOPING, "OK", "CRIT", {"dagger": "broken"}),
        (CRASH_LOOPING, "CRIT", "OK", {"dagger": "broken"}),
    ]
    watch.world.cli("dagger", "delete", "broken")


def test_sink_down_past_its_retries(watch: Watch) -> None:
    seen: dict[str, Any] = {}
    try:
        row = shown(
            faults.sink_down(
                watch.world,
                during=lambda: seen.update(console=watch.console_shows("steady", "crash-looping")),
            )
        )
        assert row["health"]["rows_per_s"] is None
        assert seen["console"]["steady"][STATE] == "crash-looping"
    finally:  # whatever the checks said: the next tests need the sink
        back = faults.sink_back(watch.world)
    shown(back)


def test_broker_paused_is_stalled_and_alerted(watch: Watch) -> None:
    watch.alerts()
    seen: dict[str, Any] = {}
    row = shown(
        faults.broker_paused(
            watch.world,
            during=lambda: seen.update(
                alerts=watch.alerts(), console=watch.console_shows("steady", "stalled")
            ),
        )
    )
    # the source answers Spark from what it knows (idle reports go on), but reads nothing: the controller
    # cannot read the brokers' end offsets either
    assert row["health"]["reason"].startswith(
        ("its brokers do not answer: ", "read no row for ", "no report for ")
    )
    rate = row["health"]["rows_per_s"]
    assert rate["value"] == 0.0 or not rate["fresh"]  # never its last rate shown as live
    assert (STALLED, "OK", "CRIT", {"dagger": "steady"}) in seen["alerts"]
    console = seen["console"]["steady"]
    assert console[STATE] == "stalled" and (console[ROWS] == "0" or console[ROWS].endswith(" old)"))
    shown(watch.world.wait("running after SIGCONT", "steady", "running", 240))
    assert [a for a in watch.alerts() if a[0] == STALLED] == [
        (STALLED, "OK", "CRIT", {"dagger": "steady"}),
        (STALLED, "CRIT", "OK", {"dagger": "steady"}),
    ]


def test_lag_growing_is_lagging_and_alerted(watch: Watch) -> None:
    seen: dict[str, Any] = {}
    row = shown(
        faults.lag_growing(
            watch.world,
            during=lambda: seen.update(console=watch.console_shows("slow", "lagging"), alerts=watch.alerts()),
        )
    )
    assert row["health"]["reason"].startswith("lag ") and row["lag"] > 300
    assert seen["console"]["slow"][STATE] == "lagging"
    assert (LAGGING, "OK", "WARN", {"dagger": "slow"}) in seen["alerts"]
    watch.world.cli("dagger", "stop", "slow")
    shown(watch.world.wait("slow stopped", "slow", "stopped", 60))
    assert [a for a in watch.alerts() if a[0] == LAGGING] == [
        (LAGGING, "OK", "WARN", {"dagger": "slow"}),
        (LAGGING, "WARN", "OK", {"dagger": "slow"}),
    ]
    watch.world.cli("dagger", "delete", "slow")
    shown(watch.world.wait("steady still running", "steady", "running", 120))


def test_host_jvm_then_host_process_killed(watch: Watch) -> None:
    row = shown(faults.host_jvm_killed(watch.world))
    assert row["restarts"] >= 1
    shown(watch.world.wait("running again", "steady", "running", 300))
    row = shown(faults.host_killed(watch.world))
    assert "shared application host" in (row["last_error"] or "")
    shown(watch.world.wait("running again", "steady", "running", 300))


def test_controller_killed_makes_its_daggers_unknown(watch: Watch) -> None:
    watch.alerts()
    seen: dict[str, Any] = {}
    try:
        row = shown(
            faults.controller_killed(
                watch.world,
                during=lambda: seen.update(
                    console=watch.console(),
                    alerts=watch.alerts(),
                    health=watch.world.cli("cluster", "health", "a-jkt"),
                ),
            )
        )
        assert row["health"]["reason"].startswith("its controller is silent for ")
        assert (row["health"]["rows_per_s"], row["health"]["lag"]) == (None, None)
        assert seen["console"]["steady"][STATE : LAG + 1] == ["unknown", "-", "-"]
        assert seen["health"]["ok"] is False and seen["health"]["state"]["parts"]["controller"] == "silent"
        assert (SILENT, "OK", "CRIT", {"cluster": "a-jkt"}) in seen["alerts"]
    finally:  # whatever the checks said: the next tests need the controller
        back = faults.controller_back(watch.world)
    shown(back)
    assert [a for a in watch.alerts() if a[0] == SILENT] == [
        (SILENT, "OK", "CRIT", {"cluster": "a-jkt"}),
        (SILENT, "CRIT", "OK", {"cluster": "a-jkt"}),
    ]


def test_late_events_are_counted_and_the_dagger_runs(watch: Watch) -> None:
    row = shown(faults.late_events(watch.world))
    assert row["health"]["late_rows_dropped"] == row["progress"]["late_rows_dropped"] > 0


def test_broker_down(watch: Watch) -> None:
    shown(faults.broker_down(watch.world))
    health = watch.world.cli("cluster", "health", "a-jkt", "--live")
    assert health["ok"] is False and health["state"]["parts"]["kafka"] == "down"
    assert any(r.startswith("brokers down (refused the connection): ") for r in health["state"]["reasons"])
