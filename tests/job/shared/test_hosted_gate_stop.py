"""A dagger of a shared host that waits for the host's start gate (another query starting: a host restarted
with many daggers starts them one at a time, each up to a minute) ends at once on a stop or a kill, without
waiting for the gate: before, it waited for every query ahead of it, reading ``stopping`` for minutes. A unit
test: the dagger's planning and Spark job are stood in for; its state file and thread are real."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from job.shared.channel import HostFolder
from job.shared.hosted import HostedDagger


class _Job:
    """Stands in for a DaggerJob whose sinks opened: records how it ended."""

    sinks: list[Any] = []

    def __init__(self) -> None:
        self.marks: list[str] = []

    def stop(self) -> None:
        self.marks.append("stop")

    def mark(self, state: str, error: str | None = None) -> None:
        self.marks.append(state)


class _Planned(HostedDagger):
    """A hosted dagger whose planning returns at once (no Spark)."""

    def _prepare(self) -> tuple[Any, Any]:
        self._job = _Job()
        return self._job, None


def _waiting(tmp_path: Path, gate: threading.Lock) -> tuple[_Planned, HostFolder]:
    folder = HostFolder(tmp_path / "host")
    dagger = _Planned("d", "t1", tmp_path / "d.yaml", tmp_path, None, folder, lambda: True, gate)
    dagger.start()
    time.sleep(0.5)  # planned; waits for the gate
    assert dagger.state == "starting" and dagger.query_id is None
    return dagger, folder


def test_a_stop_ends_a_wait_for_the_start_gate(tmp_path: Path) -> None:
    gate = threading.Lock()
    gate.acquire()  # another query is starting
    try:
        dagger, folder = _waiting(tmp_path, gate)
        dagger.request_stop()
        dagger.join(3.0)
        assert (folder.state("d") or {}).get("state") == "stopped"
        assert dagger._job.marks == ["stop", "stopped"]
    finally:
        gate.release()
    assert gate.acquire(timeout=1.0)  # the gate is free: the dagger never took it


def test_a_kill_ends_a_wait_for_the_start_gate(tmp_path: Path) -> None:
    gate = threading.Lock()
    gate.acquire()
    try:
        dagger, folder = _waiting(tmp_path, gate)
        dagger.abort("its controller stopped it: it did not stop in time")
        dagger.join(3.0)
        assert (folder.state("d") or {}).get("state") == "stopped"
    finally:
        gate.release()
