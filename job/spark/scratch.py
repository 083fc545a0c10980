"""Each Spark process's scratch folder (``spark.local.dir``), and the sweep of those whose process is gone.

Spark keeps a state store's RocksDB working copy, shuffle blocks and PySpark's files under
``spark.local.dir`` (``/tmp`` by default) and deletes them in a JVM shutdown hook. A JVM that is
killed (SIGKILL, the OOM killer, a lost machine: what the shared host's restart and the failover
exist for) runs no hook, and its folders stay: a heavy dagger's RocksDB copy is gigabytes, and a host
restarted a few times a day fills the disk. Measured on the development machine after two days of
test runs: 310 ``/tmp/spark-*`` and 99 ``/tmp/blockmgr-*`` folders, 1.6 GB.

So every session this process builds gets a folder of its own, named after the process that owns it
(its pid and start time, so that a reused pid is not mistaken for the owner), under
:func:`scratch_root`; and building a session first removes the folders of owners that are gone.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

#: The folder every dagger's scratch folder goes under (default: ``<temp dir>/daggers-scratch-<uid>``).
SCRATCH_ENV = "DAGGERS_SCRATCH"

log = logging.getLogger("daggers.scratch")


def scratch_root() -> Path:
    """Return the folder the scratch folders of this user's daggers go under (:data:`SCRATCH_ENV`)."""
    configured = os.environ.get(SCRATCH_ENV)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"daggers-scratch-{os.getuid()}"


def _started(pid: int) -> str | None:
    """Return the process's start time (clock ticks since boot, from ``/proc``), "" where there is no
    ``/proc`` but the process exists, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""
    except OSError:
        return ""  # exists, unreadable: count it alive
    # the command name (field 2) may hold spaces and brackets: the fields after its last ")" are fixed
    return stat.rsplit(")", 1)[1].split()[19]


def owner_name(pid: int | None = None) -> str:
    """Return the scratch folder name of process ``pid`` (this process by default): ``<pid>-<start>``."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{_started(pid) or 0}"


def _alive(name: str) -> bool:
    """Whether the process a scratch folder ``name`` is named after still runs (unknown names: yes)."""
    pid, _, start = name.partition("-")
    if not pid.isdigit():
        return True
    now = _started(int(pid))
    return now is not None and (now == "" or start == "0" or now == start)


def sweep(root: Path | None = None) -> list[Path]:
    """Remove the scratch folders under ``root`` (:func:`scratch_root`) whose process is gone; return them.

    Never raises: a folder that cannot be removed is logged and left for the next sweep.
    """
    root = scratch_root() if root is None else root
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if entry.is_dir() and not _alive(entry.name):
            shutil.rmtree(entry, ignore_errors=True)
            if entry.exists():
                log.warning("cannot remove the scratch folder %s of a stopped process", entry)
            else:
                removed.append(entry)
    if removed:
        log.info("removed %d scratch folder(s) of stopped processes under %s", len(removed), root)
    return removed


def claim() -> Path:
    """Sweep, then return this process's scratch folder: created, kept for the process's life and removed
    when it exits normally (a killed one's is removed by the next sweep)."""
    root = scratch_root()
    sweep(root)
    folder = root / owner_name()
    if not folder.exists():
        folder.mkdir(parents=True)
        atexit.register(shutil.rmtree, folder, True)  # a clean exit leaves nothing (ignore_errors)
    return folder
