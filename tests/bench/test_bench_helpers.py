"""Unit tests of the benchmark harness's pure helpers (the benchmarks themselves never run in the suite)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
import s2sphere

from bench.feeder import split_pool, varint5
from bench.procstats import TreeSampler, read_proc, role, tree
from bench.run import compare
from bench.workloads import (
    PING_CLASS,
    WORKLOADS,
    Approx,
    _p95,
    driver_pings,
    expected_drivers,
    expected_pass_through,
    square_points,
)
from job.schema import default_registry


def _signed(lat: float, lng: float) -> str:
    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(13).id()
    return str(cid - (1 << 64) if cid >= 1 << 63 else cid)


def test_varint5_round_trips_and_rejects_other_widths() -> None:
    from google.protobuf.timestamp_pb2 import Timestamp

    for seconds in (1_772_438_400, 2**28, 2**35 - 1):
        encoded = varint5(seconds)
        assert len(encoded) == 5
        assert Timestamp.FromString(b"\x08" + encoded).seconds == seconds
    with pytest.raises(ValueError):
        varint5(100)


def test_split_pool_patches_only_the_seconds() -> None:
    batch = driver_pings(50, 3, datetime(2026, 1, 1, tzinfo=UTC), 10.0)
    micros = batch.table.column("event_timestamp").cast(pa.int64()).to_pylist()
    parts = split_pool(batch.payloads, [m // 1_000_000 for m in micros])
    cls = default_registry().message_class(PING_CLASS)
    for (head, tail), payload, us in zip(parts, batch.payloads, micros, strict=True):
        patched = cls.FromString(head + varint5(1_800_000_123) + tail)
        original = cls.FromString(payload)
        assert patched.event_timestamp.seconds == 1_800_000_123
        assert patched.event_timestamp.nanos == (us % 1_000_000) * 1000
        original.event_timestamp.seconds = 1_800_000_123
        assert patched == original


def test_square_points_cover_about_44000_level_13_cells_around_jakarta() -> None:
    import numpy as np

    from job.functions import s2

    lat, lng = square_points(np.random.default_rng(1), 400_000)
    half_lat, half_lng = 127 / 111.195, 127 / (111.195 * 0.99413)  # cos(6.2088 deg)
    assert -6.2088 - half_lat < lat.min() < -6.2088 - half_lat + 0.01
    assert -6.2088 + half_lat - 0.01 < lat.max() < -6.2088 + half_lat
    assert lng.min() > 106.8456 - half_lng and lng.max() < 106.8456 + half_lng
    assert 42_000 < len(np.unique(s2.latlng_to_cell_id(lat, lng, 13))) < 46_000


def test_expected_drivers_counts_distinct_drivers_per_cell_and_window() -> None:
    base = 1_772_438_400_000_000  # 2026-03-02T08:00:00Z, a minute boundary
    table = pa.table(
        {
            "driver_id": ["D1", "D1", "D2", "D3", "D1"],
            "lat": [-6.2, -6.2, -6.2, -6.9, -6.2],
            "long": [106.8, 106.8, 106.8, 107.3, 106.8],
            "event_timestamp": pa.array(
                [base, base + 1, base + 59_999_999, base + 5, base + 60_000_000], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    end = base // 1_000_000 + 60
    assert expected_drivers(table) == {
        (end, _signed(-6.2, 106.8)): (2,),
        (end, _signed(-6.9, 107.3)): (1,),
        (end + 60, _signed(-6.2, 106.8)): (1,),
    }


def test_p95_is_the_nearest_rank_with_the_rank_error_of_percentile_approx() -> None:
    import numpy as np

    p = _p95(np.arange(1.0, 101.0))
    assert (p.value, p.lo, p.hi) == (95.0, 94.0, 96.0)
    assert p == 96.0 and p == 94.0 and p != 97.0
    assert Approx(1.0, 1.0, 1.0) != "1.0"


def test_expected_pass_through_keeps_5xx_and_slow_requests_one_point_per_tags_and_time() -> None:
    ts = pa.array([1, 2, 2, 3], pa.timestamp("us", tz="UTC"))
    table = pa.table(
        {
            "service": ["a", "a", "a", "b"],
            "path": ["/x", "/x", "/x", "/y"],
            "status_code": pa.array([500, 200, 200, 404], pa.int32()),
            "latency_ms": [1.0, 300.0, 400.0, 10.0],
            "event_timestamp": ts,
        }
    )
    assert expected_pass_through(table) == {(1, "a", "/x", "500"): (1.0,), (2, "a", "/x", "200"): (400.0,)}


def test_compare_reports_equal_missing_extra_and_wrong() -> None:
    w = WORKLOADS["a"]
    expected = {(60, "1"): (2,), (60, "2"): (1,), (120, "1"): (3,)}
    assert compare(expected, dict(expected), w) == "equal (3 points)"
    got = {(60, "1"): (2,), (60, "2"): (5,), (180, "9"): (1,)}
    text = compare(expected, got, w)
    assert text.startswith("DIFFERENT: 1 missing, 1 extra, 1 wrong of 3")
    assert compare(expected, got, w, only_windows={60}).startswith(
        "DIFFERENT: 0 missing, 0 extra, 1 wrong of 2"
    )
    ranged = {(60, "/a", "200"): (10, Approx(5.0, 4.0, 6.0))}
    assert compare(ranged, {(60, "/a", "200"): (10, 4.5)}, WORKLOADS["b"]) == "equal (1 points)"


def test_tree_sampler_sees_a_child_and_its_cpu() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<120: pass"]
    )
    try:
        sampler = TreeSampler(os.getpid(), interval_s=0.1).start()
        deadline = (
            time.monotonic() + 60
        )  # five samples: about 0.5 s, but a sample is slower on a busy machine
        while len(sampler.samples) < 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        sampler.stop()
        pids = {p.pid for p in tree(os.getpid())}
        assert child.pid in pids
        me = read_proc(os.getpid())
        assert me is not None and me.rss > 0 and role(me, os.getpid()) == "driver-python"
        kid = read_proc(child.pid)
        assert kid is not None and role(kid, os.getpid()) == "worker"
        first, last = sampler.samples[0], sampler.samples[-1]
        used = last.cpu_s - first.cpu_s  # the child spins; how much CPU it gets depends on the machine's load
        assert 0 < used <= (last.t - first.t) * os.cpu_count() + 0.05
        assert sampler.cpu_cores(first.t, last.t) == pytest.approx(used / (last.t - first.t))
        assert sampler.peak_rss(("driver-python",)) >= me.rss // 2
        # PSS is read in every 4th sample (the first among them): at most the RSS, and more than nothing
        assert [s.pss is not None for s in sampler.samples[:5]] == [True, False, False, False, True]
        assert 0 < sampler.peak_pss(("driver-python",)) <= sampler.peak_rss(("driver-python",))
    finally:
        child.kill()
        child.wait(10)


def test_the_bench_spec_parses_and_says_whether_windows_close_promptly(tmp_path: Path) -> None:
    from bench.run import Stack, write_spec
    from job.spec import parse_spec

    stack = Stack(
        tmp_path, SimpleNamespace(bootstrap="127.0.0.1:1"), SimpleNamespace(url="http://127.0.0.1:2")
    )
    for promptly in (True, False):
        path = write_spec(
            WORKLOADS["a"],
            stack,
            "t",
            tmp_path,
            runner="engine",
            trigger_s=1.0,
            max_records=None,
            tag=f"x{promptly}",
            close_promptly=promptly,
        )
        spec = parse_spec(path.read_text(), str(path))
        assert spec.close_windows_promptly is promptly and spec.trigger_interval_s == 1.0


def test_a_live_line_says_the_pss_when_the_run_read_it() -> None:
    from bench.report import live_line
    from bench.run import LiveResult

    live = LiveResult(rate=100_000.0, seconds=150, driver_peak_mb=1424.0, worker_peak_mb=1364.0)
    assert "driver 1424 MB, workers 1364 MB (growth" in live_line(live)
    live.driver_peak_pss_mb, live.worker_peak_pss_mb = 1390.0, 612.0
    assert "driver 1424 MB, workers 1364 MB (PSS: driver 1390, workers 612 MB) (growth" in live_line(live)


def test_steal_is_the_hypervisors_share_of_proc_stat_in_seconds() -> None:
    from bench.procstats import steal_s

    jiffies = int(
        Path("/proc/stat").read_text().split()[8]
    )  # cpu user nice system idle iowait irq softirq steal
    before = steal_s()
    assert before == pytest.approx(jiffies / os.sysconf("SC_CLK_TCK"), abs=1.0)
    assert steal_s() >= before


def test_a_live_run_gives_its_cpu_an_event_over_the_whole_feed_and_its_second_half() -> None:
    from bench.report import live_line, summary_lines
    from bench.run import summarize

    lives = {
        f"engine{n}": {"input_rows_per_s": 100_000.0, "job_cores": cores, "job_cores_second_half": half}
        for n, cores, half in (("", 0.74, 0.52), ("_2", 0.77, 0.50), ("_3", 0.70, 0.55))
    }
    lines = summary_lines(summarize({"lives": lives}))
    assert lines[0].startswith("engine live, 3 runs: ")
    assert "CPU µs/event median 7.40 worst 7.70; the feed's second half median 5.20 worst 5.50" in lines[0]
    line = live_line({**_live_dict(), "job_cores": 0.74, "job_cores_second_half": 0.52})
    assert "CPU 0.74 cores (second half of the feed: 0.52) (+broker" in line


def _live_dict() -> dict[str, object]:
    from bench.run import LiveResult

    return dict(LiveResult(rate=100_000.0, seconds=150).__dict__)
