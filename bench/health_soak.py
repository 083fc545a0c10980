"""No fault, a busy machine: how often does the health model change its mind? The goal is never.

    python bench/health_soak.py [--minutes 30] [--load 8] [--rate 200] [--out bench/results/health-soak.json]

Starts the world of bench/health_faults.py with the health model's default thresholds (tansu, InfluxDB, a
controller, two shared bookings daggers on ``local[2]``), a live producer per dagger at ``--rate`` events a
second (event time now), and ``--load`` CPU-bound processes beside them. Once both daggers are running, it
scrapes the controller's ``/metrics`` every 5 s for ``--minutes`` and counts the changes of each dagger's
state (``daggers_dagger_state``) and of the cluster's (``daggers_cluster_state``). It prints the states
seen, the changes with their times, and each dagger's lag range; exits 1 (``BENCHMARK FAILED: …``) when any
state changed while the lag stayed bounded, or when a dagger's lag kept growing (a real lag: the run says
nothing then), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.health_faults import HealthWorld  # noqa: E402
from job.produce.generator import generate  # noqa: E402
from job.produce.producer import produce  # noqa: E402

SCRAPE_S = 5.0
_SAMPLE = re.compile(r"^(daggers_(?:dagger|cluster)_state)\{([^}]*)\} ([0-9.e+-]+)$")
_LAG = re.compile(r"^daggers_dagger_lag_records\{([^}]*)\} ([0-9.e+-]+)$")


def _labels(text: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def scrape(url: str, keep: list[str] | None = None) -> tuple[dict[str, str], dict[str, float]]:
    """Return the state of each dagger (and ``cluster``) and each dagger's lag from a ``/metrics`` text;
    ``keep`` (when given) receives its ``daggers_*`` sample lines."""
    states: dict[str, str] = {}
    lags: dict[str, float] = {}
    for line in requests.get(url, timeout=10).text.splitlines():
        if keep is not None and line.startswith("daggers_"):
            keep.append(line)
        if (m := _SAMPLE.match(line)) and float(m.group(3)) == 1.0:
            labels = _labels(m.group(2))
            key = "cluster" if m.group(1) == "daggers_cluster_state" else labels.get("dagger", "?")
            states[key] = labels["state"]
        elif m := _LAG.match(line):
            lags[_labels(m.group(1)).get("dagger", "?")] = float(m.group(2))
    return states, lags


def live_producer(world: HealthWorld, topic: str, rate: float, stop: threading.Event, seed: int) -> None:
    """Produce bookings stamped now at ``rate`` a second, a second's worth at a time, until ``stop``."""
    n = 0
    while not stop.is_set():
        started = time.monotonic()
        batch = generate("booking", int(rate), seed=seed + n, start=datetime.now(UTC), duration_s=1.0)
        produce(world.broker.bootstrap, topic, batch, progress=False)
        n += 1
        stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))


def hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """Start ``count`` CPU-bound processes."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def changes(series: list[tuple[float, dict[str, str]]]) -> list[tuple[float, str, str, str]]:
    """Return every change in a series of state samples: (seconds from the first sample, what, from, to)."""
    out = []
    for (_, before), (at, after) in zip(series, series[1:], strict=False):
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                out.append((round(at - series[0][0], 1), key, before.get(key, "-"), after.get(key, "-")))
    return out


def lag_grows(lags: list[float]) -> bool:
    """Return True when the lag's lows rose through the run (its lowest in the last fifth above its highest
    in the first fifth): a dagger that really falls behind, which this run is not about."""
    if len(lags) < 10:
        return False
    fifth = len(lags) // 5
    return min(lags[-fifth:]) > max(lags[:fifth])


def verdicts(world: HealthWorld) -> dict[str, Any]:
    """Return the health model's verdicts (with their reasons and figures) on the daggers and the cluster,
    judged in this process with the default thresholds, as the controller judges them."""
    try:
        return {"daggers": world.rows_here(), "cluster": world.plane.cluster_health("a-jkt")}
    except Exception as exc:  # a trace is evidence, never a reason to stop the run
        return {"error": f"{type(exc).__name__}: {exc}"}


def run(minutes: float, load: int, rate: float, root: Path, trace: Path | None = None) -> dict[str, Any]:
    """Run the soak in ``root``; return what it saw. ``trace``: a JSON-lines file that gets every sample's
    ``daggers_*`` metric lines, and the model's verdicts (reasons, figures, probes) at each state change."""
    world = HealthWorld(root)
    world.env = {
        **os.environ,
        "DAGGERS_USER": "alice",
        "DAGGERS_REGISTRY": world.url,
    }  # the default thresholds
    stop = threading.Event()
    burners: list[subprocess.Popen[bytes]] = []
    threads = []
    opened: list[IO[str]] = []
    try:
        world.start()
        for i, name in enumerate(("soak-a", "soak-b")):
            topic = world.topic(f"{name}-bookings")
            world.create(name, topic)
            t = threading.Thread(target=live_producer, args=(world, topic, rate, stop, 1000 * i), daemon=True)
            t.start()
            threads.append(t)
        burners = hogs(load)
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            rows = world.rows_here()
            if all(rows.get(n, {}).get("health", {}).get("state") == "running" for n in ("soak-a", "soak-b")):
                break
            time.sleep(5)
        else:
            raise SystemExit("BENCHMARK FAILED: the daggers were not running within 15 minutes")
        time.sleep(60)  # the lag window fills with readings of the running daggers
        url = world.plane.cluster("a-jkt").controller_metrics_url
        assert url, "the controller serves no /metrics"
        series: list[tuple[float, dict[str, str]]] = []
        lags: dict[str, list[float]] = {}
        loads: list[float] = []
        end = time.monotonic() + minutes * 60
        out = trace.open("w") if trace else None
        opened.extend([out] if out else [])
        while time.monotonic() < end:
            started = time.monotonic()
            lines: list[str] = []
            try:
                states, lag = scrape(url, lines)
            except requests.RequestException as exc:
                print(f"scrape failed: {exc}", flush=True)
            else:
                if out is not None:
                    changed = bool(series) and series[-1][1] != states
                    record: dict[str, Any] = {"at": time.time(), "states": states, "metrics": lines}
                    if changed or not series:
                        record["verdicts"] = verdicts(world)
                        print(
                            f"state change at {time.time():.0f}: {series[-1][1] if series else {}} -> {states}",
                            flush=True,
                        )
                    out.write(json.dumps(record, default=str) + "\n")
                    out.flush()
                series.append((time.time(), states))
                loads.append(os.getloadavg()[0])
                for name, value in lag.items():
                    lags.setdefault(name, []).append(value)
            time.sleep(max(0.0, SCRAPE_S - (time.monotonic() - started)))
    finally:
        for handle in opened:
            handle.close()
        stop.set()
        for p in burners:
            p.kill()
            p.wait()
        for t in threads:
            t.join(30)
        world.close()
    seen: dict[str, dict[str, int]] = {}
    for _, states in series:
        for key, state in states.items():
            seen.setdefault(key, {}).setdefault(state, 0)
            seen[key][state] += 1
    return {
        "samples": len(series),
        "changes": changes(series),
        "states": seen,
        "lag": {n: [min(v), max(v)] for n, v in lags.items() if v},
        "lag_grows": sorted(n for n, v in lags.items() if lag_grows(v)),
        "load_average": [min(loads), max(loads)] if loads else [],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--load", type=int, default=8, help="CPU-bound processes beside the world")
    ap.add_argument("--rate", type=float, default=200.0, help="events a second per dagger")
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON here")
    ap.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="write every sample (and the model's reasons at each state change) as JSON lines here",
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="daggers-soak-") as tmp:
        started = datetime.now(UTC)
        result = run(args.minutes, args.load, args.rate, Path(tmp), args.trace)
    result.update(
        {
            "command": " ".join(["python", "bench/health_soak.py", *(argv or sys.argv[1:])]),
            "date": started.isoformat(timespec="seconds"),
            "machine": f"{platform.node()} {os.cpu_count()} cores",
            "minutes": args.minutes,
            "load": args.load,
            "rate": args.rate,
        }
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if result["lag_grows"]:
        print(
            f"BENCHMARK FAILED: the lag of {', '.join(result['lag_grows'])} kept growing: not a no-fault run"
        )
        return 1
    if result["changes"]:
        print(f"BENCHMARK FAILED: {len(result['changes'])} state changes with no fault (goal 0)")
        return 1
    if result["samples"] < 2:
        print("BENCHMARK FAILED: fewer than two /metrics samples")
        return 1
    print(
        f"0 state changes in {result['samples']} samples over {args.minutes:g} minutes beside a load of {args.load}"
        f" (load average {result['load_average'][0]:.1f}-{result['load_average'][1]:.1f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
