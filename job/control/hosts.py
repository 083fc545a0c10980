"""The shared application hosts of one controller, and a hosted dagger as the controller sees it.

A controller runs ``isolation: shared`` daggers as queries of host processes (:mod:`job.shared.host`)
in ``<state dir>/shared/host-<n>/``. :class:`SharedHosts` starts a host when a dagger needs one,
places each dagger on the host that already holds it, else on the least loaded live host with room
(``daggers_per_host``), else on a new one; it restarts a dead host (its assignments are still in its
folder, so it resumes all its daggers) and adopts the hosts an earlier controller started (by the
PID and start time in ``host.json``). Hosts outlive the controller, as dedicated daggers do.

:class:`HostedRun` gives a hosted dagger the interface of :class:`job.control.processes.Proc`, so the
controller's reconcile loop treats both alike: ``alive`` while the host runs it, ``signal(SIGTERM)``
removes its assignment (a graceful stop of that query only; no signal reaches the host), ``signal(SIGKILL)``
also asks the host to end that run now (a kill file: its sinks stop retrying), ``exit_code``
is 0 after a stop and 2 after a failure, ``failure`` is the failure record the host reported for the run
(or one saying that its host is gone), and ``log_since_start`` the error's text.
The registry's ``pid`` of a hosted dagger is its host's PID. ``<dagger folder>/hosted.json`` records
which host and key hold the dagger, so that a new controller adopts it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from job.common.exits import how_it_ended
from job.errors import DaggerError
from job.query.failure_record import FailureRecord
from job.query.liveness import read_json
from job.shared.channel import ENDED, HostFolder, write_json
from job.stack.process import group_members, pid_alive, process_start_time

log = logging.getLogger("daggers.controller")

#: Builds the command of a shared host: (host folder, Spark master) -> argv.
HostCommand = Callable[[Path, str], list[str]]
#: In a dagger's folder: {"host": <host folder>, "key": <key>} while the dagger is hosted.
HOSTED_FILE = "hosted.json"


def default_host_command(folder: Path, master: str) -> list[str]:
    """Return ``python -P -m job.shared.host FOLDER --master MASTER`` with this interpreter (``-P``: the
    working folder is not on its import path)."""
    return [sys.executable, "-P", "-m", "job.shared.host", str(folder), "--master", master]


@dataclass
class Host:
    """One host process (started or adopted by this controller)."""

    folder: HostFolder
    pid: int | None = None
    start_time: int | None = None
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.pid is None:
            return False
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid, self.start_time)

    def exit_code(self) -> int | None:
        return self.popen.returncode if self.popen is not None else None

    def load(self) -> int:
        """Return how many daggers are assigned to the host."""
        return len(self.folder.assignments())


class HostedRun:
    """One assignment of a dagger to one host process, with the interface of a dagger process (see
    the module docstring). It ends with that process: a restarted host is a new run for each dagger."""

    def __init__(self, host: Host, key: str, token: str) -> None:
        self.host = host
        self.key = key
        self.token = token
        self.log_path = host.folder.log_path
        self.pid = host.pid or 0
        self.start_time = host.start_time
        self._popen = host.popen

    def host_alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return pid_alive(self.pid, self.start_time)

    def alive(self) -> bool:
        """True while the host runs (or is about to run) this assignment."""
        if not self.host_alive():
            return False
        state = self.host.folder.state(self.key)
        if state is not None and state.get("token") == self.token:
            return state.get("state") not in ENDED
        assigned = self.host.folder.assignment(self.key)
        return assigned is not None and assigned.get("token") == self.token

    def exit_code(self) -> int | None:
        """The host's exit code when it is gone (None when adopted); else 0 (stopped), 2 (failed) or None."""
        if not self.host_alive():
            return self._popen.returncode if self._popen is not None else None
        state = self.host.folder.state(self.key) or {}
        return (
            {"stopped": 0, "failed": 2}.get(str(state.get("state")))
            if state.get("token") == self.token
            else None
        )

    def ended_how(self) -> str:
        """Return how this run ended, in words: no process of its own exited, so it is what its query did in
        the host (failed, stopped), or that its host is gone (its failure record says how)."""
        if not self.host_alive():
            return f"its shared application host (pid {self.pid}) is gone"
        state = self.host.folder.state(self.key) or {}
        done = str(state.get("state")) if state.get("token") == self.token else ""
        verb = {"failed": "failed", "stopped": "stopped"}.get(done, "ended")
        return f"its query {verb} in the shared application host (pid {self.pid})"

    def signal(self, sig: int, group: bool = False) -> None:
        """Any signal stops this dagger's query only: its assignment is removed; SIGKILL also asks the host
        to end the run now (its sinks give up the write they retry)."""
        assigned = self.host.folder.assignment(self.key)
        if assigned is not None and assigned.get("token") == self.token:
            self.host.folder.unassign(self.key)
        if sig == signal.SIGKILL:
            self.host.folder.kill(self.key, self.token)

    def reap_group(self) -> None:
        """Nothing to reap: the host goes on (a dead one is cleaned up when it is started again)."""

    def log_since_start(self) -> str:
        """Return the error of this run: the one its host reported, or why the host is gone."""
        if not self.host_alive():
            return self._host_gone().text()
        state = self.host.folder.state(self.key) or {}
        return str(state.get("error") or "") if state.get("token") == self.token else ""

    def failure(self) -> FailureRecord | None:
        """Return the failure record of this run: the one its host reported with its ``failed`` state, or,
        when the host is gone, one that says so; None while neither is there."""
        if not self.host_alive():
            return self._host_gone()
        state = self.host.folder.state(self.key) or {}
        if state.get("token") != self.token or state.get("state") != "failed":
            return None
        return FailureRecord.from_json(state.get("failure"))

    def _host_gone(self) -> FailureRecord:
        info = self.host.folder.host() or {}
        code = self._popen.returncode if self._popen is not None else None
        if info.get("pid") == self.pid and info.get("error"):
            why = str(info["error"])
        elif code is not None:
            why = how_it_ended(code)
        else:
            why = "it ended (its exit code is not known: an earlier controller started it)"
        err = DaggerError(f"its shared application host (pid {self.pid}) is gone: {why}")
        return FailureRecord.of(err, code)


