"""An outside tester's finding, on a real controller process, a real shared host (Spark), tansu and InfluxDB:
the host of a shared dagger is killed (SIGKILL), the controller relaunches it into a new host, and the dagger
is stopped while its new run is still starting (the new host still starts Spark). Before, the new host never
took the assignment (it was gone when the host first read its assignments) and the dagger's state file kept
what the dead host had written (``running``): the controller read the run as alive, killed it after 60 s (a
kill the host dropped: nothing of that key was stopping), and the dagger read ``stopping`` for good; a deploy
after it launched nothing. Now the stop ends within the new host's start and a deploy runs it again."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from job.control import ControlPlane
from job.control.views import DaggerView
from job.stack.process import pid_alive
from tests.helpers import produce_step, wait_until
from tests.job.control.control_seed import live_world, start_controller, stop_controllers
from tests.job.control.test_control_e2e import T0, spec_text

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

#: The stop must end before the controller's stop timeout (60 s) would kill the run.
STOP_BOUND_S = 60.0


def test_a_stop_while_relaunching_ends_and_a_deploy_runs_it_again(
    tansu_broker: str,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    topic, db, url, registry = live_world(tansu_broker, influxdb, tmp_path, "wedge")
    alice = ControlPlane(registry, "alice")
    produce_step(tansu_broker, topic, 0, 1500, 90, T0)
    log = tmp_path / "controller.log"
    controller = start_controller(url, tmp_path, log, standby=False)
    pids: set[int] = set()
    host_log = tmp_path / "state" / "controller" / "a-jkt" / "shared" / "host-0" / "host.log"

    def state(ref: str) -> DaggerView:
        d = alice.dagger(ref)
        if d.pid:
            pids.add(d.pid)
        return d

    try:
        ref = alice.create("a-jkt", spec_text("wedged", topic, db, 1.0, "shared"), deploy=True).ref
        first = wait_until(
            "wedged reads rows",
            lambda: (d := state(ref)).actual_state == "running" and d.progress.get("input_rows") and d,
            300,
            log=host_log,
        )
        os.kill(first.pid, signal.SIGKILL)  # the host process, with the dagger's query in it
        relaunched = wait_until(
            "relaunched into a new host",
            lambda: (d := state(ref)).actual_state == "starting" and d.pid != first.pid and d,
            60,
            log=log,
        )
        assert relaunched.state == "starting", relaunched.health
        alice.stop(ref)  # its new run's query not started yet: the new host still starts Spark
        asked = time.monotonic()
        stopped = wait_until(
            "stopped", lambda: (d := state(ref)).actual_state == "stopped" and d, STOP_BOUND_S, log=log
        )
        took = time.monotonic() - asked
        assert stopped.state == "stopped" and stopped.last_exit_code == 0, (stopped.health, took)
        assert "did not stop within" not in log.read_text()
        assert pid_alive(relaunched.pid)  # the new host stays, warm for the next deploy

        alice.deploy(ref)
        again = wait_until(
            "running again, reading rows",
            lambda: (
                (d := state(ref)).actual_state == "running"
                and d.state == "running"
                and d.progress.get("updated_at", 0) > time.time() - 30
                and d
            ),
            300,
            log=host_log,
        )
        assert again.pid == relaunched.pid
    finally:
        stop_controllers([controller], pids)
        registry.close()
    assert not any(pid_alive(p) for p in pids)
