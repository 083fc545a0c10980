"""The control channel of a shared application host: plain files in the host's folder.

A controller (or a person, or a test) drives a host by writing and removing *assignment* files; the
host reports each dagger's state in a *state* file and its own in ``host.json``. Files survive a
restart of either side: a new controller reads the host's folder and adopts the host by the PID and
start time in ``host.json``; a new host starts every assignment it finds, each from its own checkpoint.

Layout of a host folder ``D``::

    D/assignments/<key>.json   written by the controller: {"key", "spec", "state_dir", "token"}
    D/kills/<key>.json         written by the controller: {"key", "token", "at"}: stop that run now
    D/daggers/<key>.json       written by the host: {"key", "token", "state", "failure", "error", "at", ...}
    D/host.json                written by the host: {"pid", "start_time", "state", "master", "at", "pools", ...}
    D/host.log                 the host's output (the controller redirects it there)

* ``key`` names a dagger in the host (a controller uses ``<dagger id>-<name>``; letters, digits, ``-_.``).
* ``token`` names one assignment of it: the host starts a dagger when a new key or a new token
  appears, stops it (gracefully, as SIGTERM does to a dedicated dagger) when its file goes away, and
  replaces it (stop, then start) when the token changes. A dagger that failed stays failed until its
  token changes: the host never retries by itself; the controller decides (with its back-off).
* a *kill* asks the host to end a run that was unassigned and does not stop (its sink retrying a write):
  the host aborts that run's sinks, so that its batch fails and its query ends (SIGKILL of a dedicated
  dagger). The host removes the file once no run of that key is stopping.
* ``state`` of a dagger: ``starting`` → ``running`` → ``stopping`` → ``stopped``, or ``failed`` with
  ``failure``, the run's failure record (``{"title", "message", "hint", "at", "exit_code"}``, see
  :mod:`job.query.failure_record`), which the controller shows, and ``error``, the same as text (``Title:
  message``, then ``hint: ...`` on the next line).
* a host that starts reports ``stopped`` for each run that a host process before it left not ended (it
  ended with that process) and that no assignment asks for any more (its key unassigned, or given a new
  token): a stop asked while the new host still starts Spark ends at once, not never.
* ``state`` of the host: ``starting`` (Spark starting), ``ready``, ``exited`` (with ``error`` when it
  lost its Spark application, e.g. the JVM was killed; it then exits with code 3).

Every file is written to a temporary name and renamed, so a reader never sees a partial one.
This module does not import Spark: the controller uses it too.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from job.query.liveness import read_json

ASSIGNMENTS = "assignments"
KILLS = "kills"
DAGGERS = "daggers"
HOST_FILE = "host.json"
HOST_LOG = "host.log"
#: Dagger states after which the host holds nothing for the assignment.
ENDED = ("stopped", "failed")
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def check_key(key: str) -> str:
    """Return ``key``; raise ValueError when it cannot name a file."""
    if not _KEY_RE.fullmatch(key):  # "$" alone lets a trailing newline through
        raise ValueError(f"{key!r} is not a dagger key (letters, digits, -_. ; at most 128)")
    return key


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


class HostFolder:
    """The files of one host (see the module docstring); both sides use it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ---- the controller's side ----------------------------------------------------------------

    def assign(self, key: str, spec: Path, state_dir: Path, token: str) -> None:
        """Ask the host to run the dagger of ``spec`` (a run file with ``checkpoint_dir`` set) as ``key``."""
        write_json(
            self.assignment_path(check_key(key)),
            {"key": key, "spec": str(spec), "state_dir": str(state_dir), "token": token},
        )

    def unassign(self, key: str) -> None:
        """Ask the host to stop ``key`` (a no-op when it is not assigned)."""
        self.assignment_path(check_key(key)).unlink(missing_ok=True)

    def kill(self, key: str, token: str) -> None:
        """Ask the host to end the run ``token`` of ``key`` now, though it is stopping gracefully."""
        write_json(
            self.root / KILLS / f"{check_key(key)}.json", {"key": key, "token": token, "at": time.time()}
        )

    def kill_asked(self, key: str) -> dict[str, Any] | None:
        """Return the kill asked for ``key``, or None."""
        return read_json(self.root / KILLS / f"{key}.json")

    def killed(self, key: str) -> None:
        """Forget the kill asked for ``key`` (the host's side, once no run of it is stopping)."""
        (self.root / KILLS / f"{check_key(key)}.json").unlink(missing_ok=True)

    def assignment(self, key: str) -> dict[str, Any] | None:
        """Return the assignment of ``key``, or None."""
        return read_json(self.assignment_path(key))

    def assignments(self) -> dict[str, dict[str, Any]]:
        """Return every assignment, by key."""
        out: dict[str, dict[str, Any]] = {}
        folder = self.root / ASSIGNMENTS
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            data = read_json(path)
            if data is not None and data.get("key") == path.stem and data.get("token"):
                out[path.stem] = data
        return out

    def kills(self) -> list[str]:
        """Return the keys a kill was asked for."""
        folder = self.root / KILLS
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def state(self, key: str) -> dict[str, Any] | None:
        """Return what the host last reported about ``key``, or None."""
        return read_json(self.root / DAGGERS / f"{key}.json")

    def states(self) -> dict[str, dict[str, Any]]:
        """Return what the host last reported about each key, by key."""
        out: dict[str, dict[str, Any]] = {}
        folder = self.root / DAGGERS
        for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            data = read_json(path)
            if data is not None and data.get("key") == path.stem:
                out[path.stem] = data
        return out

    def host(self) -> dict[str, Any] | None:
        """Return ``host.json``, or None before the host wrote it."""
        return read_json(self.root / HOST_FILE)

    def assignment_path(self, key: str) -> Path:
        return self.root / ASSIGNMENTS / f"{key}.json"

    @property
    def log_path(self) -> Path:
        return self.root / HOST_LOG

    # ---- the host's side ----------------------------------------------------------------------

    def report(self, key: str, token: str, state: str, **extra: Any) -> None:
        """Record ``key``'s state (for its assignment ``token``)."""
        write_json(
            self.root / DAGGERS / f"{key}.json",
            {"key": key, "token": token, "state": state, "at": time.time(), **extra},
        )

    def report_host(self, **data: Any) -> None:
        """Record the host's own state."""
        write_json(self.root / HOST_FILE, {**data, "at": time.time()})
