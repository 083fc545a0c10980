"""bench/run.py --runs N runs the peers N times too: the round order, each run's own labels, measurement,
files and output, and the median, the worst and the ratio of medians in the report."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench import flink_bench, report, run
from bench.verdict import failures
from bench.workloads import WORKLOADS

PEERS = ["loop", "quix", "flink-builtin", "engine-builtin", "flink-udf"]


def test_one_run_keeps_the_engine_then_every_peer_once() -> None:
    args = run.parse_args(["--peers", ",".join(PEERS)])
    assert run.preload_runs(args, PEERS) == [
        ("engine", None, None, []),
        ("loop", "loop", None, []),
        ("quix", "quix", None, []),
        ("flink-builtin", "flink-builtin", None, []),
        ("engine-builtin", "engine-builtin", None, []),
        ("flink-udf", "flink-udf", None, []),
    ]


def test_each_round_is_its_engine_runs_then_every_peers_run_of_that_round() -> None:
    args = run.parse_args(["--runs", "3", "--baseline-conf", "spark.x=1"])
    got = run.preload_runs(args, ["loop", "engine-builtin"])
    assert [(label, peer) for label, peer, _, _ in got] == [
        ("engine", None),
        ("baseline", None),
        ("loop", "loop"),
        ("engine-builtin", "engine-builtin"),
        ("engine_2", None),
        ("baseline_2", None),
        ("loop_2", "loop"),
        ("engine-builtin_2", "engine-builtin"),
        ("engine_3", None),
        ("baseline_3", None),
        ("loop_3", "loop"),
        ("engine-builtin_3", "engine-builtin"),
    ]
    assert [conf for label, _, _, conf in got if label.startswith("baseline")] == [["spark.x=1"]] * 3
    assert {run.family(label) for label, peer, _, _ in got if peer} == {"loop", "engine-builtin"}
    assert run.preload_runs(args, []) == [(label, None, f, c) for label, f, c in run.engine_runs(args)]


def test_a_variant_may_not_take_a_peers_name() -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--variant", "loop:spark.x=1"])


def _stack(folder: Path) -> run.Stack:
    me = SimpleNamespace(pid=os.getpid())
    return run.Stack(
        folder,
        SimpleNamespace(bootstrap="127.0.0.1:19092", process=me),
        SimpleNamespace(url="http://127.0.0.1:18086", process=me),
    )


def _value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def test_each_run_of_a_peer_has_its_own_measurement_progress_and_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quix = tmp_path / "quix-venv/bin/python"
    quix.parent.mkdir(parents=True)
    quix.touch()
    monkeypatch.setattr(run, "QUIX_PYTHON", quix)
    loaded = run.Loaded(topic="bench-a-1", events=10, total=12, expected={}, produce_s=0.1)
    args = argparse.Namespace(max_records=None, cores=2, peer_timeout=60.0)
    w = WORKLOADS["a"]

    def argv(peer: str, label: str | None) -> list[str]:
        progress = tmp_path / f"{label or peer}-progress.json"
        got = run.peer_argv(peer, w, _stack(tmp_path), loaded, tmp_path, args, progress, label)
        assert got is not None
        return got

    assert _value(argv("loop", None), "--measurement") == "drivers_loop"
    assert _value(argv("loop", "loop_2"), "--measurement") == "drivers_loop_2"
    assert _value(argv("loop", "loop_2"), "--progress") == str(tmp_path / "loop_2-progress.json")
    assert _value(argv("quix", "quix"), "--state-dir") == str(tmp_path / "quix-state")
    second = argv("quix", "quix_3")
    assert (_value(second, "--measurement"), _value(second, "--state-dir")) == (
        "drivers_quix_3",
        str(tmp_path / "quix-state_3"),
    )
    spark = argv("sparkudf", "sparkudf_2")
    assert (_value(spark, "--measurement"), _value(spark, "--checkpoint")) == (
        "drivers_sparkudf_2",
        str(tmp_path / "sparkudf_2-checkpoint"),
    )
    assert _value(spark, "--spec") == str(tmp_path / "a-sparkudf_2-pre.yaml")
    assert (
        "checkpoint_dir: " + str(tmp_path / "checkpoint-a-sparkudf_2-pre")
        in Path(_value(spark, "--spec")).read_text()
    )
    assert _value(argv("sparkudf", None), "--checkpoint") == str(tmp_path / "sparkudf-checkpoint")


def test_each_run_of_a_peer_is_checked_against_its_own_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake loop peer that writes its progress file at once; a fake InfluxDB holding the first run's points
    right and the second run's wrong: each run's check reads its own measurement."""
    w = WORKLOADS["a"]
    expected = {(60, "-1"): (2,), (120, "-1"): (3,)}
    loaded = run.Loaded(topic="bench-a-1", events=10, total=12, expected=expected, produce_s=0.1)
    stored = {"drivers_loop": dict(expected), "drivers_loop_2": {**expected, (120, "-1"): (4,)}}
    spawned: list[tuple[str, Path]] = []

    def fake_spawn(argv: list[str], log: Path, **_: Any) -> subprocess.Popen[bytes]:
        spawned.append((_value(argv, "--measurement"), log))
        Path(_value(argv, "--progress")).write_text(
            json.dumps({"events": 12, "points": 2, "first_event_at": 1.0, "updated_at": 3.0, "done": True})
        )
        return subprocess.Popen([sys.executable, "-c", "pass"])

    def fake_points(url: str, db: str, measurement: str, *_: Any) -> dict:
        return stored[measurement]

    monkeypatch.setattr(run, "spawn", fake_spawn)
    monkeypatch.setattr(run.influx_read, "points", fake_points)
    args = argparse.Namespace(cores=2, peer_timeout=60.0, max_records=None)
    first = run.run_peer("loop", w, _stack(tmp_path), loaded, tmp_path, args, expected)
    second = run.run_peer("loop", w, _stack(tmp_path), loaded, tmp_path, args, expected, "loop_2")
    assert spawned == [
        ("drivers_loop", tmp_path / "a-loop.log"),
        ("drivers_loop_2", tmp_path / "a-loop_2.log"),
    ]
    assert (first.runner, first.check, first.events_per_s) == ("loop", "equal (2 points)", 6.0)
    assert (second.runner, second.check) == (
        "loop_2",
        "DIFFERENT: 0 missing, 0 extra, 1 wrong of 2 (e.g. (120, '-1'): expected (3,), got (4,))",
    )


