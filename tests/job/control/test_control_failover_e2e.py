"""Cluster failover end to end, on a real broker (tansu), a real InfluxDB and real Spark: two REAL
controller processes on two clusters of a team (both local Spark, separate state dirs on one file
system, i.e. "shared storage"). A dagger runs on a-jkt, is moved by hand to a-sgp (a-jkt's controller
stops it, a-sgp's resumes it from the same checkpoint), then a-sgp's controller is SIGKILLed and the
automatic failover brings it back to a-jkt (which stops the orphaned dagger process first). After
each step the InfluxDB windows equal, exactly, those of every event produced: totals continue,
nothing is lost or counted twice."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from job.control import ControlPlane
from job.control.views import DaggerView
from job.produce.generator import generate
from job.produce.producer import produce
from job.stack.process import pid_alive
from tests.helpers import influx_points, wait_until
from tests.job.control.control_seed import live_world, stop_controllers
from tests.job.control.test_control_e2e import T0, TAGS, closed, spec_text

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

REPO = Path(__file__).resolve().parents[3]
N = 2000  # events per step


def test_move_then_failover_keeps_exact_totals(tansu_broker: str, influxdb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic, db, url, registry = live_world(tansu_broker, influxdb, tmp_path, "move")
    alice, adam = ControlPlane(registry, "alice"), ControlPlane(registry, "adam")
    rows: list[dict] = []

    def step(k: int) -> None:
        """Produce N events (minute 20*k on) and one later event that closes their windows."""
        batch = generate(
            "booking",
            N,
            seed=50 + k,
            start=T0 + timedelta(minutes=20 * k),
            duration_s=180,
            first_index=10_000 * k,
        )
        closer = generate(
            "booking",
            1,
            seed=60 + k,
            start=T0 + timedelta(minutes=20 * k + 10),
            duration_s=1,
            first_index=10_000 * k + 9_999,
        )
        produce(tansu_broker, topic, [batch, closer], progress=False)
        rows.extend(batch.table.to_pylist() + closer.table.to_pylist())

    def controller(cluster: str, *extra: str) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"{cluster}.log").open("ab")
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "job.cli",
                "controller",
                "--cluster",
                cluster,
                "--registry",
                url,
                "--state-dir",
                str(tmp_path / cluster),
                "--poll",
                "0.5",
                "--no-standby",
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )

    pids: set[int] = set()

    def state() -> DaggerView:
        d = alice.dagger(ref)
        if d.pid:
            pids.add(d.pid)
        return d

    def exact(what: str, pid: int, cluster: str, log: Path) -> DaggerView:
        """Wait until the dagger runs on ``cluster`` in a process other than ``pid`` and InfluxDB holds
        exactly the windows of every event produced; return the dagger."""
        d = wait_until(
            f"{what}: running on {cluster}",
            lambda: (d := state()).cluster == cluster and d.pid != pid and d.actual_state == "running" and d,
            150,
            log=log,
        )
        want = closed(rows)
        # a resumed dagger's first batch starts a JVM and warms it up: minutes when the slow chaos and
        # outage tests share the 2 cores with it (CI runs those first)
        wait_until(
            f"{what}: every window exactly once",
            lambda: influx_points(influxdb, db, "bookings", "num_of_bookings", TAGS) == want,
            300,
            log=Path(d.checkpoint).parent / "dagger.log",
        )
        counted: list[object] = []  # what the dagger reported last, for the message of a time-out

        def all_counted() -> DaggerView | None:
            d = state()
            counted[:] = [d.progress.get("input_rows"), d.progress.get("last_batch_id"), d.pid]
            return d if counted[0] == len(rows) else None

        try:
            # The old process may have written the windows in a batch it was stopped in before committing it:
            # the new process counts those events when it runs that batch again, which is its first one and
            # as slow to start as the windows above.
            return wait_until(f"{what}: all {len(rows)} events counted once", all_counted, 300, log=log)
        except AssertionError as exc:
            own = Path(d.checkpoint or ".").parent / "dagger.log"
            raise AssertionError(
                f"{exc}\nlast reported: input_rows {counted[0]}, last_batch_id {counted[1]}, "
                f"pid {counted[2]}; the dagger's own log: "
                f"{own.read_text()[-3000:] if own.is_file() else '(none)'}"
            ) from None

    step(0)
    one = controller("a-jkt", "--failover-after", "3", "--stop-daggers-on-exit")
    two = controller("a-sgp")
    ref = "team-a/move-bookings"
    try:
        t0 = time.monotonic()
        alice.create("a-jkt", spec_text("move-bookings", topic, db, 1.0), deploy=True)
        first = exact("on a-jkt", 0, "a-jkt", tmp_path / "a-jkt.log")
        t1 = time.monotonic()

        # by hand: a-jkt's controller stops it, a-sgp's resumes it from the same checkpoint
        alice.move(ref, "a-sgp", reason="e2e")
        step(1)
        moved = exact("moved to a-sgp", first.pid or 0, "a-sgp", tmp_path / "a-sgp.log")
        assert moved.checkpoint == first.checkpoint and not pid_alive(first.pid or 0)
        assert str(tmp_path / "a-jkt") in (moved.checkpoint or "")  # the folder recorded in the registry
        t2 = time.monotonic()

        # automatic: a-sgp's controller dies; a-jkt's takes the dagger back once the heartbeat is 3 s old
        adam.set_failover("a-sgp", "a-jkt")
        two.kill()
        two.wait(10)
        step(2)
        back = exact("failed over to a-jkt", moved.pid or 0, "a-jkt", tmp_path / "a-jkt.log")
        assert back.checkpoint == first.checkpoint and not pid_alive(moved.pid or 0)
        assert back.progress["late_rows_dropped"] == 0 and back.restarts == 0
        t3 = time.monotonic()
        moves = [(m.user, m.action, m.details["from"], m.details["to"]) for m in alice.moves(ref)]
        assert moves == [
            ("alice", "move", "a-jkt", "a-sgp"),
            ("controller:a-jkt", "failover", "a-sgp", "a-jkt"),
        ]
        print(
            f"\n{len(rows)} events, {len(closed(rows))} windows; first run {t1 - t0:.1f} s, "
            f"move {t2 - t1:.1f} s, failover {t3 - t2:.1f} s"
        )
    finally:
        stop_controllers((one, two), pids)
        registry.close()
