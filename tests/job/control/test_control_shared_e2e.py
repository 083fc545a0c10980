"""Shared daggers under a REAL controller process, on a real broker (tansu), a real InfluxDB and real
Spark: two ``isolation: shared`` daggers created through the control plane run as queries of ONE
shared host process the controller started (same PID in the registry, exact windows in InfluxDB).
Editing one rolls only it over (the other's query run goes on); stopping one leaves the other
running. SIGKILL of the host's JVM: the controller records the crash, starts a new host, and each
dagger resumes from its own checkpoint with exact windows and totals."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from job.control import ControlPlane
from job.control.views import DaggerView
from job.query.liveness import read_json
from job.stack.process import group_members, pid_alive
from tests.helpers import influx_points, produce_step, wait_until
from tests.job.control.control_seed import live_world, start_controller, stop_controllers
from tests.job.control.test_control_e2e import T0, TAGS, closed, spec_text

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]


def test_shared_daggers_run_in_one_host_and_survive_its_jvm_being_killed(
    tansu_broker: str,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    topic, db, url, registry = live_world(tansu_broker, influxdb, tmp_path, "shared")
    db2 = db + "_two"
    influxdb.create_database(db2)
    alice = ControlPlane(registry, "alice")
    rows: list[dict] = []

    def step(k: int) -> None:
        rows.extend(produce_step(tansu_broker, topic, k, 1500, 90, T0))

    log = tmp_path / "controller.log"
    controller = start_controller(url, tmp_path, log, standby=False)
    pids: set[int] = set()

    def state(ref: str) -> DaggerView:
        d = alice.dagger(ref)
        if d.pid:
            pids.add(d.pid)
        return d

    def exact(ref: str, database: str) -> DaggerView:
        want = closed(rows)
        marker = read_json(Path(state(ref).checkpoint) / ".." / "hosted.json") or {}
        host_log = Path(marker["host"]) / "host.log" if marker else log
        wait_until(
            f"{ref}: every window exactly once",
            lambda: influx_points(influxdb, database, "bookings", "num_of_bookings", TAGS) == want,
            300,
            log=host_log,
        )
        return wait_until(
            f"{ref}: every event counted",
            lambda: (
                (d := state(ref)).progress.get("input_rows") == len(rows)
                and d.actual_state == "running"
                and d
            ),
            90,
            log=host_log,
        )

    try:
        step(0)
        one = alice.create("a-jkt", spec_text("sh-one", topic, db, 1.0, "shared"), deploy=True).ref
        two = alice.create("a-jkt", spec_text("sh-two", topic, db2, 1.0, "shared"), deploy=True).ref
        first = {
            ref: wait_until(
                f"{ref} running", lambda r=ref: (d := state(r)).actual_state == "running" and d, 240, log=log
            )
            for ref in (one, two)
        }
        host_pid = first[one].pid
        assert first[two].pid == host_pid and pid_alive(host_pid)  # one application for both
        assert read_json(Path(first[one].checkpoint).parent / "hosted.json")["host"].endswith(
            "/shared/host-0"
        )  # type: ignore[index]
        exact(one, db)
        exact(two, db2)
        run_two = read_json(Path(first[two].checkpoint) / "query.json")["run_id"]  # type: ignore[index]

        # edit one: only it rolls over, in the same host
        alice.edit(one, spec_text("sh-one", topic, db, 2.0, "shared"), comment="slower trigger")
        v2 = wait_until(
            "one v2 running",
            lambda: (d := state(one)).running_version == 2 and d.actual_state == "running" and d,
            180,
            log=log,
        )
        assert v2.pid == host_pid and v2.checkpoint == first[one].checkpoint and v2.last_exit_code == 0
        step(1)
        exact(one, db)
        exact(two, db2)
        assert read_json(Path(first[two].checkpoint) / "query.json")["run_id"] == run_two  # type: ignore[index]

        # SIGKILL the host's JVM: the controller starts a new host; each dagger resumes exactly
        jvm = [
            p
            for p in group_members(host_pid)
            if p != host_pid and "java" in Path(f"/proc/{p}/cmdline").read_text()
        ]
        assert len(jvm) == 1
        os.kill(jvm[0], signal.SIGKILL)
        back = {
            ref: wait_until(
                f"{ref} back in a new host",
                # (not restarts >= 1: a run that has read, written and run for 60 s ends its crash streak
                # with 0, and on a busy machine the new host's first batch can come after that)
                lambda r=ref: (d := state(r)).actual_state == "running" and d.pid != host_pid and d,
                300,
                log=log,
            )
            for ref in (one, two)
        }
        assert back[one].pid == back[two].pid and not pid_alive(host_pid)
        assert (
            "its shared application host" in (back[one].last_error or "")
            and "was lost" in back[one].last_error
        )
        step(2)
        exact(one, db)
        exact(two, db2)

        # stopping one leaves the other (and the host) running
        alice.stop(two)
        stopped = wait_until(
            "two stopped", lambda: (d := state(two)).actual_state == "stopped" and d, 120, log=log
        )
        assert stopped.last_exit_code == 0 and pid_alive(back[one].pid)
        time.sleep(3)
        assert state(one).actual_state == "running" and state(one).pid == back[one].pid
    finally:
        stop_controllers([controller], pids)
        registry.close()
    assert not any(pid_alive(p) for p in pids)
