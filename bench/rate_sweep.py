"""The largest live rate one dagger keeps up with: workload (a) live at each rate of a sweep, N runs each.

Usage::

    python bench/rate_sweep.py [--rates 100000,150000,200000] [--runs 3] [--seconds 150] [--goal-s 5]
                               [--out bench/results/sweep-<UTC>.json] [--plot bench/results/plots/sweep-<UTC>.png]

For each rate it runs ``bench/run.py --workload a --no-preload --rate R --seconds S --partitions 4 --peers none
--no-components --runs N`` (a dagger on an empty topic, ``bench/feeder.py`` streaming R pings a second) and
reads that run's JSON: per run the watermark → InfluxDB p99, the job's input rows a second, the cores it used
and what the feeder really sent. A rate **holds** when every one of its runs kept the p99 within the goal; the
ceiling is the largest rate that holds with every rate below it holding too. Prints one line per rate and the
ceiling, writes the JSON and a plot (p99 of each run against the rate, the goal as a line).

Exit status: 0 when the first rate holds (the published headline), 1 (``BENCHMARK FAILED: …``) when it does not;
a higher rate that does not hold is the sweep's finding, not a failure.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class LiveRun:
    """One live run's figures, read from bench/run.py's JSON."""

    rate: int
    label: str
    p99_s: float | None  # None: no window reached InfluxDB
    sent_per_s: float
    input_rows_per_s: float
    job_cores: float
    load_before: float

    def held(self, goal_s: float) -> bool:
        """Whether this run kept the p99 within ``goal_s``."""
        return self.p99_s is not None and self.p99_s <= goal_s

    @property
    def cpu_us_per_event(self) -> float | None:
        """The job's CPU µs an event read (None when it read nothing)."""
        return 1e6 * self.job_cores / self.input_rows_per_s if self.input_rows_per_s else None


def runs_of(result: dict[str, Any], rate: int) -> list[LiveRun]:
    """Return the live runs of workload (a) in one bench/run.py JSON ``result``, in the order they ran."""
    lives = result["workloads"]["a"].get("lives") or {}
    out = []
    for label, live in lives.items():
        p99 = live.get("delay_p99_s")
        out.append(
            LiveRun(
                rate=rate,
                label=label,
                p99_s=None if p99 is None else float(p99),
                sent_per_s=float(live.get("feeder_rate") or 0.0),
                input_rows_per_s=float(live.get("input_rows_per_s") or 0.0),
                job_cores=float(live.get("job_cores") or 0.0),
                load_before=float((live.get("load_before") or [0.0])[0]),
            )
        )
    return out


def ceiling(runs: list[LiveRun], rates: list[int], goal_s: float) -> int | None:
    """Return the largest rate of ``rates`` (ascending) whose runs all held, every lower rate holding too;
    None when the first does not."""
    best = None
    for rate in rates:
        mine = [r for r in runs if r.rate == rate]
        if not mine or not all(r.held(goal_s) for r in mine):
            break
        best = rate
    return best


def run_rate(rate: int, args: argparse.Namespace) -> dict[str, Any]:
    """Run bench/run.py live at ``rate`` and return its JSON (bench/run.py's exit status is not a verdict here:
    a rate above the ceiling is expected to miss)."""
    argv = [
        sys.executable,
        str(ROOT / "bench" / "run.py"),
        "--workload",
        "a",
        "--no-preload",
        "--rate",
        str(rate),
        "--seconds",
        str(args.seconds),
        "--partitions",
        "4",
        "--peers",
        "none",
        "--no-components",
        "--runs",
        str(args.runs),
        "--live-goal-s",
        str(args.goal_s),
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    sys.stderr.write(proc.stderr[-2000:] if proc.returncode not in (0, 1) else "")
    found = re.findall(r"^results: (\S+\.json)$", proc.stdout, re.MULTILINE)
    if not found:
        raise SystemExit(
            f"BENCHMARK FAILED: bench/run.py at {rate:,}/s wrote no results\n{proc.stdout[-3000:]}"
        )
    path = Path(found[-1])
    return json.loads((path if path.is_absolute() else ROOT / path).read_text())


def plot(runs: list[LiveRun], goal_s: float, path: Path) -> None:
    """Write a PNG: each run's p99 (a missing window drawn at the top) against its rate, and the goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = max([goal_s * 2] + [r.p99_s for r in runs if r.p99_s is not None])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(
        [r.rate / 1000 for r in runs],
        [r.p99_s if r.p99_s is not None else top for r in runs],
        c=["tab:green" if r.held(goal_s) else "tab:red" for r in runs],
    )
    ax.axhline(goal_s, color="grey", linestyle="--", label=f"goal {goal_s:g} s")
    ax.set_xlabel("live rate (thousand events/s)")
    ax.set_ylabel("watermark → InfluxDB p99 (s)")
    ax.set_title("Workload (a) live on 2 cores, one dot a run")
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def line(rate: int, mine: list[LiveRun], goal_s: float) -> str:
    """One rate's summary: held runs, p99 median / worst, CPU an event, what the feeder sent."""
    p99s = [r.p99_s if r.p99_s is not None else float("inf") for r in mine]
    cpu = [c for r in mine if (c := r.cpu_us_per_event) is not None]
    return (
        f"{rate:>9,}/s: {sum(r.held(goal_s) for r in mine)} of {len(mine)} held; p99 median "
        f"{statistics.median(p99s):.2f} s, worst {max(p99s):.2f} s; CPU an event median "
        f"{statistics.median(cpu) if cpu else float('nan'):.1f} µs; sent {min(r.sent_per_s for r in mine):,.0f}"
        f"-{max(r.sent_per_s for r in mine):,.0f}/s"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="100000,150000,200000", help="comma-separated events/s, ascending")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=150)
    ap.add_argument("--goal-s", type=float, default=5.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--plot", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        rates = sorted(int(r) for r in args.rates.split(","))
    except ValueError:
        ap.error(f"--rates {args.rates!r}: give comma-separated whole numbers")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or ROOT / "bench" / "results" / f"sweep-{stamp}.json"
    png = args.plot or ROOT / "bench" / "results" / "plots" / f"sweep-{stamp}.png"
    runs: list[LiveRun] = []
    for rate in rates:
        mine = runs_of(run_rate(rate, args), rate)
        runs += mine
        print(line(rate, mine, args.goal_s), flush=True)
    top = ceiling(runs, rates, args.goal_s)
    print(f"ceiling: {top:,} events/s" if top else f"ceiling: below {rates[0]:,} events/s")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"rates": rates, "goal_s": args.goal_s, "ceiling": top, "runs": [asdict(r) for r in runs]},
            indent=1,
        )
    )
    plot(runs, args.goal_s, png)
    print(f"results: {out}\nplot: {png}")
    if top is None:
        print(f"BENCHMARK FAILED: {rates[0]:,} events/s did not hold in {args.runs} of {args.runs} runs")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
