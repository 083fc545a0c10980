"""The controller's policy with real processes standing in for daggers (tests/job/control/fake_dagger.py):
start, progress and samples, roll-over on edit and restart, graceful stop, SIGKILL after the stop
timeout, crash back-off up to a limit, adoption by a new controller, and a single controller per cluster.
The real dagger process (Spark, broker, InfluxDB) is in test_control_e2e.py."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from job.control import ConflictError, ControlPlane, Registry
from job.control.controller import Controller, ControllerSettings
from job.control.models import Sample
from job.stack.process import pid_alive
from tests.helpers import wait_until
from tests.job.control.control_seed import bookings_spec, seed

FAKE = Path(__file__).with_name("fake_dagger.py")


@pytest.fixture
def sqlite_registry(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    yield reg
    reg.close()


def fake(modes: dict[str, str]) -> Callable[[Path, Path, str], list[str]]:
    """A controller command that runs fake_dagger.py in the mode set for the dagger (default ``run``)."""

    def command(spec: Path, state: Path, master: str) -> list[str]:
        name = state.name.split("-", 1)[1]
        return [sys.executable, str(FAKE), str(spec), modes.get(name, "run")]

    return command


def until(
    ctl: Controller, plane: ControlPlane, ref: str, predicate: Callable[[object], bool], timeout: float = 60.0
):  # type: ignore[no-untyped-def]
    """Reconcile until ``predicate(dagger view)`` holds; return the view."""
    deadline = time.monotonic() + timeout
    while True:
        ctl.reconcile_once()
        view = plane.dagger(ref)
        if predicate(view):
            return view
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; last state {view.actual_state} {view}")
        time.sleep(0.05)


def settings(**kw: object) -> ControllerSettings:
    base = {
        "poll_interval_s": 0.05,
        "health_interval_s": 3600,
        "lag_interval_s": 3600,
        "backoff_initial_s": 0.3,
        "max_restarts": 2,
        "stop_timeout_s": 5.0,
        "standby": False,
    }
    return ControllerSettings(**{**base, **kw})


def test_start_progress_rollover_restart_stop_delete(registry: Registry, tmp_path: Path) -> None:
    """On SQLite and on PostgreSQL (the registry many operators and controllers share)."""
    sqlite_registry = registry
    seed(sqlite_registry, kafka="127.0.0.1:19092")
    alice, adam = ControlPlane(sqlite_registry, "alice"), ControlPlane(sqlite_registry, "adam")
    text = bookings_spec("life")
    alice.create("a-jkt", text, deploy=True)
    ctl = Controller(sqlite_registry, "a-jkt", tmp_path / "state", settings=settings(), command=fake({}))
    ctl.claim()
    first = until(ctl, alice, "life", lambda d: d.actual_state == "starting")
    assert first.pid and pid_alive(first.pid) and first.running_version == 1
    assert first.checkpoint == str(tmp_path / "state" / "daggers" / f"{first.id}-life" / "checkpoint-1")
    running = until(
        ctl, alice, "life", lambda d: d.actual_state == "running" and len(alice.samples("life")) >= 3
    )
    assert running.progress["input_rows_per_s"] == 1000.0 and running.pid == first.pid
    spec_file = Path(running.checkpoint).parent / "v1.yaml"
    assert (
        oct(spec_file.stat().st_mode & 0o777) == "0o600" and "${DAGGERS_BOOTSTRAP}" in spec_file.read_text()
    )
    starts = (Path(running.checkpoint) / "starts.txt").read_text().split()
    assert starts == [str(first.pid), "127.0.0.1:19092", "v1.yaml"]  # the cluster's brokers, in the env
    samples = alice.samples("life")
    assert len(samples) >= 3 and [s.input_rows for s in samples] == sorted(s.input_rows for s in samples)

    # a compatible edit rolls over on the same checkpoint, keeping the counters
    rows_before = alice.dagger("life").progress["input_rows"]
    alice.edit("life", text.replace("trigger_interval_s: 1", "trigger_interval_s: 2"))
    rolled = until(
        ctl,
        alice,
        "life",
        lambda d: (
            d.running_version == 2
            and d.actual_state == "running"
            and d.progress.get("input_rows", 0) > rows_before
        ),
    )
    assert rolled.pid != first.pid and not pid_alive(first.pid)
    assert rolled.checkpoint == first.checkpoint and rolled.last_exit_code == 0
    # an incompatible edit gets a new checkpoint
    alice.edit("life", text.replace("count(1)", "sum(fare_idr)"), allow_fresh_start=True)
    fresh = until(ctl, alice, "life", lambda d: d.running_version == 3 and d.actual_state == "running")
    assert fresh.checkpoint.endswith("checkpoint-2") and fresh.progress["input_rows"] < 1000
    # restart: a new process for the same version
    alice.restart("life")
    again = until(ctl, alice, "life", lambda d: d.actual_state == "running" and d.pid != fresh.pid)
    assert again.running_version == 3 and again.restarts == 0
    # stop: SIGTERM, the process exits 0
    alice.stop("life")
    stopped = until(ctl, alice, "life", lambda d: d.actual_state == "stopped")
    assert stopped.pid is None and stopped.last_exit_code == 0 and not pid_alive(again.pid)
    adam.delete("life")
    with sqlite_registry.session() as s:
        from job.control.models import DaggerStatus

        assert s.get(DaggerStatus, stopped.id).actual_state == "deleted"
    assert ctl.reconcile_once() == {}


def test_crashes_back_off_then_give_up_until_restarted(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("flaky"), deploy=True)
    ctl = Controller(
        sqlite_registry, "a-jkt", tmp_path / "state", settings=settings(), command=fake({"flaky": "crash"})
    )
    seen: list[tuple[str, int, float | None]] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        changes = ctl.reconcile_once()
        for upd in changes.values():
            if upd.get("actual_state") in ("crashed", "failed"):
                seen.append((upd["actual_state"], upd["restarts"], upd.get("next_restart_at")))
        if seen and seen[-1][0] == "failed":
            break
        time.sleep(0.02)
    assert [(s, n) for s, n, _ in seen] == [("crashed", 1), ("crashed", 2), ("failed", 3)]
    failed = alice.dagger("flaky")
    assert failed.last_exit_code == 3
    assert failed.last_error == (
        "Sink error: cannot reach InfluxDB at http://127.0.0.1:9/write: connection refused\n"
        "hint: is influxd running?"
    )
    starts = (Path(failed.checkpoint) / "starts.txt").read_text().splitlines()
    assert len(starts) == 3
    ctl.reconcile_once()
    assert alice.dagger("flaky").actual_state == "failed"  # no more restarts
    alice.restart("flaky")  # the operator asks again: crash counting starts over
    assert alice.dagger("flaky").actual_state == "pending"
    restarted = until(ctl, alice, "flaky", lambda d: d.actual_state != "pending")
    assert restarted.actual_state in ("starting", "crashed") and restarted.pid != failed.pid
    wait_until(
        "the restarted dagger to start",
        lambda: len((Path(failed.checkpoint) / "starts.txt").read_text().splitlines()) >= 4,
        60,
        every_s=0.05,
    )


def test_back_off_doubles(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("slow-crash"), deploy=True)
    ctl = Controller(
        sqlite_registry,
        "a-jkt",
        tmp_path / "s",
        settings=settings(backoff_initial_s=0.5, max_restarts=3),
        command=fake({"slow-crash": "crash"}),
    )
    delays: list[tuple[float, float]] = []  # the delay, as seen from before and from after the reconcile
    deadline = time.monotonic() + 120
    while len(delays) < 2 and time.monotonic() < deadline:
        before = time.time()
        changes = ctl.reconcile_once()
        after = time.time()
        for upd in changes.values():
            if upd.get("actual_state") == "crashed":
                delays.append((upd["next_restart_at"] - after, upd["next_restart_at"] - before))
        time.sleep(0.02)
    # the crash was seen during the reconcile, however long it took on a busy machine
    assert len(delays) == 2 and all(
        lo - 0.01 <= want <= hi + 0.01 for want, (lo, hi) in zip((0.5, 1.0), delays, strict=True)
    ), delays


def test_a_stop_that_hangs_is_killed_after_the_timeout(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("stuck"), deploy=True)
    ctl = Controller(
        sqlite_registry,
        "a-jkt",
        tmp_path / "s",
        settings=settings(stop_timeout_s=0.5),
        command=fake({"stuck": "hang"}),
    )
    running = until(ctl, alice, "stuck", lambda d: d.actual_state == "running")
    alice.stop("stuck")
    asked = time.monotonic()
    stopped = until(ctl, alice, "stuck", lambda d: d.actual_state == "stopped")
    assert time.monotonic() - asked >= 0.5
    assert stopped.last_exit_code == -9 and not pid_alive(running.pid)


def test_a_new_controller_adopts_running_daggers_and_only_one_runs(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    alice.create("a-jkt", bookings_spec("kept"), deploy=True)
    first = Controller(sqlite_registry, "a-jkt", tmp_path / "s", settings=settings(), command=fake({}))
    first.claim()
    running = until(first, alice, "kept", lambda d: d.actual_state == "running")
    with pytest.raises(ConflictError, match="already has a controller"):
        Controller(sqlite_registry, "a-jkt", tmp_path / "s", settings=settings(), host="gateway-2").claim()
    first.release()  # the first controller goes away; its dagger keeps running
    assert pid_alive(running.pid)
    second = Controller(sqlite_registry, "a-jkt", tmp_path / "s", settings=settings(), command=fake({}))
    second.claim()
    second.reconcile_once()
    assert alice.dagger("kept").pid == running.pid  # adopted, not started again
    assert len((Path(running.checkpoint) / "starts.txt").read_text().splitlines()) == 1
    alice.stop("kept")
    until(second, alice, "kept", lambda d: d.actual_state == "stopped")
    assert not pid_alive(running.pid)
    assert alice.cluster("a-jkt").controller_pid == os.getpid()


def test_samples_are_pruned(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    d = alice.create("a-jkt", bookings_spec("old"))
    with sqlite_registry.session() as s:
        s.add_all([Sample(dagger_id=d.id, at=time.time() - 7200), Sample(dagger_id=d.id, at=time.time())])
    Controller(sqlite_registry, "a-jkt", tmp_path / "s", settings=settings()).reconcile_once()
    assert len(alice.samples("old")) == 1


def test_a_deploy_is_handed_to_the_warm_standby(sqlite_registry: Registry, tmp_path: Path) -> None:
    seed(sqlite_registry)
    alice = ControlPlane(sqlite_registry, "alice")
    ctl = Controller(
        sqlite_registry,
        "a-jkt",
        tmp_path / "s",
        settings=settings(standby=True, standby_every_s=0),
        command=fake({}),
        standby_command=lambda ready, master: [sys.executable, str(FAKE), "--standby", str(ready)],
    )
    ctl.reconcile_once()
    standby = ctl._standby
    assert standby is not None
    wait_until("the standby to become ready", standby.ready, 60, every_s=0.05)
    alice.create("a-jkt", bookings_spec("warm"), deploy=True)
    view = until(ctl, alice, "warm", lambda d: d.actual_state == "running")
    assert view.pid == standby.popen.pid  # no new process: the warm one runs the dagger
    starts = (Path(view.checkpoint) / "starts.txt").read_text().split()
    assert starts == [str(standby.popen.pid), "127.0.0.1:9", "v1.yaml"]
    ctl.reconcile_once()
    assert ctl._standby is not None and ctl._standby.popen.pid != view.pid  # the next one is on its way
    alice.stop("warm")
    until(ctl, alice, "warm", lambda d: d.actual_state == "stopped")
    next_standby = ctl._standby.popen
    ctl.close()
    assert next_standby.poll() is not None  # closing the controller ends its standby


def test_a_rollover_reads_starting_and_keeps_the_cluster_healthy(
    sqlite_registry: Registry, tmp_path: Path
) -> None:
    """A deploy of an edited spec: the round that launches the new version leaves it ``starting`` with no
    report (its old run's status.json is the last one). An outside tester's /metrics sample read ``unknown``
    there, which made the cluster degraded: it reads what it is, and the cluster stays healthy."""
    seed(sqlite_registry, kafka="127.0.0.1:19092")
    alice = ControlPlane(sqlite_registry, "alice")
    text = bookings_spec("roll")
    alice.create("a-jkt", text, deploy=True)
    ctl = Controller(sqlite_registry, "a-jkt", tmp_path / "state", settings=settings(), command=fake({}))
    ctl.claim()
    first = until(ctl, alice, "roll", lambda d: d.actual_state == "running" and d.progress.get("updated_at"))
    alice.edit("roll", text.replace("trigger_interval_s: 1", "trigger_interval_s: 2"))
    seen: list[tuple[str, int | None, str]] = []
    deadline = time.monotonic() + 60
    while not seen or seen[-1][:2] != ("running", 2):
        assert time.monotonic() < deadline, seen
        ctl.reconcile_once()
        view = alice.dagger("roll")
        verdict = alice.cluster_health("a-jkt")["state"]
        seen.append((view.state, view.running_version, view.health["reason"]))
        assert not any("dagger" in why for why in verdict["reasons"]), (seen, verdict)
        time.sleep(0.05)
    starting = [s for s in seen if s[0] == "starting"]
    assert starting and {s[0] for s in seen} <= {"running", "starting"}, seen
    assert starting[0][1] == 2 and first.running_version == 1
    assert re.fullmatch(
        r"rolling out version 2: its new run started \d s ago, no report yet", starting[0][2]
    ), starting
    alice.stop("roll")  # no process left behind
    stopped = until(ctl, alice, "roll", lambda d: d.actual_state == "stopped")
    assert stopped.pid is None and not pid_alive(first.pid)
