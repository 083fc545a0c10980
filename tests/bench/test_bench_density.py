"""Unit tests of the density benchmark's pure parts: its specs, delays, memory slope and process forest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.bench_density import (
    HEAVY_QUERIES,
    KINDS,
    LIGHT_QUERIES,
    Step,
    delays_of,
    make_daggers,
    marginal_line,
    marginal_mb,
    missing_windows,
    slices_of,
    slices_table,
    unseen_points,
)
from bench.procstats import forest
from job.query.plan import plan
from job.spec import load_spec


def test_every_kind_plans_with_its_isolation_and_a_measurement_the_poll_finds(tmp_path: Path) -> None:
    stack = SimpleNamespace(bootstrap="127.0.0.1:1", url="http://127.0.0.1:2")
    daggers = make_daggers(tmp_path, 5, True, "light", "heavy", stack, "dedicated")
    assert [(d.name, d.kind, d.heavy) for d in daggers] == [
        ("l000-s2distinct", "s2distinct", False),
        ("l001-hop", "hop", False),
        ("l002-join", "join", False),
        ("l003-pass", "pass", False),
        ("l004-s2distinct", "s2distinct", False),
        ("heavy-s2distinct", "s2distinct", True),
    ]
    queries = [(re.compile(regex.strip("/")), bucket) for regex, bucket in LIGHT_QUERIES + HEAVY_QUERIES]
    heavy_regex = re.compile(HEAVY_QUERIES[0][0].strip("/"))
    for d in daggers:
        buckets = [bucket for regex, bucket in queries if regex.match(d.name)]
        assert buckets == ["60s" if KINDS[d.kind][2] else "1s"], d.name  # one query counts it, by its kind
        assert bool(heavy_regex.match(d.name)) == d.heavy  # the heavy one alone is polled less often
        spec = load_spec(d.spec)
        p = plan(spec, tmp_path / "state")
        assert (spec.isolation, p.checkpoint, spec.sinks[0].measurement) == (
            "dedicated",
            d.checkpoint,
            d.name,
        )
        assert [s.topics for s in spec.streams] == [["heavy" if d.heavy else "light"]] * len(KINDS[d.kind][1])


def test_s2filter_daggers_are_different_queries_that_the_poll_finds(tmp_path: Path) -> None:
    stack = SimpleNamespace(bootstrap="127.0.0.1:1", url="http://127.0.0.1:2")
    daggers = make_daggers(tmp_path, 3, False, "light", "heavy", stack, "fused", kinds=["s2filter"])
    light = re.compile(LIGHT_QUERIES[0][0].strip("/"))
    wheres = []
    for d in daggers:
        assert light.match(d.name), d.name
        spec = load_spec(d.spec)
        wheres.append(re.search(r"WHERE speed_kmh >= (\d+)", spec.sql).group(1))  # type: ignore[union-attr]
        plan(spec, tmp_path / "state")  # it translates
    assert wheres == ["0", "1", "2"]


def test_delays_count_each_point_from_the_event_that_made_it_final(tmp_path: Path) -> None:
    stack = SimpleNamespace(bootstrap="127.0.0.1:1", url="http://127.0.0.1:2")
    s2, _hop, join, passing = make_daggers(tmp_path, 4, False, "light", "heavy", stack, "shared")
    sent_at = {1000 + k: 5000.0 + k for k in range(200)}  # the feeder sent second 1000 + k at 5000 + k
    arrivals = {
        (s2.name, 1020): [(5032.0, 3), (5033.5, 5)],  # window ending 1020: final once second 1030 was sent
        (s2.name, 960): [(4990.0, 7)],  # a warm-up window, before the feed started: left out
        (s2.name, 1200): [(5300.0, 1)],  # its watermark second was never sent: left out
        (passing.name, 1005): [(5006.5, 2)],  # a pass-through row of second 1005 (sent at 5005)
        (join.name, 1020): [(5045.0, 2)],  # the 10-s interval join: final once second 1040 was sent
        ("someone-else", 1020): [(5031.0, 1)],
    }
    delays = delays_of(arrivals, sent_at, 1000.0, [s2, join, passing])
    assert delays == {s2.name: [2.0, 2.0, 2.0, 3.5, 3.5], join.name: [5.0, 5.0], passing.name: [1.5, 1.5]}


def test_missing_windows_are_those_the_feed_closed_without_points(tmp_path: Path) -> None:
    stack = SimpleNamespace(bootstrap="127.0.0.1:1", url="http://127.0.0.1:2")
    a, b, join = make_daggers(tmp_path, 3, False, "light", "heavy", stack, "shared")
    sent_at = {
        s: float(s) for s in range(1000, 1150)
    }  # windows ending 1020, 1080, 1140: only 1140's stays open
    arrivals = {
        (a.name, 1020): [(1031.0, 4)],
        (a.name, 1080): [(1091.0, 4)],
        (b.name, 1080): [(1092.0, 1)],
        (join.name, 1020): [(1041.0, 1)],
    }
    assert missing_windows(arrivals, sent_at, 1000.0, [a, b]) == 1  # b's window ending 1020
    # the join's window ending 1080 closes once second 1100 is sent: it is missing only then
    assert missing_windows(arrivals, {s: t for s, t in sent_at.items() if s < 1100}, 1000.0, [join]) == 0
    assert missing_windows(arrivals, sent_at, 1000.0, [join]) == 1
    # InfluxDB, asked at the end, has b's window ending 1020: the watch missed it, it is not missing
    assert missing_windows(arrivals, sent_at, 1000.0, [a, b], {(b.name, 1020): 3}) == 0


def test_unseen_points_are_what_influxdb_holds_beyond_the_watch() -> None:
    arrivals = {("l0-pass", 1000): [(1001.0, 40), (1001.5, 50)], ("l1-hop", 960): [(1010.0, 2)]}
    in_influx = {("l0-pass", 1000): 50, ("l0-pass", 1001): 48, ("l1-hop", 960): 2, ("l2-join", 960): 1}
    assert unseen_points(arrivals, in_influx, 900) == 48 + 1
    assert unseen_points(arrivals, {("l0-pass", 1000): 45}, 900) == 0  # the watch saw more than was asked for
    # buckets before the watch started (at 990) held points written before it: they are not unseen
    assert unseen_points(arrivals, {**in_influx, ("heavy", 900): 46_000, ("l3-pass", 989): 7}, 990) == 48


def test_marginal_memory_is_the_slope_over_n() -> None:
    steps = [Step("shared", n, ran=True, rss_mb=2000 + 30 * n) for n in (1, 10, 50)]
    steps += [Step("dedicated", 1, ran=True, rss_mb=1500), Step("dedicated", 10, ran=False)]
    assert marginal_mb(steps, "shared") == pytest.approx(30.0)
    assert marginal_mb(steps, "dedicated") is None
    assert marginal_mb(
        [Step("shared", 1, ran=True, rss_mb=2293), Step("shared", 5, ran=True, rss_mb=2859)], "shared"
    ) == pytest.approx(141.5)


def test_the_report_names_every_modes_slope_fused_included() -> None:
    steps = [Step("fused", n, ran=True, rss_mb=3000 + 4 * n, pss_mb=2000 + 2 * n) for n in (1, 100)]
    steps += [Step("shared", n, ran=True, rss_mb=2500 + 130 * n, pss_mb=1800 + 44 * n) for n in (1, 10)]
    steps += [Step("dedicated", 1, ran=True, rss_mb=4000, pss_mb=2600)]
    assert marginal_line(steps) == "fused 4 MB / 2 MB, shared 130 MB / 44 MB, dedicated - / -"
    assert marginal_line(steps[:2]) == "fused 4 MB / 2 MB"


def test_forest_reads_several_trees_at_once() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        trees = forest([os.getpid(), child.pid, 2**22 + 1])
        assert child.pid in {p.pid for p in trees[os.getpid()]}
        assert [p.pid for p in trees[child.pid]] == [child.pid]
        assert trees[2**22 + 1] == []
    finally:
        child.kill()
        child.wait(10)


def test_light_daggers_take_their_own_parallelism_trigger_and_settings(tmp_path: Path) -> None:
    stack = SimpleNamespace(bootstrap="127.0.0.1:1", url="http://127.0.0.1:2")
    daggers = make_daggers(
        tmp_path,
        1,
        True,
        "light",
        "heavy",
        stack,
        "shared",
        light_parallelism=1,
        trigger_s=2.0,
        light_conf={"spark.sql.codegen.wholeStage": "false"},
        light_settings={"read_at_window_close": "true"},
    )
    light, heavy = (load_spec(d.spec) for d in daggers)
    assert (light.parallelism, light.trigger_interval_s, light.read_at_window_close) == (1, 2.0, True)
    assert light.spark_conf == {"spark.sql.codegen.wholeStage": "false"}
    assert (heavy.parallelism, heavy.trigger_interval_s, heavy.read_at_window_close, heavy.spark_conf) == (
        2,
        2.0,
        False,
        {},
    )
    assert plan(light, tmp_path / "state").streams[0].source.read_at_close is True


def test_cpu_by_process_kind_counts_what_each_process_used_within_the_span() -> None:
    from bench.bench_density import Sampler

    burner = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.time()\nwhile time.time() - t < 3: pass"]
    )
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    busy, idle = Sampler([burner.pid]), Sampler([sleeper.pid])
    try:
        time.sleep(0.3)  # the interpreters' start-up is before the span
        for sampler in (busy, idle):
            sampler.sample()
        time.sleep(1.5)
        for sampler in (busy, idle):
            sampler.sample()
    finally:
        for proc in (burner, sleeper):
            proc.kill()
            proc.wait(10)
    # a spinning process uses up to a core (less on a busy machine); a sleeping one next to nothing
    assert list(busy.cores_by_kind()) == ["driver"] and 0.1 < busy.cores_by_kind()["driver"] <= 1.05
    assert idle.cores_by_kind()["driver"] < 0.05


def test_a_long_run_is_reported_in_slices_of_the_measured_span(tmp_path: Path) -> None:
    from bench.bench_density import Sampler

    stack = SimpleNamespace(bootstrap="127.0.0.1:1", url="http://127.0.0.1:2")
    s2, *_, heavy = make_daggers(tmp_path, 2, True, "light", "heavy", stack, "shared")
    sent_at = {1000 + k: 5000.0 + k for k in range(240)}  # the feed from second 1000, sent at 5000 on
    arrivals = {
        (s2.name, 1020): [(5032.0, 2)],  # final with second 1030 (first slice): 2 s late
        (s2.name, 1080): [(5094.0, 1)],  # final with second 1090 (first slice): 4 s late
        (s2.name, 1140): [(5160.0, 4)],  # final with second 1150 (second slice): 10 s late
        (heavy.name, 1140): [(5152.0, 3)],  # 2 s late
    }
    sampler = Sampler([])
    sampler.pss = [
        (5010.0, {"jvm": 2**30}, {}),
        (5090.0, {"jvm": 2**31, "python-workers": 2**30}, {}),
        (5130.0, {"jvm": 2**31}, {}),
    ]
    sampler.samples = [
        (5000.0, {}, 100.0, 1),
        (5100.0, {}, 150.0, 1),
        (5120.0, {}, 160.0, 1),
        (5200.0, {}, 200.0, 1),
    ]
    rows = [(5000.0, 0), (5100.0, 1_000_000), (5120.0, 1_100_000), (5200.0, 5_100_000)]
    got = slices_of(
        sampler, arrivals, (sent_at, 1000.0), (sent_at, 1000.0), (5000.0, 5200.0), 120, [s2, heavy], rows
    )
    # the span 5000..5200: one slice of 120 s and the last of 80 s (more than half a slice)
    assert got == [
        {
            "from_s": 0,
            "to_s": 120,
            "light_points": 3,
            "light_p99_median_s": 4.0,
            "light_p99_max_s": 4.0,
            "heavy_p99_s": None,
            "heavy_events_s": 9_167,
            "pss_mb": 2048,
            "pss_by_kind_mb": {"jvm": 1536, "python-workers": 512},
            "cores": 0.5,
        },
        {
            "from_s": 120,
            "to_s": 200,
            "light_points": 4,
            "light_p99_median_s": 10.0,
            "light_p99_max_s": 10.0,
            "heavy_p99_s": 2.0,
            "heavy_events_s": 50_000,
            "pss_mb": 2048,
            "pss_by_kind_mb": {"jvm": 2048},
            "cores": 0.5,
        },
    ]
    assert slices_of(sampler, arrivals, (sent_at, 1000.0), None, (5000.0, 5050.0), 120, [s2], rows) == []
    step = Step("fused", 2, slices=got)
    table = slices_table(step)
    assert "| 0 → 120 | 4.0 / 4.0 | 3 | - | 9,167 | 2,048 | 0.50 |" in table
    # where the memory is, slice by slice (a kind absent from a slice is a dash)
    assert "| from → to (s) | PSS jvm (MB) | PSS python-workers (MB) |" in table
    assert "| 0 → 120 | 1,536 | 512 |" in table and "| 120 → 200 | 2,048 | - |" in table


def test_a_slice_says_what_the_broker_and_the_heavy_daggers_batches_took() -> None:
    from bench.bench_density import Sampler, Traces

    traces = Traces(broker=[(5000.0, 10.0, 900.0), (5100.0, 60.0, 1100.0), (5200.0, 140.0, 1300.0)])
    batch = {
        "last_input_rows": 100_000,
        "batch_duration_ms": 2000,
        "batch_phases_ms": {"latestOffset": 40, "addBatch": 1800, "walCommit": 60},
    }
    for now, batch_id, rows, ms in (
        (5010.0, 7, 100_000, 2000),
        (5011.0, 7, 100_000, 2000),  # seen twice: once
        (5050.0, 8, 300_000, 4000),
        (5130.0, 9, 0, 300),
        (5150.0, 10, 50_000, 1000),
    ):
        traces.note_heavy(
            {**batch, "last_batch_id": batch_id, "last_input_rows": rows, "batch_duration_ms": ms}, now
        )
    traces.note_heavy({}, 5160.0)  # no batch yet
    sampler = Sampler([])
    got = slices_of(sampler, {}, ({}, 1000.0), None, (5000.0, 5200.0), 100, [], [], traces)
    # (the batch with no rows, a no-data batch, is not a heavy batch)
    assert [{k: v for k, v in c.items() if k.startswith(("broker", "heavy"))} for c in got] == [
        {
            "broker_cores": 0.5,
            "broker_rss_mb": 1000,
            "heavy_batch_ms": 3000,
            "heavy_rows_per_batch": 200_000,
            "heavy_phases_ms": {
                "latestOffset": 40,
                "queryPlanning": 0,
                "addBatch": 1800,
                "walCommit": 60,
                "commitOffsets": 0,
            },
        },
        {
            "broker_cores": 0.8,
            "broker_rss_mb": 1200,
            "heavy_batch_ms": 1000,
            "heavy_rows_per_batch": 50_000,
            "heavy_phases_ms": {
                "latestOffset": 40,
                "queryPlanning": 0,
                "addBatch": 1800,
                "walCommit": 60,
                "commitOffsets": 0,
            },
        },
    ]
    table = slices_table(Step("fused", 2, slices=got))
    assert "| 0 → 100 | 0.50 | 1,000 | 3,000 / 200,000 | 40 | 0 | 1,800 | 60 | 0 |" in table
    assert "| 100 → 200 | 0.80 | 1,200 | 1,000 / 50,000 |" in table


def test_a_run_of_one_step_in_slices_is_plotted_over_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bench import bench_density

    slices = [
        {
            "from_s": 0,
            "to_s": 600,
            "light_points": 9,
            "light_p99_median_s": 6.1,
            "light_p99_max_s": 7.8,
            "heavy_p99_s": 7.7,
            "heavy_events_s": 50_140,
            "pss_mb": 2474,
            "cores": 0.95,
        },
        {
            "from_s": 600,
            "to_s": 1200,
            "light_points": 9,
            "light_p99_median_s": 6.0,
            "light_p99_max_s": 7.4,
            "heavy_p99_s": None,
            "heavy_events_s": None,
            "pss_mb": 2723,
            "cores": 0.83,
        },
    ]
    drawn: list[str] = []
    original = bench_density.plot_slices
    monkeypatch.setattr(
        bench_density, "plot_slices", lambda step, path: (drawn.append(step.mode), original(step, path))
    )
    bench_density.plot([Step("fused", 100, ran=True, slices=slices)], tmp_path / "over-time.png")
    bench_density.plot(
        [Step("fused", 10, ran=True), Step("fused", 100, ran=True, slices=slices)], tmp_path / "over-n.png"
    )
    assert drawn == ["fused"]  # only the run of one step; both pictures were drawn
    assert (tmp_path / "over-time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "over-n.png").stat().st_size > 1000


def test_a_fork_servers_children_count_by_their_name_not_the_servers_command_line() -> None:
    from bench.bench_density import Sampler
    from bench.procstats import ProcInfo

    def proc(pid: int, comm: str, cmdline: str) -> ProcInfo:
        return ProcInfo(pid=pid, ppid=1, comm=comm, cmdline=cmdline, rss=0, cpu_s=0.0)

    server = "/venv/bin/python -m job.shared.forkserver /tmp/daggers-fork-x/sock"
    got = {
        name: Sampler.kind(proc(pid, comm, cmd), root=1)
        for pid, name, comm, cmd in [
            (1, "driver", "python3", "/venv/bin/python -m job.shared.host /tmp/h"),
            (2, "server", "python3", server),
            (3, "runner", "python-runner", server),
            (4, "daemon", "python-daemon", server),
            (5, "udf daemon", "python-workers", server),
            (6, "plain worker daemon", "python3", "/venv/bin/python -m pyspark.daemon pyspark.worker"),
            (
                7,
                "plain runner",
                "python3",
                "/venv/bin/python -m pyspark.sql.streaming.python_streaming_source_runner",
            ),
            (8, "jvm", "java", "/usr/bin/java -cp x org.apache.spark.deploy.SparkSubmit"),
        ]
    }
    assert got == {
        "driver": "driver",
        "server": "fork-server",
        "runner": "source-runner",
        "daemon": "python-workers",
        "udf daemon": "python-workers",
        "plain worker daemon": "python-workers",
        "plain runner": "source-runner",
        "jvm": "jvm",
    }


def test_trim_s_too_short_for_a_window_read_at_its_close_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from bench.bench_density import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--trim-s", "20"])
    assert (
        "--trim-s 20: under 120 s it deletes records the light daggers have not read yet"
        in capsys.readouterr().err
    )
    assert parse_args(["--trim-s", "180", "--broker", "noida"]).trim_s == 180


def test_runs_are_summarised_by_their_median_and_worst() -> None:
    """--runs 3: the issue's heavy p99 of 83.0 s in one run of three shows as the worst, beside the median."""
    from bench.bench_density import Step, runs_summary

    steps = [
        Step(
            "fused",
            100,
            ran=True,
            run=i + 1,
            light_p99_max_s=light,
            heavy_p99_s=heavy,
            heavy_rate=rate,
            pss_mb=pss,
        )
        for i, (light, heavy, rate, pss) in enumerate(
            [(6.8, 83.0, 73_333.0, 3_843.0), (5.7, 3.7, 50_267.0, 2_314.0), (5.9, 4.1, 50_001.0, 2_401.0)]
        )
    ]
    steps.append(Step("fused", 10, ran=True, light_p99_max_s=3.0, heavy_p99_s=2.0))  # one run: no summary
    assert runs_summary(steps) == [
        "fused N=100, 3 runs: light p99 max median 5.9 worst 6.8; heavy p99 median 4.1 "
        "worst 83.0; heavy events/s median 50,267.0 worst 50,001.0; PSS MB median 2,401.0 "
        "worst 3,843.0"
    ]
