"""Where the suite's CPU goes: each test's wall seconds and core-seconds, its own and its processes'.

On two cores the suite is bound by CPU more than by waits, so its length is the core-seconds its tests
burn. Enabled by ``DAGGERS_TEST_CPU=PREFIX`` (tests/conftest.py loads it then); each test process appends
``{"test", "wall_s", "cpu_s"}`` lines to ``PREFIX.<worker>.jsonl``. ``cpu_s`` is this process's CPU, that of
the processes it started and reaped, and the CPU its live descendants (JVMs, brokers, servers) gained while
the test ran (setup and teardown included). Sum them by module with ``scripts/test_cpu.py PREFIX``.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu(root: int) -> float:
    """Return the CPU seconds (user + system) of every live descendant of process ``root``, with that of the
    processes they reaped."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        # utime, stime, and the cutime, cstime of the children it reaped (a controller's daggers)
        cpu[pid] = sum(int(f) for f in fields[11:15]) / _TICK
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def _cpu_now() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + _descendants_cpu(os.getpid())


class CpuUsage:
    """The plugin: times each test's whole protocol (setup, call, teardown)."""

    def __init__(self, prefix: str) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        self.out = Path(f"{prefix}.{worker}.jsonl")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        wall, cpu = time.monotonic(), _cpu_now()
        yield
        line = {
            "test": item.nodeid,
            "wall_s": round(time.monotonic() - wall, 2),
            "cpu_s": round(_cpu_now() - cpu, 2),
        }
        with self.out.open("a") as f:
            f.write(json.dumps(line) + "\n")
