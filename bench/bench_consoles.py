"""Benchmark: 20 consoles polling one ``daggers server`` every second.

Usage::

    python bench/bench_consoles.py [--consoles 20] [--daggers 60] [--duration 60] [--interval 1.0]
                                   [--out bench/results/consoles.md]

On this machine: a PostgreSQL registry (started here) with two teams and ``--daggers`` daggers, a
``daggers server`` process on it, and a "controller" thread that writes every dagger's status once a
second through the server with its cluster's controller token (as a real controller's round does, so the
screens' data changes every second). Each console is a thread with its own token and client
(:class:`job.control.remote.RemoteControlPlane`) that fetches the daggers screen's data with one request,
``GET /api/v1/screens/overview`` (every cluster and dagger it may see; ``If-None-Match`` with the last
``ETag``), every ``--interval`` seconds, as the console's screens do; each console's first refresh comes at
a random moment of the first interval (seeded), as consoles opened by different people would.

The peer, run alongside in the same process against the same server, is the console a screen without a
list endpoint would be: one request per row per refresh (``GET /api/v1/daggers/{team}/{name}`` for each
dagger on the screen).

Reported per mode: requests, p50/p99/max request time, screens refreshed late (a refresh that took longer
than the interval), and the server process's CPU (seconds of CPU per second of wall time, from /proc).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.procstats import read_proc  # noqa: E402
from job.control import ControlPlane, Registry, bootstrap_admin  # noqa: E402
from job.control.remote import RemoteClusterAgent, RemoteControlPlane  # noqa: E402
from job.stack.ports import free_port  # noqa: E402
from job.stack.postgres import PostgresServer  # noqa: E402
from tests.helpers import booking_spec  # noqa: E402

SQL = """SELECT city_id AS tag_city_id, count(1) AS bookings,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""


def spec_text(name: str) -> str:
    """A bookings-per-city dagger of the cluster's broker and InfluxDB, writing to measurement ``name``."""
    return booking_spec(
        name,
        bootstrap="${DAGGERS_BOOTSTRAP}",
        group=f"dagger-{name}",
        sql=SQL,
        sink=f"sink:\n  type: influx\n  url: ${{DAGGERS_INFLUX}}\n  database: daggers\n"
        f"  measurement: {name}\n",
    )


def seed(registry: Registry, daggers: int, consoles: int) -> tuple[list[str], str]:
    """Two teams, a cluster each, ``daggers`` daggers split between them, a user per console; return the
    consoles' tokens and team-a's controller token."""
    bootstrap_admin(registry, "root")
    root = ControlPlane(registry, "root")
    root.add_datacentre("jkt")
    for team in ("team-a", "team-b"):
        root.add_team(team)
        root.add_cluster(
            f"{team}-jkt",
            team=team,
            datacentre="jkt",
            spark_master="local[2]",
            kafka_bootstrap="127.0.0.1:9",
            influx_url="http://127.0.0.1:9",
        )
    for i in range(daggers):
        root.create(f"team-{'ab'[i % 2]}-jkt", spec_text(f"d{i:03d}"), deploy=True)
    tokens = []
    for i in range(consoles):
        user = f"op{i:02d}"
        root.add_user(user)
        root.set_member("team-a" if i % 2 == 0 else "team-b", user, "viewer")
        tokens.append(root.create_token(user)[1])
    return tokens, root.create_token(cluster="team-a-jkt")[1]


def controller(agent: RemoteClusterAgent, stop: threading.Event) -> None:
    """Write every assigned dagger's progress once a second, as a controller's round does."""
    while not stop.is_set():
        now = time.time()
        ids = [a["id"] for a in agent.assignments()]
        agent.report(
            {
                i: {
                    "actual_state": "running",
                    "progress": {"input_rows_per_s": 1000.0 + now % 7, "updated_at": now},
                }
                for i in ids
            },
            [],
            None,
            [],
            "bench-gw",
            os.getpid(),
        )
        stop.wait(max(1.0 - (time.time() - now), 0.05))


def console(
    base: str,
    token: str,
    mode: str,
    interval: float,
    until: float,
    times: list[float],
    late: list[int],
    phase: float,
) -> None:
    """Refresh a screen every ``interval`` s until ``until``: one overview request, or one request per row.
    The first refresh is ``phase`` s in (consoles are opened at different moments, not in lockstep)."""
    plane = RemoteControlPlane(base, token)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    refs = [d["ref"] for d in plane.overview()["daggers"]]
    time.sleep(phase)
    next_at = time.monotonic()
    while time.monotonic() < until:
        started = time.monotonic()
        if mode == "overview":
            plane.overview()
            times.append(time.monotonic() - started)
        else:
            for ref in refs:
                t0 = time.monotonic()
                session.get(f"{base}/api/v1/daggers/{ref}", timeout=60).raise_for_status()
                times.append(time.monotonic() - t0)
        if time.monotonic() - started > interval:
            late.append(1)
        next_at += interval
        time.sleep(max(next_at - time.monotonic(), 0.0))


