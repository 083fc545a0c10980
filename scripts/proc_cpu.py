"""Every process's CPU during a test run, by the test that started it: the machine's whole account.

``tests/cpu_usage.py`` counts what a test process can see of its own tree; a process that outlives its parent
(a dagger's JVM after a SIGKILL, a daemonised service) or is reparented escapes it (one run: 841 of ~1,750
core-s). This samples ``/proc`` every second instead, and charges each process to the test named by the
``PYTEST_CURRENT_TEST`` it inherited when it started (a session's services: to the test that first needed them;
a test process's own CPU: to its worker).

    .venv/bin/python scripts/proc_cpu.py record /tmp/procs.json &   # stop it with SIGTERM after the run
    bash scripts/test.sh
    kill %1
    .venv/bin/python scripts/proc_cpu.py report /tmp/procs.json [--top N]

A process that lives less than a second may be missed; what one burns after the last sample is not counted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")
#: A process is labelled by its command name and, when its command line has one, the first of these.
TAGS = (
    "org.apache.spark.deploy.master.Master",
    "org.apache.spark.deploy.worker.Worker",
    "CoarseGrainedExecutorBackend",
    "pyspark-shell",
    "job.cli",
    "influxd",
    "postgres",
    "tansu",
    "noida",
    "victoria",
    "chromium",
    "streamlit",
    "flink",
    "xdist",
    "pytest",
)


def _stat(pid: int) -> tuple[str, list[str]]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()


def _first_sight(pid: int, comm: str) -> list[Any]:
    """Return ``[cpu, label, test, worker]`` for a process seen for the first time."""
    env = dict(x.split(b"=", 1) for x in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in x)
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    test = env.get(b"PYTEST_CURRENT_TEST", b"").decode(errors="replace").rsplit(" (", 1)[0]
    tag = next((t.rsplit(".", 1)[-1] for t in TAGS if t in cmd), "")
    return [0.0, f"{comm}:{tag}" if tag else comm, test, env.get(b"PYTEST_XDIST_WORKER", b"").decode()]


def record(out: Path) -> None:
    """Sample every second until SIGTERM or SIGINT, then once more, and write
    ``{"pid:start": [cpu_s, label, test, worker]}``."""
    seen: dict[tuple[int, int], list[Any]] = {}
    me = os.getpid()

    def sample() -> None:
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            try:
                comm, fields = _stat(pid)
                key = (pid, int(fields[19]))  # a pid used again is another process
                if (
                    key not in seen or seen[key][1].split(":")[0] != comm
                ):  # new, or exec'd (spark-submit's bash → java)
                    seen[key] = [seen[key][0] if key in seen else 0.0, *_first_sight(pid, comm)[1:]]
            except OSError:
                continue
            seen[key][0] = (int(fields[11]) + int(fields[12])) / _TICK  # utime + stime

    def stop(*_: object) -> None:
        sample()
        out.write_text(json.dumps({f"{p}:{s}": v for (p, s), v in seen.items()}))
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while True:
        sample()
        time.sleep(1.0)


def report(path: Path, top: int) -> None:
    """Print core-seconds by kind of process, by test module, and by both."""
    rows = json.loads(path.read_text()).values()
    by_label: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    both: Counter[tuple[str, str]] = Counter()
    count: Counter[tuple[str, str]] = Counter()
    for cpu, label, test, worker in rows:
        module = test.split("::")[0] if test else ("(test process or session)" if worker else "(no test)")
        by_label[label] += cpu
        by_module[module] += cpu
        both[(module, label)] += cpu
        count[(module, label)] += 1
    print(f"{sum(by_label.values()):,.0f} core-s in {len(rows)} processes")
    for title, counter in (("kind of process", by_label), ("test module", by_module)):
        print(f"\n  core-s  {title}")
        for key, cpu in counter.most_common(top):
            print(f"{cpu:8.0f}  {key}")
    print("\n  core-s  procs  kind  module")
    for (module, label), cpu in both.most_common(top):
        print(f"{cpu:8.0f}  {count[(module, label)]:5d}  {label}  {module}")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] not in ("record", "report"):
        print(__doc__)
        return 2
    if argv[0] == "record":
        record(Path(argv[1]))
    else:
        report(Path(argv[1]), int(argv[argv.index("--top") + 1]) if "--top" in argv else 30)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
