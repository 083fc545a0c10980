"""A live run's latency per window, split into the wait for a batch, the closing batch, the eviction and the rest."""

from __future__ import annotations

import json
from pathlib import Path

from bench.report import latency_split, live_line

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"


def test_a_window_waits_for_the_batch_under_way_then_its_own_then_the_eviction() -> None:
    # window ending at 50, closed by the record sent at 60.0
    windows = [(50.0, 60.0, 64.9, 65.4)]
    batches: list[tuple[float, float, int, float | None]] = [
        (58.0, 3000.0, 800_000, 40.0),  # 55-58: before the closing record
        (62.5, 2000.0, 350_000, 45.0),  # 60.5-62.5: the first to start after the record was sent
        (64.0, 1500.0, 0, 50.5),  # 62.5-64: the eviction
        (70.0, 3000.0, 700_000, 52.0),
    ]
    assert latency_split(windows, batches) == [(0.5, 2.0, 1.5, 1.4)]
    # no eviction batch in the timeline: left out
    assert latency_split(windows, batches[:2]) == []
    assert latency_split([], batches) == []


def test_the_split_of_a_recorded_run() -> None:
    run = json.loads((RESULTS / "20261207T201843Z.json").read_text())["workloads"]["a"]["lives"]["engine"]
    assert latency_split(run["window_timeline"], run["batch_timeline"]) == [
        (1.03, 1.83, 1.31, 0.38),
        (0.02, 2.55, 1.15, 0.58),
    ]
    assert (
        "per window, s waiting/closing batch/eviction/rest: 1.0/1.8/1.3/0.4, 0.0/2.5/1.1/0.6;"
        in live_line(run)
    )
