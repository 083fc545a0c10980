"""The processes a controller runs: how a dagger (or a warm standby) is started, watched and signalled,
and how its last error is read from its log."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from job.control.error_titles import error_titles
from job.stack.process import group_members, pid_alive

#: Builds the command that runs one dagger: (spec file, state folder, Spark master) -> argv.
Command = Callable[[Path, Path, str], list[str]]
#: Builds the command of a warm standby process: (ready file, Spark master) -> argv.
StandbyCommand = Callable[[Path, str], list[str]]
LOG_ROTATE_BYTES = 20 * 1024 * 1024


def default_command(spec_path: Path, state_dir: Path, master: str) -> list[str]:
    """Return ``python -P -m job.control.launch SPEC --state-dir DIR --master MASTER`` with this interpreter:
    ``daggers run`` plus the query liveness file (see :mod:`job.control.launch`). ``-P``: the working folder
    is not on its import path (``python -m`` puts it first: a ``pyspark.py`` there would run)."""
    return [
        sys.executable,
        "-P",
        "-m",
        "job.control.launch",
        str(spec_path),
        "--state-dir",
        str(state_dir),
        "--master",
        master,
    ]


def default_standby_command(ready_file: Path, master: str) -> list[str]:
    """Return ``python -P -m job.control.launch --standby READY_FILE --master MASTER``."""
    return [
        sys.executable,
        "-P",
        "-m",
        "job.control.launch",
        "--standby",
        str(ready_file),
        "--master",
        master,
    ]


def _error_titles() -> frozenset[str]:
    return error_titles()


def last_error(text: str) -> str | None:
    """Return the error a dagger's log ends with: the last ``Title: message`` line of a known error
    (with its ``hint:`` line), else the last Python exception line, else None."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    titles = _error_titles()
    for i in range(len(lines) - 1, -1, -1):
        title, sep, _ = lines[i].partition(": ")
        if sep and title.strip() in titles:
            msg = lines[i].strip()
            if i + 1 < len(lines) and lines[i + 1].strip().startswith("hint:"):
                msg += "\n" + lines[i + 1].strip()
            return msg[:2000]
    for line in reversed(lines):
        head = line.split(":", 1)[0].strip()
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line.strip()[:2000]
    return None


class DaggerProcess(Protocol):
    """What the controller asks of a dagger's process: a local one (Proc) or one on a shared host (HostedRun)."""

    def alive(self) -> bool: ...
    def exit_code(self) -> int | None: ...
    def signal(self, sig: int, group: bool = False) -> None: ...
    def reap_group(self) -> None: ...
    def log_since_start(self) -> str: ...


@dataclass
class Proc:
    """One dagger process this controller started or adopted."""

    pid: int
    start_time: int | None
    log_path: Path
    log_offset: int = 0
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        """Return True while the process runs (reaping it when it is our child and has exited)."""
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid, self.start_time)

    def exit_code(self) -> int | None:
        """Return the exit code (negative: killed by that signal); None when unknown (adopted) or running."""
        return self.popen.returncode if self.popen is not None else None

    def signal(self, sig: int, group: bool = False) -> None:
        """Send ``sig`` to the process (or its whole process group); a process already gone is fine."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)

    def reap_group(self) -> None:
        """Kill what is left of the process group (a Spark JVM) once the main process is gone."""
        if group_members(self.pid):
            self.signal(signal.SIGKILL, group=True)

    def log_since_start(self) -> str:
        """Return what the process wrote to its log since it started (at most the last 256 KiB)."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self.log_offset)
                return fh.read()[-256 * 1024 :].decode("utf-8", "replace")
        except OSError:
            return ""


@dataclass
class Standby:
    """A warm process waiting (on its stdin) for the dagger it will run."""

    popen: subprocess.Popen[bytes]
    log_path: Path
    ready_file: Path

    def ready(self) -> bool:
        """Return True when the process runs and has said it is ready."""
        return self.popen.poll() is None and self.ready_file.exists()


def tail_file(path: str | None) -> str:
    """Return the last 200 lines of the log at ``path`` ("" when there is none)."""
    from job.stack.process import tail

    return tail(Path(path), 200) if path else ""
