"""Memory and CPU of a process tree, read from ``/proc`` (no psutil).

A Daggers job started as ``python -m job.cli run`` is a tree: the Python driver, the JVM it
launches (Spark's driver, which in local mode also runs the executors' JVM work), and the Python
workers the JVM forks (``pyspark.daemon`` and its children) that run the source and the UDFs.
:class:`TreeSampler` samples the tree every ``interval_s`` in a thread and keeps, per role, the
resident memory (RSS) series and the CPU seconds used.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

_PROC = Path("/proc")
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class ProcInfo:
    """One process: parent, command name and line, resident bytes, CPU seconds (own + reaped children)."""

    pid: int
    ppid: int
    comm: str
    cmdline: str
    rss: int
    cpu_s: float


def read_proc(pid: int) -> ProcInfo | None:
    """Return ``pid``'s ProcInfo, or None when it is gone."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
        statm = (_PROC / str(pid) / "statm").read_text().split()
        cmd = (_PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    comm = stat[stat.find("(") + 1 : stat.rfind(")")]
    rest = stat[stat.rfind(")") + 2 :].split()
    utime, stime, cutime, cstime = (int(x) for x in rest[11:15])
    return ProcInfo(
        pid, int(rest[1]), comm, cmd, int(statm[1]) * _PAGE, (utime + stime + cutime + cstime) / _TICK
    )


def tree(root: int) -> list[ProcInfo]:
    """Return ``root`` and all its live descendants."""
    return forest([root])[root]


def forest(roots: list[int]) -> dict[int, list[ProcInfo]]:
    """Return each root with all its live descendants (``[]`` for a root that is gone), reading ``/proc`` once."""
    infos: dict[int, ProcInfo] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            info = read_proc(int(entry.name))
            if info is not None:
                infos[info.pid] = info
    children: dict[int, list[int]] = {}
    for info in infos.values():
        children.setdefault(info.ppid, []).append(info.pid)
    result: dict[int, list[ProcInfo]] = {}
    for root in roots:
        out, todo = [], [root] if root in infos else []
        while todo:
            pid = todo.pop()
            out.append(infos[pid])
            todo.extend(children.get(pid, []))
        result[root] = out
    return result


def pss_bytes(pid: int) -> int:
    """Return ``pid``'s proportional set size in bytes (0 when it is gone or unreadable).

    PSS splits each page shared by several processes between them, so the PSS of a group of processes
    sums to the memory they hold together; RSS counts a shared page once per process (Python workers
    forked from ``pyspark.daemon`` share most of theirs)."""
    try:
        for line in (_PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def python_module(info: ProcInfo) -> str:
    """Return the module a Python process runs with ``-m`` (``pyspark.daemon``, ...), or ``""``."""
    args = info.cmdline.split()
    return args[args.index("-m") + 1] if "-m" in args[:-1] else ""


def role(info: ProcInfo, root: int) -> str:
    """Classify a process of a job's tree: ``driver-python``, ``jvm``, ``worker`` or ``other``."""
    if info.pid == root:
        return "driver-python"
    if info.comm == "java":
        return "jvm"
    if "python" in info.comm or "python" in info.cmdline.split(" ", 1)[0]:
        return "worker"
    return "other"


@dataclass
class Sample:
    """RSS bytes per role and total CPU seconds of the tree at one moment."""

    t: float
    rss: dict[str, int]
    cpu_s: float
    #: PSS bytes per role, in every ``pss_every``-th sample only (reading smaps costs more than stat)
    pss: dict[str, int] | None = None


@dataclass
class TreeSampler:
    """Samples a process tree (and optional extra single processes) in a background thread."""

    root: int
    interval_s: float = 0.5
    extra: dict[str, int] = field(default_factory=dict)  # name -> pid (broker, InfluxDB), no children
    #: every how many samples the PSS of each process is read too (0: never)
    pss_every: int = 4
    samples: list[Sample] = field(default_factory=list)
    extra_cpu: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sample(self) -> Sample | None:
        """Take one sample now; return it (None when the tree is gone)."""
        procs = tree(self.root)
        now = time.time()
        for name, pid in self.extra.items():
            info = read_proc(pid)
            if info is not None:
                self.extra_cpu.setdefault(name, []).append((now, info.cpu_s))
        if not procs:
            return None
        rss: dict[str, int] = {}
        pss: dict[str, int] | None = (
            {} if self.pss_every and len(self.samples) % self.pss_every == 0 else None
        )
        for p in procs:
            r = role(p, self.root)
            rss[r] = rss.get(r, 0) + p.rss
            if pss is not None:
                pss[r] = pss.get(r, 0) + pss_bytes(p.pid)
        # A process that exited was reaped by its parent in the tree, whose cutime/cstime now hold its CPU.
        s = Sample(now, rss, sum(p.cpu_s for p in procs), pss)
        self.samples.append(s)
        return s

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def start(self) -> TreeSampler:
        """Start sampling in a daemon thread; return self."""
        self._thread = threading.Thread(target=self._loop, name="tree-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (waits for the thread)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ---- summaries ----------------------------------------------------------------------------

    def window(self, t0: float, t1: float) -> list[Sample]:
        """Return the samples taken within [t0, t1]."""
        return [s for s in self.samples if t0 <= s.t <= t1]

    def peak_rss(self, roles: tuple[str, ...], t0: float = 0.0, t1: float = float("inf")) -> int:
        """Return the highest summed RSS of ``roles`` over the samples in [t0, t1] (bytes)."""
        values = [sum(s.rss.get(r, 0) for r in roles) for s in self.window(t0, t1)]
        return max(values, default=0)

    def peak_pss(self, roles: tuple[str, ...], t0: float = 0.0, t1: float = float("inf")) -> int:
        """Return the highest summed PSS of ``roles`` over the samples in [t0, t1] that read it (bytes): the
        memory those processes hold together, a page shared by several (a forked worker's) counted once."""
        values = [sum(s.pss.get(r, 0) for r in roles) for s in self.window(t0, t1) if s.pss is not None]
        return max(values, default=0)

    def cpu_cores(self, t0: float, t1: float) -> float:
        """Return the mean number of cores the tree used between t0 and t1 (CPU seconds / wall seconds)."""
        inside = self.window(t0, t1)
        if len(inside) < 2 or inside[-1].t <= inside[0].t:
            return 0.0
        return (inside[-1].cpu_s - inside[0].cpu_s) / (inside[-1].t - inside[0].t)

    def extra_cores(self, name: str, t0: float, t1: float) -> float:
        """Return the mean cores an extra process (broker, InfluxDB) used between t0 and t1."""
        inside = [x for x in self.extra_cpu.get(name, []) if t0 <= x[0] <= t1]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return 0.0
        return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def steal_s() -> float:
    """Return the CPU seconds the hypervisor has taken from this VM since boot (``steal`` of
    ``/proc/stat``, all CPUs): another guest's load, which slows everything measured here."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def load_average() -> tuple[float, float, float]:
    """Return the 1, 5 and 15 minute load averages."""
    one, five, fifteen = os.getloadavg()
    return one, five, fifteen
