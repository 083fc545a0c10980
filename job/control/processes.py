"""The processes a controller runs: how a dagger (or a warm standby) is started, watched and signalled,
and what ended it: its failure record (:mod:`job.query.failure_record`), else what its log ends with."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from job.common.exits import how_it_ended
from job.errors import DaggerError
from job.query.failure_record import FailureRecord, read_failure
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


#: At most this much of an error's message is recorded as a dagger's last error.
MAX_ERROR_CHARS = 2000


def _error_titles() -> frozenset[str]:
    """Return the titles of the DaggerError classes this process has loaded."""
    titles: set[str] = set()
    stack: list[type] = [DaggerError]
    while stack:
        cls = stack.pop()
        titles.add(str(getattr(cls, "title", "")))
        stack.extend(cls.__subclasses__())
    return frozenset(t for t in titles if t)


def last_error(text: str) -> str | None:
    """Return the error a dagger's log ends with: the last ``Title: message`` line of an error whose class
    this process has loaded (with its ``hint:`` line), else the last Python exception line, else None.

    Only for a run that left no failure record (see :func:`exit_error`)."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    titles = _error_titles()
    for i in range(len(lines) - 1, -1, -1):
        title, sep, _ = lines[i].partition(": ")
        if sep and title.strip() in titles:
            msg = lines[i].strip()
            if i + 1 < len(lines) and lines[i + 1].strip().startswith("hint:"):
                msg += "\n" + lines[i + 1].strip()
            return msg[:MAX_ERROR_CHARS]
    for line in reversed(lines):
        head = line.split(":", 1)[0].strip()
        if head.endswith(("Error", "Exception")) and " " not in head:
            return line.strip()[:MAX_ERROR_CHARS]
    return None


def exit_error(record: FailureRecord | None, log_text: str, code: int | None) -> str:
    """Return what ended a dagger's run, as its last error: the text of its failure ``record`` (``Title:
    message``, then ``hint: ...``; the message cut at :data:`MAX_ERROR_CHARS`); without one (a process killed
    before it could write it) the error its log ends with (:func:`last_error`), else how it ended: killed by a
    signal (``code`` negative), an exit code, or gone (``code`` None)."""
    if record is not None:
        return replace(record, message=record.message[:MAX_ERROR_CHARS]).text()
    return last_error(log_text) or (how_it_ended(code) if code is not None else "the process is gone")


class DaggerProcess(Protocol):
    """What the controller asks of a dagger's process: a local one (Proc) or one on a shared host (HostedRun)."""

    def alive(self) -> bool: ...
    def exit_code(self) -> int | None: ...
    def ended_how(self) -> str: ...
    def signal(self, sig: int, group: bool = False) -> None: ...
    def reap_group(self) -> None: ...
    def log_since_start(self) -> str: ...
    def failure(self) -> FailureRecord | None: ...


@dataclass
class Proc:
    """One dagger process this controller started or adopted."""

    pid: int
    start_time: int | None
    log_path: Path
    log_offset: int = 0
    popen: subprocess.Popen[bytes] | None = None
    state_dir: Path | None = None  # where it writes its failure record

    def failure(self) -> FailureRecord | None:
        """Return the failure record in the dagger's state folder (any run's: the caller checks when it was
        written), or None."""
        return read_failure(self.state_dir) if self.state_dir is not None else None

    def alive(self) -> bool:
        """Return True while the process runs (reaping it when it is our child and has exited)."""
        if self.popen is not None:
            return self.popen.poll() is None
        return pid_alive(self.pid, self.start_time)

    def exit_code(self) -> int | None:
        """Return the exit code (negative: killed by that signal); None when unknown (adopted) or running."""
        return self.popen.returncode if self.popen is not None else None

    def ended_how(self) -> str:
        """Return how the process ended, in words: ``killed by signal 9 (SIGKILL)``, ``exited with code 2``
        (or that its exit code is not known: a process this controller adopted)."""
        return how_it_ended(self.exit_code())

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
