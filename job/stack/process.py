"""A small process manager for local services.

A :class:`ManagedProcess` starts a command detached in its own session (so it outlives the CLI
that started it and its whole process group can be signalled), sends stdout and stderr to a log
file, and writes a PID file. It can also be re-attached later from a PID (and the process start
time, which guards against PID reuse), e.g. by ``daggers status`` or ``daggers down``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from job.common.exits import how_it_ended
from job.stack.errors import StackError

_PROC = Path("/proc")


def process_start_time(pid: int) -> int | None:
    """Return the start time of process ``pid`` in clock ticks since boot (from ``/proc``).

    Returns None when the process does not exist or ``/proc`` is not available.
    """
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _state(pid: int) -> str | None:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split(" ", 1)[0]


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Return True when process ``pid`` runs (zombies count as dead).

    When ``start_time`` is given (see :func:`process_start_time`) the process must also have that
    start time, so a recycled PID is not mistaken for the recorded process.
    """
    if pid <= 0:
        return False
    if _PROC.is_dir():
        state = _state(pid)
        if state is None or state in ("Z", "X"):
            return False
        return start_time is None or process_start_time(pid) == start_time
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ignores_signal(pid: int, sig: int) -> bool:
    """Return whether process ``pid`` ignores ``sig`` (its ``SigIgn`` mask; False when that cannot be read).

    A process started by one that ignores SIGINT inherits that: a pytest-xdist worker's services, or a
    service started from a ``nohup``'d script. A JVM then never installs its SIGINT handler.
    """
    try:
        for line in (_PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        return False
    return False


def group_members(pgid: int) -> list[int]:
    """Return the PIDs of the live (non-zombie) processes in process group ``pgid``.

    Uses ``/proc``; without it, returns ``[pgid]`` when the group can be signalled, else ``[]``.
    """
    if not _PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [pgid]
    members: list[int] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def tail(path: Path, lines: int = 20) -> str:
    """Return the last ``lines`` lines of the text file ``path`` ("" when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


class ManagedProcess:
    """One service process: started detached, logged to a file, stopped by process group.

    ``name`` is the service name used in error messages ("the broker", "InfluxDB").
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        pid_path: Path | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log_path = Path(log_path)
        self.pid_path = Path(pid_path) if pid_path is not None else None
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        #: Ask the kernel to SIGKILL the process when the thread that started it dies (``setpriv
        #: --pdeathsig``, Linux only): for test fixtures, so a killed test run leaves nothing behind.
        self.die_with_parent = False
        self.pid: int | None = None
        self.start_time: int | None = None
        self._popen: subprocess.Popen[bytes] | None = None

    @classmethod
    def attach(
        cls, name: str, pid: int, *, start_time: int | None, log_path: Path, pid_path: Path | None = None
    ) -> ManagedProcess:
        """Return a handle on an already running (or recorded) process, e.g. read from ``stack.json``."""
        proc = cls(name, [], log_path=log_path, pid_path=pid_path)
        proc.pid = pid
        proc.start_time = start_time
        return proc

    def start(self) -> int:
        """Start the command in a new session and return its PID.

        The log file is appended to (with a header line) and the PID file is written.

        Raises:
            StackError: the program cannot be executed (not found, not executable).
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env} if self.env is not None else None
        argv = self.argv
        setpriv = shutil.which("setpriv") if self.die_with_parent else None
        if setpriv:
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        with self.log_path.open("ab") as log:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"=== {stamp} starting {self.name}: {' '.join(self.argv)}\n".encode())
            log.flush()
            try:
                self._popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cwd,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                raise StackError(f"cannot start {self.name}: {self.argv[0]}: {exc.strerror or exc}") from exc
        self.pid = self._popen.pid
        self.start_time = process_start_time(self.pid)
        if self.pid_path is not None:
            self.pid_path.parent.mkdir(parents=True, exist_ok=True)
            self.pid_path.write_text(f"{self.pid}\n")
        return self.pid

    def alive(self) -> bool:
        """Return True while the main process runs (a started child that exited is reaped here)."""
        if self.pid is None:
            return False
        if self._popen is not None and self._popen.poll() is not None:
            return False
        # A killed multi-threaded process shows as a zombie before waitpid can reap it: count it as dead.
        return pid_alive(self.pid, self.start_time)

    def _exit_code(self) -> int | None:
        """Return the exit status of a started child that is gone, or None when it is not ours.

        A killed process can show as a zombie before ``waitpid`` reaps it; the status is waited for
        up to 5 s so that a kill reads as one, not as a plain exit.
        """
        if self._popen is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._popen.wait(timeout=5)
        return self._popen.returncode

    def _wait_gone(self, timeout: float) -> bool:
        assert self.pid is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._popen is not None:
                self._popen.poll()
            else:  # reap it if it happens to be our child (e.g. started by another handle in this process)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.pid, os.WNOHANG)
            if not self.alive() and not group_members(self.pid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the process and its whole process group and wait until they are gone.

        Sends SIGINT, then SIGTERM after ``timeout`` seconds, then SIGKILL after ``timeout`` more
        seconds. SIGINT is left out when the process ignores it: a Spark master and its workers started
        from a test worker (which ignores SIGINT) took 31 s to stop, 10 s each, instead of 1 s. Removes
        the PID file. Does nothing if the process is not running.

        Raises:
            StackError: the processes are still there after SIGKILL (e.g. owned by another user).
        """
        if self.pid is None:
            return
        # Only signal the group when the recorded leader is ours (guards against recycled PIDs).
        if self.alive() or (self._popen is not None and group_members(self.pid)):
            steps = [(signal.SIGINT, timeout), (signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)]
            if ignores_signal(self.pid, signal.SIGINT):
                steps = steps[1:]
            for sig, wait in steps:
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    break
                except PermissionError as exc:
                    raise StackError(f"cannot stop {self.name} (pid {self.pid}): permission denied") from exc
                if self._wait_gone(wait):
                    break
            else:
                raise StackError(f"{self.name} (pid {self.pid}) is still running after SIGKILL")
        if self._popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=1)
        if self.pid_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.pid_path.unlink()

    def wait_healthy(self, check: Callable[[], bool], timeout: float, *, interval: float = 0.1) -> None:
        """Call ``check`` until it returns True; return then.

        Exceptions from ``check`` count as "not yet healthy".

        Raises:
            StackError: the process exits first, or ``timeout`` seconds pass; the message holds the
                last lines of the log.
        """
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                code = self._exit_code()
                how = how_it_ended(code, after_name=True) if code is not None else "exited"
                raise StackError(
                    f"{self.name} {how} while starting; last lines of {self.log_path}:\n{tail(self.log_path)}"
                )
            try:
                if check():
                    return
            except Exception:  # noqa: BLE001 - any failure of a probe means "not ready yet"
                pass
            if time.monotonic() >= deadline:
                raise StackError(
                    f"{self.name} did not become healthy within {timeout:g} s; last lines of "
                    f"{self.log_path}:\n{tail(self.log_path)}"
                )
            time.sleep(interval)

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid})"
