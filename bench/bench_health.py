"""Detection time per fault: how long until ``daggers dagger list --json`` shows the health model's state.

    python bench/bench_health.py [--out bench/results/health-detection.md] [--only stalled,controller]
                                 [--load 4]

Starts a world of its own (tansu, InfluxDB, a controller, shared daggers on ``local[2]``; see
bench/health_faults.py), makes each fault real in turn, and writes a table of the seconds until the
expected state was shown (the command, date, machine and the load beside it above it). ``--load N`` runs N
CPU-bound processes beside the world for the whole run (as bench/health_soak.py does). Exits 1 when a fault
was not detected within its deadline (the table still says which), 0 when all were.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import health_faults as f  # noqa: E402
from bench.health_faults import HEALTH_ENV, Detection, HealthWorld  # noqa: E402
from bench.health_soak import hogs  # noqa: E402
from job.control.lag_trend import MIN_BATCHES  # noqa: E402

#: The faults in the order they run (each leaves the world as the next expects), by short name.
STEPS: list[tuple[str, Callable[[HealthWorld], Detection]]] = [
    ("start", f.first_running),
    ("stopped", f.stopped),
    ("redeployed", f.redeployed),
    ("crash-looping", f.crash_looping),
    ("failed", f.failed_after_retries),
    ("sink-down", f.sink_down),
    ("sink-back", f.sink_back),
    ("stalled", f.broker_paused),
    ("lagging", f.lag_growing),
    ("host-jvm", f.host_jvm_killed),
    ("host", f.host_killed),
    ("controller", f.controller_killed),
    ("controller-back", f.controller_back),
    ("late", f.late_events),
    ("broker-down", f.broker_down),
]

#: The steps that undo a fault (run with it under ``--only``, and only with it: a second controller, or an
#: InfluxDB started twice, would spoil the world).
AFTER = {"redeployed": "stopped", "sink-back": "sink-down", "controller-back": "controller"}


def machine() -> str:
    """Return a one-line description of this machine: CPU model, cores, memory, OS, Python."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "?",
    )
    mem_kb = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    load = os.getloadavg()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem_kb / 1024 / 1024:.0f} GiB, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, load {load:.1f} at the start"
    )


def load_line(hogs_beside: int, loads: list[float]) -> str:
    """Return the report's line on the load: the CPU-bound processes beside the world and the range of the
    1-minute load average sampled before and after each step."""
    seen = f"; load average {min(loads):.1f}-{max(loads):.1f} during the run" if loads else ""
    return f"- load: {hogs_beside} CPU-bound processes beside the world{seen}"


def report(
    results: list[Detection], command: str, started: datetime, host: str, load: str | None = None
) -> str:
    """Return the Markdown report of ``results`` (``load``: the line on the load beside the run)."""
    lines = [
        "# Health detection times",
        "",
        f"- command: `{command}`",
        f"- date: {started.isoformat(timespec='seconds')}",
        f"- machine: {host}",
        *([load] if load else []),
        "- thresholds: "
        + ", ".join(f"{k.removeprefix('DAGGERS_HEALTH_').lower()}={v}" for k, v in HEALTH_ENV.items())
        + f"; the lag is judged over at least {MIN_BATCHES} micro-batches (the window stretches to hold them)",
        "- seconds: from the fault (or the action) until a new `daggers dagger list --json` process showed the "
        "state; each poll costs ~1-2 s of process start, so the times are upper bounds.",
        "",
        "| fault | expected state | detected after (s) | deadline (s) | state and reason shown last |",
        "|---|---|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.fault} | {r.expected} | {r.seconds if r.detected else 'NOT DETECTED'} | "
            f"{r.deadline_s:.0f} | {shown(r)} |"
        )
    missed = [r.fault for r in results if not r.detected]
    lines += [
        "",
        f"**{len(missed)} fault(s) not detected: {', '.join(missed)}**"
        if missed
        else "All faults detected within their deadlines.",
        "",
    ]
    return "\n".join(lines)


def shown(r: Detection) -> str:
    """Return the state and reason the dagger's row showed last (the error of a step that broke), for the
    report's table: why a detection took the time it took."""
    if "error" in r.row:
        return str(r.row["error"]).replace("|", "\\|")[:300]
    health = r.row.get("health") or {}
    text = f"{health.get('state', '?')}: {health.get('reason') or '-'}" if health else "-"
    return text.replace("|", "\\|")[:300]


def exit_code(results: list[Detection]) -> int:
    """Return 0 when every fault was detected (and there was one), else 1."""
    return 0 if results and all(r.detected for r in results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).with_name("results") / "health-detection.md"
    )
    parser.add_argument(
        "--only",
        default="",
        help="Comma-separated step names to run (with what they need "
        "before them): " + ", ".join(n for n, _ in STEPS),
    )
    parser.add_argument(
        "--load", type=int, default=0, help="CPU-bound processes beside the world for the whole run"
    )
    args = parser.parse_args(argv)
    command = "python " + " ".join(
        shlex.quote(a) for a in [sys.argv[0], *(argv if argv is not None else sys.argv[1:])]
    )
    started, host = datetime.now(UTC), machine()
    wanted = {s for s in args.only.split(",") if s}
    os.environ.update(HEALTH_ENV)
    results: list[Detection] = []
    loads: list[float] = []
    with tempfile.TemporaryDirectory(prefix="daggers-health-") as tmp:
        world = HealthWorld(Path(tmp))
        burners = hogs(args.load)
        try:
            world.start()
            loads.append(os.getloadavg()[0])
            for name, step in STEPS:
                if wanted and name not in wanted and name != "start" and AFTER.get(name) not in wanted:
                    continue
                t = time.monotonic()
                try:
                    r = step(world)
                except Exception as exc:  # a step that breaks is a fault not detected, not a crash
                    r = Detection(name, "?", 0.0, None, {"error": f"{type(exc).__name__}: {exc}"})
                results.append(r)
                print(
                    f"{r.fault}: {r.seconds if r.detected else 'NOT DETECTED'} s "
                    f"(step {time.monotonic() - t:.0f} s)",
                    flush=True,
                )
                loads.append(os.getloadavg()[0])
        finally:
            for p in burners:
                p.kill()
                p.wait()
            world.close()
    text = report(results, command, started, host, load_line(args.load, loads))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return exit_code(results)


if __name__ == "__main__":
    sys.exit(main())