class SharedHosts:
    """The hosts of one controller (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        master: str,
        env: Callable[[], dict[str, str]],
        *,
        command: HostCommand | None = None,
        daggers_per_host: int = 50,
    ) -> None:
        self.root = Path(root)
        self.master = master
        self.env = env
        self.command = command or default_host_command
        self.daggers_per_host = daggers_per_host
        self.hosts: dict[Path, Host] = {}
        for folder in sorted(self.root.glob("host-*")) if self.root.is_dir() else []:
            self._host(folder)

    def _host(self, folder: Path) -> Host:
        """Return the host of ``folder``, adopting its process when it still runs. Only this controller's
        own hosts (under ``root``) are kept for placing daggers; another's (a dagger moved here) is not."""
        folder = Path(folder)
        host = self.hosts.get(folder)
        if host is None:
            host = Host(HostFolder(folder))
            info = host.folder.host() or {}
            pid, start = info.get("pid"), info.get("start_time")
            if (
                pid
                and start
                and info.get("state") in ("starting", "ready")
                and pid_alive(int(pid), int(start))
            ):
                host.pid, host.start_time = int(pid), int(start)
                log.info("found the shared host pid %s (%s)", pid, folder)
            if folder.parent == self.root:
                self.hosts[folder] = host
        return host

    def ensure_running(self, host: Host) -> Host:
        """Start ``host``'s process when it is not running (its assignments resume in the new one)."""
        if host.alive():
            return host
        if host.pid is not None:
            log.warning(
                "the shared host pid %s is gone (%s); starting it again",
                host.pid,
                how_it_ended(host.exit_code()),
            )
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group_members(host.pid):
                    os.killpg(host.pid, signal.SIGKILL)  # what is left of its JVM
        root = host.folder.root
        root.mkdir(parents=True, exist_ok=True)
        with host.folder.log_path.open("ab") as fh:
            fh.write(
                f"=== {datetime.now(UTC).isoformat(timespec='seconds')} controller: starting the host\n".encode()
            )
            fh.flush()
            popen = subprocess.Popen(
                self.command(root, self.master),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=root,
                start_new_session=True,
                close_fds=True,
            )
        host.popen, host.pid, host.start_time = popen, popen.pid, process_start_time(popen.pid)
        log.info("shared host pid %d starting (%s)", popen.pid, root)
        return host

    def place(self, key: str) -> Host:
        """Return the running host for dagger ``key``: the one it is assigned to, else the least loaded
        one with room, else a new one."""
        for host in self.hosts.values():
            if host.folder.assignment(key) is not None:
                return self.ensure_running(host)
        live = [h for h in self.hosts.values() if h.alive() and h.load() < self.daggers_per_host]
        if live:
            return min(live, key=Host.load)
        idle = [h for h in self.hosts.values() if not h.alive() and h.load() == 0]
        if idle:
            return self.ensure_running(idle[0])
        return self.ensure_running(self._host(self.root / f"host-{len(self.hosts)}"))

    def run(self, key: str, spec: Path, state_dir: Path, token: str, workdir: Path) -> HostedRun:
        """Assign dagger ``key`` (its run file ``spec``) to a host and return the run.

        When the host already holds the same run file under a token it has not ended (it was restarted
        and resumed it, or this is a new controller), that run is kept instead of starting it again."""
        host = self.place(key)
        current = host.folder.assignment(key)
        state = host.folder.state(key) or {}
        if (
            current is not None
            and current.get("spec") == str(spec)
            and not (state.get("token") == current.get("token") and state.get("state") in ENDED)
        ):
            token = str(current["token"])
        else:
            host.folder.assign(key, spec, state_dir, token)
        write_json(workdir / HOSTED_FILE, {"host": str(host.folder.root), "key": key})
        return HostedRun(host, key, token)

    def release(self, key: str) -> bool:
        """Remove dagger ``key``'s assignment from every host this controller knows, so that a host started
        again for other daggers does not resume it (a dagger stopped or given up while its host was dead);
        return whether there was one."""
        found = False
        for host in self.hosts.values():
            if host.folder.assignment(key) is not None:
                host.folder.unassign(key)
                found = True
        return found

    def adopt(self, workdir: Path, pid: int | None) -> HostedRun | None:
        """Return the run of the dagger in ``workdir`` when a live host (pid ``pid``) holds it, else None."""
        marker = read_json(workdir / HOSTED_FILE)
        if marker is None:
            return None
        host = self._host(Path(marker["host"]))
        assigned = host.folder.assignment(str(marker["key"]))
        if assigned is None or not host.alive() or (pid is not None and host.pid != pid):
            return None
        return HostedRun(host, str(marker["key"]), str(assigned["token"]))

    def stop_all(self, timeout: float = 90.0) -> None:
        """Stop every host this controller knows, gracefully (SIGTERM), then kill what is left."""
        hosts = [h for h in self.hosts.values() if h.alive()]
        for host in hosts:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(host.pid or 0, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(h.alive() for h in hosts) and time.monotonic() < deadline:
            time.sleep(0.2)
        for host in hosts:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if host.pid and group_members(host.pid):
                    os.killpg(host.pid, signal.SIGKILL)


def hosted_marker(workdir: Path) -> dict[str, Any] | None:
    """Return ``workdir``'s hosted.json (which host and key hold the dagger), or None."""
    return read_json(workdir / HOSTED_FILE)