def run_mode(
    base: str, pid: int, tokens: list[str], mode: str, interval: float, duration: float
) -> dict[str, Any]:
    """Run the consoles in ``mode`` for ``duration`` s; return the figures."""
    times: list[float] = []
    late: list[int] = []
    until = time.monotonic() + duration
    cpu0, t0 = _cpu(pid), time.monotonic()
    phases = random.Random(7)
    threads = [
        threading.Thread(
            target=console, args=(base, tok, mode, interval, until, times, late, phases.uniform(0, interval))
        )
        for tok in tokens
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu = (_cpu(pid) - cpu0) / (time.monotonic() - t0)
    ms = sorted(x * 1000 for x in times)
    return {
        "mode": mode,
        "requests": len(ms),
        "req_per_s": len(ms) / duration,
        "p50_ms": statistics.median(ms),
        "p99_ms": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
        "max_ms": ms[-1],
        "late": len(late),
        "server_cpu": cpu,
    }


def _cpu(pid: int) -> float:
    info = read_proc(pid)
    return info.cpu_s if info else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--consoles", type=int, default=20)
    ap.add_argument("--daggers", type=int, default=60)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--out", type=Path, default=Path("bench/results/consoles.md"))
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="daggers-bench-pg-"))
    os.chmod(root, 0o755)
    pg = PostgresServer(root / "pg", free_port())
    pg.start()
    server: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    try:
        registry = Registry(pg.dsn)
        tokens, ctl_token = seed(registry, args.daggers, args.consoles)
        registry.close()
        port = free_port()
        log = open(root / "server.log", "wb")  # noqa: SIM115 - closed with the server below
        server = subprocess.Popen(
            [sys.executable, "-m", "job.cli", "server", "--port", str(port)],
            env={**os.environ, "DAGGERS_REGISTRY": pg.dsn},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/api/v1/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        writer = threading.Thread(
            target=controller, args=(RemoteClusterAgent(base, ctl_token, "team-a-jkt"), stop)
        )
        writer.start()
        load0 = os.getloadavg()[0]
        results = [
            run_mode(base, server.pid, tokens, mode, args.interval, args.duration)
            for mode in ("overview", "per-row")
        ]
        load1 = os.getloadavg()[0]
    finally:
        stop.set()
        if server is not None:
            server.terminate()
            server.wait(20)
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)
    write_report(args, results, (load0, load1))


def write_report(args: argparse.Namespace, results: list[dict[str, Any]], load: tuple[float, float]) -> None:
    """Print the figures and write them to ``args.out``."""
    ours, peer = results
    lines = [
        "# 20 consoles against one server",
        "",
        f"Command: `.venv/bin/python bench/bench_consoles.py --consoles {args.consoles} --daggers {args.daggers} "
        f"--duration {args.duration:g} --interval {args.interval:g}`",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC. Machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, shared with other work (load average {load[0]:.1f} before, "
        f"{load[1]:.1f} after).",
        "",
        f"{args.consoles} console-equivalent clients (one thread and token each, viewers of one of two teams), "
        f"each refreshing its screen every {args.interval:g} s for {args.duration:g} s against one `daggers server` "
        f"on a PostgreSQL registry with {args.daggers} daggers, while a controller writes every one of its "
        "cluster's daggers' status once a second through the server (so the screens' data changes every second).",
        "",
        "| mode | requests | requests/s | p50 ms | p99 ms | max ms | refreshes late | server CPU (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['mode']} | {r['requests']:,} | {r['req_per_s']:.1f} | {r['p50_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['late']} | {r['server_cpu']:.2f} |"
        )
    lines += [
        "",
        "`overview`: the console's way, one `GET /api/v1/screens/overview` per screen refresh (clusters and daggers "
        "the user may see, `If-None-Match` with the last ETag). `per-row` (the peer): one `GET "
        "/api/v1/daggers/{team}/{name}` per dagger on the screen per refresh.",
        "",
        f"Ratio (overview / per-row): server CPU {ours['server_cpu'] / max(peer['server_cpu'], 1e-9):.2f}, "
        f"p99 {ours['p99_ms'] / max(peer['p99_ms'], 1e-9):.2f} (a per-row request is smaller than an overview; "
        "a per-row screen refresh takes as many of them as the screen has rows).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
