"""The controller's shared path with a real process standing in for the shared host
(tests/job/control/fake_host.py, which speaks job.shared.channel without Spark): shared daggers go
into one host, stop and roll over alone, a failure reported by the host is a crash restarted with
back-off, a dead host is started again with its daggers, a new controller adopts host and daggers,
and a dedicated dagger keeps its own process. The real host (Spark, broker, InfluxDB) is in
test_control_shared_e2e.py and tests/job/shared/."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.stack.process import pid_alive
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import fake, settings, sqlite_registry, until

__all__ = ["sqlite_registry"]
FAKE_HOST = Path(__file__).with_name("fake_host.py")


def shared(name: str) -> str:
    return bookings_spec(name).replace("isolation: dedicated\n", "") + "isolation: shared\n"


def controller(registry: Registry, tmp_path: Path, **kw: object) -> Controller:
    return Controller(
        registry,
        "a-jkt",
        tmp_path / "s",
        settings=settings(**kw),
        command=fake({}),
        host_command=lambda folder, master: [sys.executable, str(FAKE_HOST), str(folder), master],
    )


def starts(view: object) -> list[str]:
    return (Path(view.checkpoint) / "starts.txt").read_text().splitlines()  # type: ignore[attr-defined]


def test_shared_daggers_share_a_host_and_stop_and_roll_over_alone(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", shared("one"), deploy=True)
    alice.create("a-jkt", shared("two"), deploy=True)
    alice.create("a-jkt", bookings_spec("solo") + "isolation: dedicated\n", deploy=True)
    ctl = controller(sqlite_registry, tmp_path)
    try:
        one = until(ctl, alice, "one", lambda d: d.actual_state == "running" and d.progress.get("input_rows"))
        two = until(ctl, alice, "two", lambda d: d.actual_state == "running")
        solo = until(ctl, alice, "solo", lambda d: d.actual_state == "running")
        assert one.pid == two.pid != solo.pid  # one host for the shared ones, a process for the dedicated one
        marker = json.loads((Path(one.checkpoint).parent / "hosted.json").read_text())
        assert marker == {"host": str(tmp_path / "s" / "shared" / "host-0"), "key": f"{one.id}-one"}

        alice.edit("one", shared("one").replace("trigger_interval_s: 1", "trigger_interval_s: 2"))
        v2 = until(ctl, alice, "one", lambda d: d.running_version == 2 and d.actual_state == "running")
        assert v2.pid == one.pid and v2.last_exit_code == 0 and len(starts(v2)) == 2
        assert alice.dagger("two").actual_state == "running" and len(starts(two)) == 1  # untouched

        alice.stop("two")
        stopped = until(ctl, alice, "two", lambda d: d.actual_state == "stopped")
        assert (
            stopped.last_exit_code == 0
            and pid_alive(one.pid)
            and alice.dagger("one").actual_state == "running"
        )
    finally:
        ctl.stop_all(10)
    assert not pid_alive(one.pid) and not pid_alive(solo.pid)


def test_a_failure_in_the_host_is_a_crash_and_a_dead_host_comes_back(
    sqlite_registry: Registry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="daggers.controller")
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", shared("keeps"), deploy=True)
    alice.create("a-jkt", shared("it-fails"), deploy=True)
    ctl = controller(sqlite_registry, tmp_path, max_restarts=1)

    def said(start: str) -> list[str]:
        return [m for r in caplog.records if (m := r.getMessage()).startswith(start)]

    try:
        keeps = until(ctl, alice, "keeps", lambda d: d.actual_state == "running")
        failed = until(ctl, alice, "it-fails", lambda d: d.actual_state == "failed")
        assert (
            failed.last_error
            == "Sink error: InfluxDB at http://127.0.0.1:9 is unreachable\nhint: is influxd running?"
        )
        assert failed.restarts == 2 and failed.last_exit_code == 2 and len(starts(failed)) == 2  # one restart
        assert alice.dagger("keeps").actual_state == "running" and len(starts(keeps)) == 1
        # no process exited: its query failed in the host ("crashed (exit code 2)" said otherwise)
        assert said("team-a/it-fails: crashed (") == [
            f"team-a/it-fails: crashed (its query failed in the shared application host (pid {keeps.pid})): "
            "Sink error: InfluxDB at http://127.0.0.1:9 is unreachable\nhint: is influxd running?; restart 1 in 0 s"
        ]

        os.kill(keeps.pid, signal.SIGKILL)  # the host dies: its dagger crashes, the host is started again
        back = until(ctl, alice, "keeps", lambda d: d.actual_state == "running" and d.pid != keeps.pid)
        assert back.restarts == 1 and back.last_exit_code == -9
        assert (
            back.last_error
            == f"Dagger error: its shared application host (pid {keeps.pid}) is gone: killed by signal 9 (SIGKILL)"
        )
        assert [line.split()[0] for line in starts(back)] == [str(keeps.pid), str(back.pid)]
        assert starts(back)[0].split()[1] == starts(back)[1].split()[1]  # the same assignment, resumed
        gone = f"its shared application host (pid {keeps.pid}) is gone"
        assert said("team-a/keeps: crashed (") == [
            f"team-a/keeps: crashed ({gone}): Dagger error: {gone}: killed by signal 9 (SIGKILL); restart 1 in 0 s"
        ]
        assert said(f"the shared host pid {keeps.pid} is gone") == [
            f"the shared host pid {keeps.pid} is gone (killed by signal 9 (SIGKILL)); starting it again"
        ]
    finally:
        ctl.stop_all(10)


def test_a_new_controller_adopts_the_host_and_its_daggers(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", shared("kept"), deploy=True)
    first = controller(sqlite_registry, tmp_path)
    running = until(first, alice, "kept", lambda d: d.actual_state == "running")
    first.close()  # the controller goes; host and dagger keep running
    second = controller(sqlite_registry, tmp_path)
    try:
        second.reconcile_once()
        again = until(second, alice, "kept", lambda d: d.actual_state == "running")
        assert again.pid == running.pid and len(starts(again)) == 1  # adopted, not started again
        alice.stop("kept")
        until(second, alice, "kept", lambda d: d.actual_state == "stopped")
        assert pid_alive(running.pid)  # the host stays, warm for the next deploy
    finally:
        second.stop_all(10)
    assert not pid_alive(running.pid)


def test_a_dagger_stopped_while_its_host_is_dead_is_not_resumed_by_the_new_host(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    """An outsider's finding: a dagger stopped while it waited for its restart (its host dead) was resumed
    from its leftover assignment when the host came back for another dagger, and ran on while `stopped`."""
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", shared("gone"), deploy=True)
    alice.create("a-jkt", shared("keeps"), deploy=True)
    ctl = controller(sqlite_registry, tmp_path)
    try:
        gone = until(ctl, alice, "gone", lambda d: d.actual_state == "running")
        keeps = until(ctl, alice, "keeps", lambda d: d.actual_state == "running")
        assert gone.pid == keeps.pid and len(starts(gone)) == 1
        host = tmp_path / "s" / "shared" / "host-0"
        assert (host / "assignments" / f"{gone.id}-gone.json").exists()

        os.kill(keeps.pid, signal.SIGKILL)  # the host dies with both daggers in it
        alice.stop("gone")  # stopped before the controller's next round sees the crash
        back = until(ctl, alice, "keeps", lambda d: d.actual_state == "running" and d.pid != keeps.pid)
        stopped = until(ctl, alice, "gone", lambda d: d.actual_state == "stopped")
        assert not (host / "assignments" / f"{gone.id}-gone.json").exists()
        settle = time.monotonic() + 2.0  # the new host reads its assignments every poll: "gone" never starts
        while time.monotonic() < settle:
            ctl.reconcile_once()
            time.sleep(0.1)
        assert [line.split()[0] for line in starts(stopped)] == [str(gone.pid)]
        assert [line.split()[0] for line in starts(back)] == [str(keeps.pid), str(back.pid)]
        assert alice.dagger("gone").actual_state == "stopped"
    finally:
        ctl.stop_all(10)