def test_each_flink_run_reads_only_the_output_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake Flink job that writes one window into its --out folder; the first run's window is right, the
    second's wrong: each run's check reads its own folder."""
    python = tmp_path / "flink-venv/bin/python"
    python.parent.mkdir(parents=True)
    python.touch()
    monkeypatch.setattr(flink_bench, "FLINK_PYTHON", python)
    drivers = iter(["2", "5"])
    logs: list[Path] = []

    def fake_spawn(argv: list[str], log: Path, **_: Any) -> subprocess.Popen[bytes]:
        logs.append(log)
        out = Path(_value(argv, "--out"))
        out.mkdir(parents=True)
        (out / "part-0.csv").write_text(f"7,8,{next(drivers)},2026-01-01 00:01:00\n")
        Path(_value(argv, "--timings")).write_text(
            json.dumps({"started": 0.0, "submitted": 1.0, "done": 3.0})
        )
        return subprocess.Popen([sys.executable, "-c", "pass"])

    expected = {(1767225660, "7", "8"): (2,)}
    flink_input = flink_bench.FlinkInput(tmp_path / "events", 10, expected)
    args = argparse.Namespace(cores=2, engine_timeout=30.0, peer_timeout=30.0)
    w = WORKLOADS["a"]
    got = [
        flink_bench.run_flink_peer(
            "flink-builtin", w, expected, flink_input, tmp_path, args, fake_spawn, run.stop, run.compare,
            run.RunResult, label=label,
        )
        for label in (None, "flink-builtin_2")
    ]  # fmt: skip
    assert logs == [tmp_path / "a-flink-builtin.log", tmp_path / "a-flink-builtin_2.log"]
    assert [(r.runner, r.events_per_s, r.check) for r in got] == [
        ("flink-builtin", 5.0, "equal (1 points)"),
        (
            "flink-builtin_2",
            5.0,
            "DIFFERENT: 0 missing, 0 extra, 1 wrong of 1 (e.g. (1767225660, '7', '8'): expected (2,), got (5,))",
        ),
    ]


def test_each_engine_builtin_run_has_its_own_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []

    def fake_engine(w: Any, stack: Any, loaded: Any, folder: Path, args: Any, runner: str = "engine") -> Any:
        calls.append((w.measurement_for(runner), runner))
        return run.RunResult(runner, events=12)

    monkeypatch.setattr(run, "run_engine", fake_engine)
    loaded = run.Loaded(topic="t", events=10, total=12, expected={}, produce_s=0.1)
    cache = {"input": flink_bench.FlinkInput(tmp_path, 10, {})}
    labels = [
        run.run_flink_side("engine-builtin", WORKLOADS["a"], _stack(tmp_path), loaded, tmp_path,
                           argparse.Namespace(), cache, label).runner
        for label in (None, "engine-builtin_2")
    ]  # fmt: skip
    assert labels == ["engine-builtin", "engine-builtin_2"]
    assert calls == [("drivers_grid_engine", "engine"), ("drivers_grid_engine_2", "engine_2")]


def _entry() -> dict[str, Any]:
    def ok(events_per_s: float, cpu: float) -> dict[str, Any]:
        return {"events": 1_000, "complete": True, "check": "equal", "events_per_s": events_per_s,
                "cpu_us_per_event": cpu}  # fmt: skip

    not_run = {"events": 0, "check": "not run"}
    runs = {}
    for i, (e, loop, quix, fb, eb) in enumerate(
        [
            (400.0, 80.0, 20.0, 200.0, 300.0),
            (420.0, 90.0, 22.0, 190.0, 310.0),
            (380.0, 70.0, 25.0, 210.0, 320.0),
        ]
    ):
        n = "" if i == 0 else f"_{i + 1}"
        runs |= {
            f"engine{n}": ok(e, 4.0 + i),
            f"loop{n}": ok(loop, 12.0 + i),
            f"quix{n}": ok(quix, 50.0),
            f"sparkudf{n}": not_run,
            f"flink-builtin{n}": ok(fb, 10.0),
            f"engine-builtin{n}": ok(eb, 5.0),
        }
    return {"runs": runs}


def test_the_summary_gives_each_peers_median_and_worst_and_daggers_against_it_by_medians() -> None:
    entry = _entry()
    assert report.summary_lines(run.summarize(entry)) == [
        "engine, 3 runs: events/s median 400 worst 380; CPU µs/event median 5.00 worst 6.00",
        "loop, 3 runs: events/s median 80 worst 70; CPU µs/event median 13.00 worst 14.00",
        "quix, 3 runs: events/s median 22 worst 20; CPU µs/event median 50.00 worst 50.00",
        "flink-builtin, 3 runs: events/s median 200 worst 190; CPU µs/event median 10.00 worst 10.00",
        "engine-builtin, 3 runs: events/s median 310 worst 300; CPU µs/event median 5.00 worst 5.00",
        "engine against loop, medians: 5.0x the events/s (400 against 80, 3 and 3 runs); loop takes 2.6x the "
        "CPU an event (13.00 against 5.00 µs)",
        "engine against quix, medians: 18.2x the events/s (400 against 22, 3 and 3 runs); quix takes 10.0x the "
        "CPU an event (50.00 against 5.00 µs)",
        "engine-builtin against flink-builtin, medians: 1.6x the events/s (310 against 200, 3 and 3 runs); "
        "flink-builtin takes 2.0x the CPU an event (10.00 against 5.00 µs)",
    ]


def test_one_run_each_gives_no_summary_as_before() -> None:
    entry = {"runs": {k: v for k, v in _entry()["runs"].items() if "_" not in k}}
    assert report.summary_lines(run.summarize(entry)) == []


def test_every_row_of_the_table_is_one_run_against_the_engine_of_its_round() -> None:
    rows = report._rows({"workloads": {"a": _entry()}})
    got = {r[1]: r[4] for r in rows}
    loop = report.TITLES["loop"]
    assert (got[loop], got[f"{loop} (run 2)"], got[f"{loop} (run 3)"]) == (
        "5.0x (CPU/event: 3.0x)",
        "4.7x (CPU/event: 2.6x)",
        "5.4x (CPU/event: 2.3x)",
    )


def test_a_wrong_result_in_any_run_of_a_peer_fails_the_benchmark() -> None:
    entry = _entry()
    entry["runs"]["loop_3"]["check"] = "DIFFERENT: 1 missing, 0 extra, 0 wrong of 2 (e.g. (60, 'x'))"
    entry["runs"]["flink-udf_2"] = {"events": 0, "check": "no result", "note": "exited"}
    assert failures({"workloads": {"a": entry}}) == [
        "workload (a), loop_3: a result other than the expected one: DIFFERENT: 1 missing, 0 extra, 0 wrong "
        "of 2 (e.g. (60, 'x'))",
        "workload (a), flink-udf_2: processed no events (no result) exited",
    ]
    assert failures({"workloads": {"a": _entry()}}) == []  # a peer not run here, 3 times, is no failure


def test_the_history_section_gives_the_medians_and_the_ratios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(report, "HISTORY", tmp_path / "history.md")
    monkeypatch.setattr(report, "plot", lambda results, path: None)
    entry = _entry()
    entry["summary"] = run.summarize(entry)
    results = {"command": "c", "date": "d", "machine": "m", "cores": 2, "slots": 2, "broker": "tansu",
               "workloads": {"a": entry}}  # fmt: skip
    report.record(results, "20260101T000000Z")
    text = (tmp_path / "history.md").read_text()
    assert "- (a) loop, 3 runs: events/s median 80 worst 70; CPU µs/event median 13.00 worst 14.00\n" in text
    assert (
        "- (a) engine-builtin against flink-builtin, medians: 1.6x the events/s (310 against 200, 3 and 3"
        in text
    )
