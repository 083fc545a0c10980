"""Flink as a peer of workload (a) (bench/flink_bench.py, bench/peers/flink_peer.py): the files Flink reads,
the expected points of the built-in-key query, the CSV Flink writes read back, and (with the Flink
virtualenv) both Flink queries over a small pre-load giving exactly the expected points."""

from __future__ import annotations

import argparse
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from bench import flink_bench
from bench.workloads import WORKLOADS


def test_expected_builtin_bins_and_counts_distinct_drivers() -> None:
    t0 = int(datetime(2026, 3, 2, 8, 0, tzinfo=UTC).timestamp()) * 1_000_000
    table = pa.table(
        {
            "driver_id": ["a", "a", "b", "c", "a"],
            "lat": [-6.2088, -6.2001, -6.2099, -6.2101, -6.2088],
            "long": [106.8456, 106.8499, 106.84, 106.8456, 106.8456],
            "event_timestamp": pa.array(
                [t0, t0 + 1, t0 + 59_999_999, t0 + 1_000, t0 + 60_000_000], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    end1, end2 = t0 // 1_000_000 + 60, t0 // 1_000_000 + 120
    assert flink_bench.expected_builtin(table) == {
        (end1, "-621", "10684"): (2,),  # a twice, b once: floor(-620.88) = -621, floor(10684.56) = 10684
        (end1, "-622", "10684"): (1,),  # c: floor(-621.01) = -622
        (end2, "-621", "10684"): (1,),  # a, one minute later: the next window
    }


def test_input_files_hold_every_event_in_time_order(tmp_path: Path) -> None:
    w = WORKLOADS["a"]
    got = flink_bench.write_input(w, 3000, tmp_path, parts=2)
    table = flink_bench.regenerate(w, 3000)
    lines = [
        (k, line.split(","))
        for k in range(2)
        for line in (tmp_path / f"pings-{k}.csv").read_text().splitlines()
    ]
    assert len(lines) == 3000
    by_driver = sorted((f[0], float(f[1]), float(f[2]), f[3]) for _, f in lines)
    ms = table.column("event_timestamp").cast(pa.int64()).to_pylist()
    want = sorted(
        (d, la, lo, datetime.fromtimestamp(t // 1000 / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3])
        for d, la, lo, t in zip(
            table["driver_id"].to_pylist(),
            table["lat"].to_pylist(),
            table["long"].to_pylist(),
            ms,
            strict=True,
        )
    )
    assert by_driver == want  # doubles round-trip exactly, times cut to the millisecond
    for k in range(2):
        times = [f[3] for j, f in lines if j == k]
        assert times == sorted(times)
    assert got.events == 3000 and got.builtin_expected == flink_bench.expected_builtin(table)


def test_read_output_reads_flinks_csv(tmp_path: Path) -> None:
    (tmp_path / "part-1").write_text("-621,10684,3,2026-03-02 08:01:00\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".part-2.inprogress").write_text('-1234567,2,"2026-03-02 08:02:00"\n\n')
    end = int(datetime(2026, 3, 2, 8, 1, tzinfo=UTC).timestamp())
    assert flink_bench.read_output(tmp_path, "builtin") == {
        (end, "-621", "10684"): (3,),
        (end + 60, "-1234567"): (2,),
    }


def test_builtin_workload_names_its_own_runs() -> None:
    b = flink_bench.builtin_workload(WORKLOADS["a"])
    assert (b.key, b.name, b.tags, b.measurement_for("engine")) == (
        "a-builtin",
        "bench-drivers-grid",
        ("tag_lat_bin", "tag_long_bin"),
        "drivers_grid_engine",
    )
    assert "CAST(FLOOR(lat * 100) AS BIGINT)" in b.sql and "DistinctCount(driver_id)" in b.sql


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("peer", flink_bench.FLINK_PEERS)
def test_flink_peer_gives_the_expected_points(tmp_path: Path, peer: str) -> None:
    if not flink_bench.FLINK_PYTHON.exists():
        pytest.skip("no Flink virtualenv (bench/setup_flink.sh)")
    from bench.run import RunResult, compare, spawn, stop

    w = WORKLOADS["a"]
    flink_input = flink_bench.write_input(w, 4000, tmp_path / "events", parts=2)
    expected = (
        w.expected(flink_bench.regenerate(w, 4000)) if peer == "flink-udf" else flink_input.builtin_expected
    )
    args = argparse.Namespace(cores=2, engine_timeout=300.0, peer_timeout=60.0)
    res = flink_bench.run_flink_peer(
        peer, w, expected, flink_input, tmp_path, args, spawn, stop, compare, RunResult
    )
    assert res.check == f"equal ({len(expected):,} points)", res.note
    assert res.events == 4000 and res.complete


def test_flink_peer_script_needs_its_arguments() -> None:
    done = subprocess.run(
        [sys.executable, str(flink_bench.ROOT / "bench/peers/flink_peer.py"), "--mode", "nope"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "invalid choice: 'nope'" in done.stderr
