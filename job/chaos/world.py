"""The control-plane world of a chaos run with ``cluster`` cases: a registry, two clusters, a controller
each, and the dagger deployed through the control plane.

Under the run's folder: ``registry.db`` (SQLite), ``controller-<cluster>.log`` and the controllers'
state (``controller/<cluster>/``, where the dagger's checkpoint lives: both controllers reach it, as
shared storage would). The registry holds one team (``chaos``) whose admin (``chaos``) creates and
watches the dagger, a superuser (``root``) who seeded it, one data centre per cluster and the clusters
(``chaos-a`` and ``chaos-b``, ``local[2]``, the run's broker and InfluxDB), each the other's failover.

The controllers run as ``daggers controller`` does (``python -m job.cli controller``, their
own process group, ``--poll 0.5 --no-standby --failover-after S``) with ``--stop-daggers-on-exit``:
a controller stopped on purpose stops its daggers gracefully and clears its heartbeat (no failover),
one that dies leaves them to be fenced by the cluster that takes over. What a cluster case does is
in :mod:`job.chaos.experiment`. :meth:`ControlPlaneWorld.close` leaves no process behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from job.chaos.dagger import Observation, read_status
from job.chaos.experiment import Case
from job.chaos.faults import signal_group, throttle
from job.control import ControlError, ControlPlane, DaggerView, Registry, bootstrap_admin
from job.stack.process import group_members, pid_alive

TEAM = "chaos"
USER = "chaos"  # the team's admin: creates, watches and operates the dagger
SUPERUSER = "root"  # seeds the registry
CLUSTERS = ("chaos-a", "chaos-b")
REPO = Path(__file__).resolve().parents[2]


def seed(
    registry: Registry,
    *,
    kafka: str,
    influx: str,
    clusters: tuple[str, ...] = CLUSTERS,
    master: str = "local[2]",
) -> ControlPlane:
    """Fill an empty ``registry``: the superuser, team ``chaos`` with its admin ``chaos``, one data centre
    per cluster and the clusters, each failing over to the next (two: to each other). Return the team
    admin's control plane."""
    bootstrap_admin(registry, SUPERUSER)
    root = ControlPlane(registry, SUPERUSER)
    root.add_team(TEAM)
    root.add_user(USER)
    root.set_member(TEAM, USER, "admin")
    for name in clusters:
        root.add_datacentre(f"dc-{name}", f"the data centre of {name}")
        root.add_cluster(
            name,
            team=TEAM,
            datacentre=f"dc-{name}",
            spark_master=master,
            kafka_bootstrap=kafka,
            influx_url=influx,
            description="a chaos run's cluster",
        )
    if len(clusters) > 1:
        for i, name in enumerate(clusters):
            root.set_failover(name, clusters[(i + 1) % len(clusters)])
    return ControlPlane(registry, USER)


