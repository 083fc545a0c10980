"""bench/rate_sweep.py: reading bench/run.py's live runs and finding the ceiling (no run started)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import rate_sweep
from bench.rate_sweep import LiveRun, ceiling, runs_of

RESULT = Path(__file__).resolve().parents[2] / "bench" / "results" / "20261206T154537Z.json"


def run(rate: int, p99: float | None) -> LiveRun:
    return LiveRun(rate, "engine", p99, rate, rate, 0.5, 1.0)


def test_runs_of_reads_every_live_run_of_a_real_result() -> None:
    runs = runs_of(json.loads(RESULT.read_text()), 100_000)
    assert [r.label for r in runs] == ["engine", "engine_2", "engine_3", "engine_4", "engine_5"]
    assert [round(r.p99_s or 0, 2) for r in runs] == [2.96, 2.81, 3.75, 6.58, 4.61]
    assert [r.held(5.0) for r in runs] == [True, True, True, False, True]
    assert round(runs[0].cpu_us_per_event or 0, 2) == round(
        1e6 * runs[0].job_cores / runs[0].input_rows_per_s, 2
    )


def test_ceiling_is_the_last_rate_held_with_all_below() -> None:
    rates = [100_000, 150_000, 200_000]
    runs = [run(100_000, 3.0), run(100_000, 4.9), run(150_000, 4.0), run(200_000, 9.0), run(200_000, 2.0)]
    assert ceiling(runs, rates, 5.0) == 150_000
    # a rate that holds above one that does not is no ceiling
    assert ceiling([run(100_000, 6.0), run(150_000, 1.0)], rates, 5.0) is None
    # a run that wrote no window never holds
    assert ceiling([run(100_000, None)], rates, 5.0) is None


def test_plot_writes_a_png(tmp_path: Path) -> None:
    png = tmp_path / "sweep.png"
    rate_sweep.plot([run(100_000, 3.0), run(150_000, None)], 5.0, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