class ControllerProcess:
    """One cluster's controller process; it can be started again after it stopped or died."""

    def __init__(
        self,
        cluster: str,
        registry_url: str,
        state_dir: Path,
        log: Path,
        *,
        failover_after_s: float,
        poll_s: float = 0.5,
        closed: threading.Event | None = None,
    ) -> None:
        self.cluster, self.registry_url, self.state_dir, self.log = cluster, registry_url, state_dir, log
        self.failover_after_s, self.poll_s = failover_after_s, poll_s
        self.closed = closed or threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []  # every process it ran
        self._lock = threading.Lock()

    def argv(self) -> list[str]:
        """Return the controller's command line."""
        return [
            sys.executable,
            "-P",
            "-m",
            "job.cli",
            "controller",
            "--cluster",
            self.cluster,
            "--registry",
            self.registry_url,
            "--state-dir",
            str(self.state_dir),
            "--poll",
            str(self.poll_s),
            "--no-standby",
            "--failover-after",
            str(self.failover_after_s),
            "--stop-daggers-on-exit",
        ]

    def start(self) -> None:
        """Start the controller (nothing once the world is closing)."""
        with self._lock:
            if self.closed.is_set() or self.alive():
                return
            with self.log.open("ab") as fh:
                self.proc = subprocess.Popen(
                    self.argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    cwd=REPO,
                )
            self.pids.append(self.proc.pid)

    @property
    def pid(self) -> int | None:
        """The running controller's pid (and process group), else None."""
        return self.proc.pid if self.alive() and self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig: int) -> None:
        """Send ``sig`` to the controller's process group."""
        if self.alive():
            signal_group(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL the controller (its heartbeat stays: it looks gone once it is old)."""
        with self._lock:
            self.send(signal.SIGKILL)
            if self.proc is not None:
                self.proc.wait(30)

    def stop(self, timeout: float = 90) -> None:
        """Stop the controller gracefully (it stops its daggers and clears its heartbeat); SIGKILL its
        group after ``timeout``."""
        with self._lock:
            if self.proc is None:
                return
            self.send(signal.SIGCONT)  # a paused one could not act on SIGTERM
            self.send(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.send(signal.SIGKILL)
                self.proc.wait(30)


class ControlledDagger:
    """The dagger under the control plane: the same small interface as the bare process
    (:class:`job.chaos.dagger.DaggerHandle`), through the registry and the dagger's current process."""

    supervised = True

    def __init__(self, cp: ControlPlane, ref: str) -> None:
        self.cp, self.ref = cp, ref
        self.pids: set[int] = set()  # every dagger process seen

    @property
    def starts(self) -> int:
        return len(self.pids)

    def view(self) -> DaggerView | None:
        """The control plane's view of the dagger (None while the registry cannot be read)."""
        try:
            return self.cp.dagger(self.ref)
        except ControlError:
            return None

    def pid(self) -> int | None:
        view = self.view()
        pid = view.pid if view is not None and view.pid and pid_alive(view.pid) else None
        if pid:
            self.pids.add(pid)
        return pid

    def alive(self) -> bool:
        return self.pid() is not None

    def start(self) -> None:
        """Deploy it when it was stopped; a crashed one its controller restarts by itself."""
        view = self.view()
        if view is not None and view.desired_state != "running":
            self.cp.deploy(self.ref)

    def send(self, sig: int) -> None:
        signal_group(self.pid(), sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> None:
        """SIGTERM: stop it through the control plane (its controller stops it gracefully); another
        signal: send it to the process. Wait until that process is gone."""
        pid = self.pid()
        if sig == signal.SIGTERM:
            self.cp.stop(self.ref)
        else:
            signal_group(pid, sig)
        deadline = time.monotonic() + timeout
        while pid and pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)

    def observe(self) -> Observation:
        """The dagger now: where the control plane says it runs, and its own ``status.json`` (fresher
        than the copy its controller relays, and still there while that controller is down)."""
        view = self.view()
        if view is None:
            return Observation()
        pid = view.pid if view.pid and pid_alive(view.pid) else None
        if pid:
            self.pids.add(pid)
        return Observation(
            progress=read_status(view.checkpoint) or dict(view.progress),
            alive=pid is not None,
            pid=pid,
            cluster=view.cluster,
            state=view.actual_state,
        )


class ControlPlaneWorld:
    """The registry, the clusters' controllers and the dagger of one chaos run (see the module docstring)."""

    def __init__(
        self,
        out: Path,
        *,
        kafka: str,
        influx: str,
        failover_after_s: float,
        clusters: tuple[str, ...] = CLUSTERS,
        master: str = "local[2]",
    ) -> None:
        self.out = out.absolute()
        self.kafka, self.influx, self.master, self.clusters = kafka, influx, master, clusters
        self.url = f"sqlite:///{self.out / 'registry.db'}"
        self._closed = threading.Event()
        self.controllers = {
            name: ControllerProcess(
                name,
                self.url,
                self.out,
                self.out / f"controller-{name}.log",
                failover_after_s=failover_after_s,
                closed=self._closed,
            )
            for name in clusters
        }
        self.registry: Registry | None = None
        self.dagger: ControlledDagger | None = None

    def start(self, spec_text: str) -> ControlledDagger:
        """Seed the registry, start the controllers, create and deploy the dagger on the first cluster.

        Raises SpecError/SchemaError/SqlError for a spec the control plane refuses.
        """
        self.registry = Registry(self.url)
        cp = seed(
            self.registry, kafka=self.kafka, influx=self.influx, clusters=self.clusters, master=self.master
        )
        view = cp.create(self.clusters[0], spec_text, deploy=True, comment="chaos run")
        self.dagger = ControlledDagger(cp, view.ref)
        for ctl in self.controllers.values():
            ctl.start()
        return self.dagger

    def hit(self, case: Case, stop: threading.Event) -> tuple[str | None, int | None]:
        """Inject cluster ``case`` into the cluster the dagger is on now (see :mod:`job.chaos.experiment`);
        return that cluster and the dagger's pid then. Returns at once when ``stop`` is set."""
        assert self.dagger is not None
        obs = self.dagger.observe()
        for _ in range(20):  # the registry may be busy for a moment
            if obs.cluster is not None or stop.wait(0.5):
                break
            obs = self.dagger.observe()
        if obs.cluster is None:
            return None, None
        ctl, pid = self.controllers[obs.cluster], obs.pid
        began = time.monotonic()
        if case.fault == "slow":
            groups = [g for g in (ctl.pid, pid) if g]
            with contextlib.suppress(ProcessLookupError):
                throttle(groups, case.downtime_s, case.slow_fraction, stop)
        elif case.fault == "pause":
            for sig in (signal.SIGSTOP, signal.SIGCONT):
                ctl.send(sig)
                signal_group(pid, sig)
                if sig == signal.SIGSTOP:
                    stop.wait(case.downtime_s)
        else:
            if case.fault == "kill":
                ctl.kill()
                signal_group(pid, signal.SIGKILL)
            else:
                ctl.stop()
            if not stop.wait(max(began + case.downtime_s - time.monotonic(), 0.0)):
                ctl.start()
        return obs.cluster, pid

    def moves(self) -> list[dict[str, Any]]:
        """The control plane's audit of the dagger's moves (by hand and by failover), oldest first."""
        if self.dagger is None:
            return []
        try:
            return [m.to_dict() for m in self.dagger.cp.moves(self.dagger.ref)]
        except ControlError:
            return []

    def pids(self) -> set[int]:
        """Every controller and dagger process of the run (that it saw)."""
        out = {pid for ctl in self.controllers.values() for pid in ctl.pids}
        return out | (self.dagger.pids if self.dagger is not None else set())

    def close(self) -> None:
        """Stop the controllers (which stop their daggers), then kill whatever is left: the dagger
        processes seen and any process working inside the run's folder. Closes the registry."""
        self._closed.set()
        for ctl in self.controllers.values():  # all at once: each stops its daggers
            ctl.send(signal.SIGCONT)
            ctl.send(signal.SIGTERM)
        for ctl in self.controllers.values():
            ctl.stop()
        for pid in self.dagger.pids if self.dagger is not None else ():
            if group_members(pid):
                signal_group(pid, signal.SIGCONT)
                signal_group(pid, signal.SIGKILL)
        for pid in processes_in(self.out):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if self.registry is not None:
            self.registry.close()


def processes_in(folder: Path) -> list[int]:
    """Return the pids of this user's processes (but this one) whose working directory is inside ``folder``:
    a dagger and its Spark JVM work in their folder under the controller's state."""
    root = folder.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = (entry / "cwd").resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if cwd == root or root in cwd.parents:
            found.append(int(entry.name))
    return found
