"""Benchmark Daggers end to end (broker → Spark → InfluxDB) against its Python peers, on this machine.

Usage::

    python bench/run.py [--workload a|b|c|all] [--events N] [--rate R] [--seconds S] [--cores 1|2]
                        [--broker tansu|noida] [--peers loop,sparkudf,quix|none] [--no-components]
                        [--record]

What one run does (everything on 127.0.0.1, ports from the OS, all in a temporary folder):

1. starts its own broker (tansu by default) and InfluxDB;
2. per workload, **pre-loaded**: produces ``--events`` events (plus a few closing events that move
   every watermark past the last window), runs the dagger with ``python -m job.cli run`` as a
   subprocess and measures, from the first micro-batch until the last expected point is in InfluxDB:
   events/s, the driver's (Python + JVM) and the Python workers' peak memory, CPU cores used (the
   job's process tree, and the broker and InfluxDB apart), read from ``/proc``. The points are read
   back and checked equal to results computed independently (numpy S2, pyarrow group-bys);
3. workload (a) only: runs the **peers** over the same topic — a hand-written confluent-kafka +
   protobuf + s2sphere loop, a PySpark job with a per-row Python UDF, and Quix Streams (in its own
   virtualenv, see ``bench/setup_quix.sh``) — each writing its own measurement; their points are
   checked equal to the engine's for every window they completed, and the ratios printed. A peer
   that does not finish within ``--peer-timeout`` seconds is stopped and its rate taken over what it
   processed;
4. workload (a) with ``--rate R``: a **live** run: the dagger is started on an empty topic and
   ``bench/feeder.py`` streams R pings/s for ``--seconds`` with event time = wall time; the delay
   from each window's watermark (the moment the event that moves it past the window's end was sent)
   to its points being visible in InfluxDB (polled), p50 and p99 over points, and memory over time;
5. the **components** of workload (a) alone (``bench/components.py``).

With ``--runs N`` steps 2 and 3 are made in N rounds, each the engine's run(s) then every peer's run
(labels ``engine``, ``loop``, ..., then ``engine_2``, ``loop_2``, ...; each run its own measurement,
progress file, log and state), and the live run N times; the median and the worst of each runner are
printed, and Daggers against each peer as the ratio of their medians.

The table is printed; ``bench/results/<UTC time>.json`` keeps every figure; ``--record`` appends a
section to bench/results/history.md and writes plots to ``bench/results/plots/``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import influx_read, verdict  # noqa: E402
from bench.peers.progress import read_progress  # noqa: E402
from bench.procstats import TreeSampler, load_average  # noqa: E402
from bench.workloads import (  # noqa: E402
    BENCH_START,
    WATERMARK_DELAY_MS,
    WINDOW_S,
    WORKLOADS,
    Points,
    Workload,
    closers,
    data_end,
)

PYTHON = sys.executable
QUIX_PYTHON = (
    Path(os.environ.get("DAGGERS_BENCH_QUIX_VENV", Path.home() / ".cache/daggers-bench/quix-venv"))
    / "bin/python"
)
DB = "bench"
PEERS = ("loop", "sparkudf", "quix")
WARMUP_EVENTS = 2_000
PEER_TITLES = {
    "engine": "Daggers (job.cli run)",
    "loop": "hand-written loop (confluent-kafka + s2sphere)",
    "sparkudf": "PySpark, per-row Python UDF",
    "quix": "Quix Streams 3 (group_by + tumbling window)",
    "flink-udf": "Flink SQL 2.3, S2 cell from a PyFlink Python UDF (reads local CSV files)",
    "flink-builtin": "Flink SQL 2.3, built-in key FLOOR(lat*100), FLOOR(long*100) (reads local CSV files)",
    "engine-builtin": "Daggers (job.cli run), the same built-in key as flink-builtin",
}


# --------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    """The broker and InfluxDB this run started."""

    root: Path
    broker: Any
    influx: Any

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def url(self) -> str:
        return self.influx.url

    def pids(self) -> dict[str, int]:
        return {"broker": self.broker.process.pid, "influxdb": self.influx.process.pid}


@contextlib.contextmanager
def local_stack(root: Path, broker_kind: str) -> Iterator[Stack]:
    """Start a broker and InfluxDB on OS-chosen ports under ``root``; stop both on exit."""
    from job.stack import InfluxServer, free_ports, make_broker

    kafka_port, influx_port, bind_port = free_ports(3)
    broker = make_broker(broker_kind, root / "broker", kafka_port)  # type: ignore[arg-type]
    influx = InfluxServer(root / "influx", influx_port, bind_port)
    for proc in (broker.process, influx.process):
        proc.die_with_parent = True
    broker.start()
    try:
        influx.start()
        try:
            influx.create_database(DB)
            yield Stack(root, broker, influx)
        finally:
            influx.stop()
    finally:
        broker.stop()


# --------------------------------------------------------------------------- subprocesses


_CHILDREN: list[subprocess.Popen[bytes]] = []


def spawn(
    argv: list[str], log: Path, *, cores: int | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own process group, output to ``log``; pinned to ``cores`` CPUs when given."""

    def pin() -> None:
        os.setpgrp()
        if cores is not None and cores < (os.cpu_count() or 1):
            os.sched_setaffinity(0, set(range(cores)))

    fh = log.open("wb")
    proc = subprocess.Popen(
        argv,
        stdout=fh,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        preexec_fn=pin,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    _CHILDREN.append(proc)
    return proc


def stop(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    """SIGTERM the process (graceful stop), then SIGKILL its whole group after ``timeout`` seconds."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def stop_all() -> None:
    """Stop every child this run started that is still there."""
    for proc in _CHILDREN:
        stop(proc, timeout=10)


def tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


# --------------------------------------------------------------------------- specs and data


def write_spec(
    w: Workload,
    stack: Stack,
    topic: str,
    folder: Path,
    *,
    runner: str,
    trigger_s: float,
    max_records: int | None,
    tag: str,
    spark_conf: list[str] | None = None,
    close_promptly: bool = True,
) -> Path:
    """Write the dagger spec of ``w`` over ``topic`` (sink: ``<measurement>_<runner>``); return its path.

    ``spark_conf`` holds ``KEY=VALUE`` Spark settings for the spec's ``spark_conf``; ``close_promptly`` is
    the spec's ``close_windows_promptly``."""
    sql = "\n".join("  " + line for line in w.sql.splitlines())
    items = [item.split("=", 1) for item in spark_conf or []]
    conf = {k: v for k, v in items if not k.startswith(SPEC_PREFIXES)}
    spec_lines = {k: v for k, v in items if k.startswith(SPEC_PREFIXES)}
    conf_block = "spark_conf:\n" + "".join(f"  {k}: '{v}'\n" for k, v in conf.items()) if conf else ""
    checkpoint = folder / f"checkpoint-{w.key}-{runner}-{tag}"
    max_records_line = "" if max_records is None else f"    max_records_per_batch: {max_records}\n"
    text = f"""name: {w.name}
streams:
  - table: data_stream
    topics: [{topic}]
    proto_class: {w.proto_class}
    timestamp_field: event_timestamp
    bootstrap_servers: {stack.bootstrap}
    group: {w.name}
    start_from: earliest
{max_records_line}sql: |
{sql}
watermark_delay_ms: {WATERMARK_DELAY_MS}
parallelism: 2
checkpoint_dir: {checkpoint}
trigger_interval_s: {trigger_s}
close_windows_promptly: {str(close_promptly).lower()}
{conf_block}sink:
  type: influx
  url: {stack.url}
  database: {DB}
  measurement: {w.measurement_for(runner)}
"""
    for key, value in spec_lines.items():
        text = _spec_line(text, key, value)
    path = folder / f"{w.key}-{runner}-{tag}.yaml"
    path.write_text(text)
    return path


#: A run's setting (``--variant``, ``--baseline-conf``) that is a line of the spec, not a Spark setting:
#: ``spec.KEY=VALUE`` a top-level field (e.g. ``spec.trigger_interval_s=2``), ``stream.KEY=VALUE`` a field of
#: the stream (e.g. ``stream.max_records_per_batch=500000``).
SPEC_PREFIXES = ("spec.", "stream.")


def _spec_line(text: str, key: str, value: str) -> str:
    """Return the spec ``text`` with the field ``key`` (``spec.NAME`` or ``stream.NAME``) set to ``value``."""
    scope, _, name = key.partition(".")
    indent = "" if scope == "spec" else "    "
    lines = text.splitlines()
    line = f"{indent}{name}: {value}"
    for i, old in enumerate(lines):
        if old.startswith(f"{indent}{name}:"):
            lines[i] = line
            return "\n".join(lines) + "\n"
    anchor = "sink:" if scope == "spec" else "    start_from: earliest"
    at = lines.index(anchor) + (0 if scope == "spec" else 1)
    lines.insert(at, line)
    return "\n".join(lines) + "\n"


@dataclass
class Loaded:
    """A pre-loaded topic and what the dagger must produce from it."""

    topic: str
    events: int
    total: int  # events + closers
    expected: Points
    produce_s: float


def preload(w: Workload, stack: Stack, events: int, seed: int, partitions: int) -> Loaded:
    """Generate ``events`` events (+ closers), produce them to a new topic, compute the expected points."""
    from job.produce import produce

    topic = f"bench-{w.key}-{int(time.time())}"
    density = w.default_density
    chunk = 500_000
    t = time.time()
    batches = []
    for i, lo in enumerate(range(0, events, chunk)):
        n = min(chunk, events - lo)
        start = BENCH_START + timedelta(seconds=lo / density)
        batches.append(w.make(n, 1000 + i, start, density))
    import pyarrow as pa

    expected = w.expected(pa.concat_tables([b.table for b in batches]))
    closing = closers(w, data_end(BENCH_START, events, density), seed)
    if closing is not None:
        batches.append(closing)
    gen_s = time.time() - t
    t = time.time()
    report = produce(stack.bootstrap, topic, iter(batches), partitions=partitions, progress=False)
    produce_s = time.time() - t
    print(
        f"  pre-loaded {report.count:,} events into {topic} (generated in {gen_s:.1f} s, produced in "
        f"{produce_s:.1f} s); expecting {len(expected):,} points",
        flush=True,
    )
    return Loaded(topic, events, report.count, expected, produce_s)


# --------------------------------------------------------------------------- measuring a run


@dataclass
class RunResult:
    """What one runner (the engine or a peer) did over a pre-loaded topic."""

    runner: str
    events: int = 0
    seconds: float = 0.0
    events_per_s: float = 0.0
    steady_events_per_s: float = 0.0  # the engine, after its first micro-batch (warm-up) ended
    startup_s: float = 0.0
    complete: bool = False
    check: str = ""
    driver_peak_mb: float = 0.0
    worker_peak_mb: float = 0.0
    job_cores: float = 0.0
    cpu_us_per_event: float = 0.0  # CPU time of the job's process tree per event: less sensitive to load
    broker_cores: float = 0.0
    influx_cores: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    batches: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def _status(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _resources(res: RunResult, sampler: TreeSampler, t0: float, t1: float) -> None:
    res.driver_peak_mb = sampler.peak_rss(("driver-python", "jvm"), t0, t1) / 2**20
    res.worker_peak_mb = sampler.peak_rss(("worker",), t0, t1) / 2**20
    res.job_cores = sampler.cpu_cores(t0, t1)
    if res.events:
        res.cpu_us_per_event = res.job_cores * (t1 - t0) / res.events * 1e6
    res.broker_cores = sampler.extra_cores("broker", t0, t1)
    res.influx_cores = sampler.extra_cores("influxdb", t0, t1)


def pin_features(checkpoint: Path, features: dict[str, str] | None) -> None:
    """Start the checkpoint with these engine features pinned (job.query.plan.ENGINE_FEATURES for the rest), as a
    dagger started by an engine of that layout would have it: ``--baseline`` runs the engine as it was."""
    if not features:
        return
    from job.query.plan import ENGINE_FEATURES, PINNED_ENGINE

    checkpoint.mkdir(parents=True, exist_ok=True)
    (checkpoint / PINNED_ENGINE).write_text(json.dumps({**ENGINE_FEATURES, **features}))


def run_engine(
    w: Workload,
    stack: Stack,
    loaded: Loaded,
    folder: Path,
    args: argparse.Namespace,
    runner: str = "engine",
    features: dict[str, str] | None = None,
    conf: list[str] | None = None,
) -> RunResult:
    """Run the dagger over the pre-loaded topic until every expected point is in InfluxDB.

    ``runner`` names the run (its measurement, checkpoint and log: runs of one topic must not share them);
    ``features``: engine features pinned in its checkpoint (see :func:`pin_features`); ``conf``: Spark settings
    (``KEY=VALUE``) of this run, after ``--spark-conf``."""
    res = RunResult(runner, load_before=load_average())
    spec = write_spec(
        w,
        stack,
        loaded.topic,
        folder,
        runner=runner,
        trigger_s=args.trigger_s,
        max_records=args.max_records,
        tag="pre",
        spark_conf=[*args.spark_conf, *(conf or [])],
        close_promptly=not args.no_close_promptly,
    )
    pin_features(folder / f"checkpoint-{w.key}-{runner}-pre", features)
    status_path = folder / f"checkpoint-{w.key}-{runner}-pre" / "status.json"
    log = folder / f"{w.key}-{runner}.log"
    started = time.time()
    proc = spawn(
        [
            PYTHON,
            "-m",
            "job.cli",
            "run",
            str(spec),
            "--master",
            f"local[{args.slots}]",
            "--state-dir",
            str(folder / "state"),
        ],
        log,
        cores=args.cores,
    )
    sampler = TreeSampler(proc.pid, extra=stack.pids()).start()
    want = len(loaded.expected)
    first_start: float | None = None
    done_at: float | None = None
    seen_batches: set[int] = set()
    deadline = started + args.engine_timeout
    field_name = w.fields[0]
    last_count_at = 0.0
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
            st = _status(status_path)
            if st and st.get("last_batch_id", -1) not in seen_batches:
                seen_batches.add(st["last_batch_id"])
                res.batches.append(
                    {
                        k: st.get(k)
                        for k in (
                            "last_batch_id",
                            "last_input_rows",
                            "batch_duration_ms",
                            "updated_at",
                            "watermark",
                            "input_rows",
                        )
                    }
                )
                if first_start is None and st.get("input_rows"):
                    first_start = st["updated_at"] - st["batch_duration_ms"] / 1000
            written = sum(int(s.get("rows_written", 0)) for s in (st.get("sinks") or {}).values())
            if written >= want and time.time() - last_count_at > 0.5:
                last_count_at = time.time()
                if influx_read.count(stack.url, DB, w.measurement_for(runner), field_name) >= want:
                    done_at = min(time.time(), float(st["updated_at"]))
                    break
        if proc.poll() is not None:
            res.note = f"the job exited with {proc.returncode}: {tail(log)}"
    finally:
        sampler.stop()
        stop(proc)
    if first_start is None or done_at is None:
        res.note = res.note or f"did not finish within {args.engine_timeout:.0f} s: {tail(log, 5)}"
        res.check = "not finished"
        return res
    res.complete = True
    res.events = loaded.total
    res.seconds = done_at - first_start
    res.events_per_s = res.events / res.seconds
    res.startup_s = first_start - started
    first = next(b for b in res.batches if b.get("input_rows"))
    rest = res.events - int(first["input_rows"])
    # events/s after batch 1 only when later batches read more than the closing events: when everything
    # is in one batch the figure is meaningless
    if rest > loaded.total - loaded.events and done_at > first["updated_at"]:
        res.steady_events_per_s = rest / (done_at - first["updated_at"])
    _resources(res, sampler, first_start, done_at)
    res.load_after = load_average()
    got = influx_read.points(stack.url, DB, w.measurement_for(runner), w.fields, w.tags, w.time_epoch)
    res.check = compare(loaded.expected, got, w)
    return res


def compare(expected: Points, got: Points, w: Workload, only_windows: set[int] | None = None) -> str:
    """Return ``equal (N points)`` or what differs between ``expected`` and ``got``.

    ``only_windows`` limits the check to those window times (a peer that was stopped early).
    """
    if only_windows is not None:
        expected = {k: v for k, v in expected.items() if k[0] in only_windows}
        got = {k: v for k, v in got.items() if k[0] in only_windows}
    missing = expected.keys() - got.keys()
    extra = got.keys() - expected.keys()
    wrong = [k for k in expected.keys() & got.keys() if not _same(expected[k], got[k])]
    if not missing and not extra and not wrong:
        return f"equal ({len(expected):,} points)"
    sample = (list(wrong)[:1] or list(missing)[:1] or list(extra)[:1])[0]
    return (
        f"DIFFERENT: {len(missing):,} missing, {len(extra):,} extra, {len(wrong):,} wrong of {len(expected):,} "
        f"(e.g. {sample}: expected {expected.get(sample)}, got {got.get(sample)})"
    )


def _same(a: tuple, b: tuple) -> bool:
    """True when every value of ``a`` equals the one of ``b`` (floats to 1e-9, ranges by containment)."""
    return all(
        (x == y)
        or (
            isinstance(x, float)
            and isinstance(y, int | float)
            and abs(x - float(y)) <= 1e-9 * max(1.0, abs(x))
        )
        for x, y in zip(a, b, strict=True)
    )


# --------------------------------------------------------------------------- peers


def _topic_to_influx_argv(
    python: str,
    script: str,
    stack: Stack,
    loaded: Loaded,
    measurement: str,
    progress: Path,
    extra: list[str] | None = None,
) -> list[str]:
    """Return the command line of a peer in bench/peers/ that reads the pre-loaded topic itself and writes
    its windows to InfluxDB (the Python loop, Quix Streams): the options they share, then ``extra``."""
    return [
        python,
        str(ROOT / "bench/peers" / script),
        "--bootstrap",
        stack.bootstrap,
        "--topic",
        loaded.topic,
        "--influx",
        stack.url,
        "--db",
        DB,
        "--measurement",
        measurement,
        "--progress",
        str(progress),
        "--delay-ms",
        str(WATERMARK_DELAY_MS),
        *(extra or []),
    ]


def peer_argv(
    peer: str,
    w: Workload,
    stack: Stack,
    loaded: Loaded,
    folder: Path,
    args: argparse.Namespace,
    progress: Path,
    label: str | None = None,
) -> list[str] | None:
    """Return the command line of ``peer`` (None when it cannot run here); ``label`` names the run (its
    measurement, spec and state: ``loop``, then ``loop_2``, ... with ``--runs``), the peer's name by default."""
    label = label or peer
    suffix = label.removeprefix(peer)  # "" or "_2", ...
    measurement = w.measurement_for(label)
    if peer == "loop":
        return _topic_to_influx_argv(PYTHON, "loop_peer.py", stack, loaded, measurement, progress)
    if peer == "sparkudf":
        spec = write_spec(
            w,
            stack,
            loaded.topic,
            folder,
            runner=label,
            trigger_s=0,
            max_records=args.max_records,
            tag="pre",
        )
        return [
            PYTHON,
            str(ROOT / "bench/peers/spark_udf_peer.py"),
            "--spec",
            str(spec),
            "--measurement",
            measurement,
            "--progress",
            str(progress),
            "--checkpoint",
            str(folder / f"{label}-checkpoint"),
            "--master",
            f"local[{args.cores}]",
            "--max-seconds",
            str(args.peer_timeout + 120),
        ]
    if peer == "quix":
        if not QUIX_PYTHON.exists():
            return None
        from job.schema import default_registry

        descriptors = folder / "descriptors.pb"
        descriptors.write_bytes(default_registry().descriptor_set)
        return _topic_to_influx_argv(
            str(QUIX_PYTHON),
            "quix_peer.py",
            stack,
            loaded,
            measurement,
            progress,
            ["--descriptors", str(descriptors), "--state-dir", str(folder / f"quix-state{suffix}")],
        )
    raise ValueError(peer)


def run_peer(
    peer: str,
    w: Workload,
    stack: Stack,
    loaded: Loaded,
    folder: Path,
    args: argparse.Namespace,
    expected: Points,
    label: str | None = None,
) -> RunResult:
    """Run one peer over the pre-loaded topic until it wrote every point, exited, or ran out of time.

    ``label`` names the run (``loop``, ``loop_2``, ...: its measurement, progress file, log and state, so
    that no run sees another's). Its points are checked against ``expected`` (which the engine's points were
    checked equal to).
    """
    label = label or peer
    res = RunResult(label, load_before=load_average())
    progress = folder / f"{label}-progress.json"
    argv = peer_argv(peer, w, stack, loaded, folder, args, progress, label)
    if argv is None:
        res.note = (
            f"not run: no Quix Streams virtualenv at {QUIX_PYTHON.parent.parent} (bash bench/setup_quix.sh)"
        )
        res.check = "not run"
        return res
    log = folder / f"{w.key}-{label}.log"
    started = time.time()
    proc = spawn(argv, log, cores=args.cores)
    sampler = TreeSampler(proc.pid, extra=stack.pids()).start()
    want = len(loaded.expected)
    total = loaded.total
    last: dict[str, Any] = {}
    stopped_early = False
    try:
        while proc.poll() is None:
            time.sleep(0.25)
            last = read_progress(progress) or last
            first = last.get("first_event_at")
            if last.get("points", 0) >= want:
                break
            if first and time.time() - first > args.peer_timeout:
                stopped_early = True
                break
            if not first and time.time() - started > args.peer_timeout + 120:
                stopped_early = True
                break
    finally:
        end_wall = time.time()
        sampler.stop()
        last = read_progress(progress) or last  # before the stop, which writes the file once more
        stop(proc, timeout=30)
    first = last.get("first_event_at")
    if proc.returncode not in (0, -15, None) and not last.get("points") and not stopped_early:
        res.note = f"exited with {proc.returncode}: {tail(log, 8)}"
    if not first:
        res.check = "no events processed"
        res.note = res.note or tail(log, 8)
        return res
    finished = last.get("points", 0) >= want
    t_end = float(last.get("updated_at") or end_wall)
    res.events = min(int(last.get("events", 0)), total)
    res.seconds = t_end - first
    res.events_per_s = res.events / res.seconds if res.seconds > 0 else 0.0
    res.startup_s = first - started
    res.complete = finished
    _resources(res, sampler, first, t_end)
    res.load_after = load_average()
    got = influx_read.points(stack.url, DB, w.measurement_for(label), w.fields, w.tags, w.time_epoch)
    windows = {k[0] for k in got}
    if finished:
        res.check = compare(expected, got, w)
    else:
        done = {t for t in windows if t + WATERMARK_DELAY_MS / 1000 < _max_event_s(loaded, res.events, w)}
        res.check = f"stopped after {args.peer_timeout:.0f} s at {res.events:,} of {total:,} events; " + (
            compare(expected, got, w, done) + f" over {len(done)} closed window(s)"
            if done
            else "no window closed yet"
        )
    return res


def _max_event_s(loaded: Loaded, events: int, w: Workload) -> float:
    """Event time (s) of the ``events``-th event of the pre-loaded topic (roughly; events are time-ordered)."""
    return BENCH_START.timestamp() + events / w.default_density


def run_flink_side(
    peer: str,
    w: Workload,
    stack: Stack,
    loaded: Loaded,
    folder: Path,
    args: argparse.Namespace,
    cache: dict[str, Any],
    label: str | None = None,
) -> RunResult:
    """Run a Flink peer (bench/flink_bench.py: flink-udf, flink-builtin) or Daggers' run of the built-in query
    (engine-builtin). Flink reads the pre-load's events from CSV files written once per run (``cache``).
    ``label`` names the run (``flink-udf``, ``flink-udf_2``, ...): its output, log, measurement and
    checkpoint."""
    label = label or peer
    from bench import flink_bench

    if "input" not in cache:
        cache["input"] = flink_bench.write_input(w, loaded.events, folder / "flink-events", args.cores)
    flink_input: flink_bench.FlinkInput = cache["input"]
    if peer == "engine-builtin":
        res = run_engine(
            flink_bench.builtin_workload(w),
            stack,
            dataclasses.replace(loaded, expected=flink_input.builtin_expected),
            folder,
            args,
            runner="engine" + label.removeprefix(peer),
        )
        res.runner = label
        return res
    expected = loaded.expected if peer == "flink-udf" else flink_input.builtin_expected
    return flink_bench.run_flink_peer(
        peer, w, expected, flink_input, folder, args, spawn, stop, compare, RunResult, label=label
    )


# --------------------------------------------------------------------------- live run


@dataclass
class LiveResult:
    """A live run at a steady rate: delays from watermark to InfluxDB and resources over time."""

    rate: float
    seconds: int
    windows: dict[int, int] = field(default_factory=dict)
    delay_p50_s: float | None = None
    delay_p99_s: float | None = None
    delay_max_s: float | None = None
    delay_status_p50_s: float | None = None
    delay_status_p99_s: float | None = None
    events_in: int = 0
    input_rows_per_s: float = 0.0
    batch_ms_p50: float = 0.0
    batch_ms_p99: float = 0.0
    driver_peak_mb: float = 0.0
    worker_peak_mb: float = 0.0
    driver_peak_pss_mb: float = 0.0
    worker_peak_pss_mb: float = 0.0
    job_cores: float = 0.0
    # the same over the feed's second half: a new JVM compiles Spark's code in its first minutes under load
    # (a third of the job's CPU then), a cost a dagger pays once; this is what it costs after
    job_cores_second_half: float = 0.0
    broker_cores: float = 0.0
    influx_cores: float = 0.0
    feeder_behind_s: float = 0.0
    feeder_rate: float = 0.0  # events/s the feeder really sent
    delay_quantiles: list[float] = field(default_factory=list)  # 0%, 1%, ... 100% of the delays
    driver_growth_mb_per_min: float = 0.0
    worker_growth_mb_per_min: float = 0.0
    memory_series: list[tuple[float, float, float]] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    note: str = ""
    # each micro-batch after the warm-up: (seconds after the feeder's start at its end, duration ms, rows,
    # its watermark in seconds after the feeder's start); each window: (end, its watermark event sent,
    # first and last of its points in InfluxDB), all in seconds after the feeder's start
    batch_timeline: list[tuple[float, float, int, float | None]] = field(default_factory=list)
    window_timeline: list[tuple[float, float, float, float]] = field(default_factory=list)
    job_exit: int | None = None  # the dagger's exit code when it exited before the harness stopped it
    job_error: str = ""  # ... and the last lines of its log


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))]


def run_live(
    w: Workload,
    stack: Stack,
    folder: Path,
    args: argparse.Namespace,
    runner: str = "engine",
    features: dict[str, str] | None = None,
    conf: list[str] | None = None,
) -> LiveResult:
    """Start the dagger on an empty topic, stream ``--rate`` pings/s into it, and time each window.

    ``runner`` names the run (its topic, measurement, checkpoint and logs); ``features``: engine features
    pinned in its checkpoint (see :func:`pin_features`); ``conf``: Spark settings of this run, after
    ``--spark-conf``."""
    from job.produce import ensure_topic

    live = LiveResult(args.rate, args.seconds, load_before=load_average())
    topic = f"bench-{w.key}-live-{runner}-{int(time.time())}"
    ensure_topic(stack.bootstrap, topic, 4)
    spec = write_spec(
        w,
        stack,
        topic,
        folder,
        runner=runner,
        trigger_s=args.live_trigger_s,
        max_records=args.max_records,
        tag="live",
        spark_conf=[*args.spark_conf, *(conf or [])],
        close_promptly=not args.no_close_promptly,
    )
    pin_features(folder / f"checkpoint-{w.key}-{runner}-live", features)
    status_path = folder / f"checkpoint-{w.key}-{runner}-live" / "status.json"
    measurement = w.measurement_for(runner) + "_live"
    spec.write_text(
        spec.read_text().replace(f"measurement: {w.measurement_for(runner)}", f"measurement: {measurement}")
    )
    # A few old pings first: the job is warm (Spark up, Python workers started) once it has read them.
    from job.produce import produce

    warmup = w.make(WARMUP_EVENTS, args.seed + 1, datetime.fromtimestamp(time.time() - 300, UTC), 100.0)
    produce(stack.bootstrap, topic, warmup, progress=False)
    job = spawn(
        [
            PYTHON,
            "-m",
            "job.cli",
            "run",
            str(spec),
            "--master",
            f"local[{args.slots}]",
            "--state-dir",
            str(folder / "state"),
        ],
        folder / f"{w.key}-{runner}-live.log",
        cores=args.cores,
    )
    sampler = TreeSampler(job.pid, extra=stack.pids(), interval_s=1.0).start()
    ready_by = time.time() + args.engine_timeout
    while time.time() < ready_by and job.poll() is None:
        if int(_status(status_path).get("input_rows") or 0) >= WARMUP_EVENTS:
            break
        time.sleep(0.2)
    else:
        sampler.stop()
        stop(job)
        live.note = f"the job did not start: {tail(folder / f'{w.key}-{runner}-live.log', 8)}"
        return live
    feed_out = folder / f"feeder-{runner}.json"
    feeder = spawn(
        [
            PYTHON,
            str(ROOT / "bench/feeder.py"),
            "--bootstrap",
            stack.bootstrap,
            "--topic",
            topic,
            "--rate",
            str(int(args.rate)),
            "--seconds",
            str(args.seconds),
            "--out",
            str(feed_out),
        ],
        folder / f"feeder-{runner}.log",
    )
    sampler.extra["feeder"] = feeder.pid
    arrivals: dict[int, list[tuple[float, int]]] = {}
    batches: list[dict[str, Any]] = []
    seen: set[int] = set()
    since = int(time.time()) - 120
    end_by = time.time() + args.seconds + 60 + 2 * WINDOW_S + 30
    feeder_done_at: float | None = None
    probe: str | None = None  # the tag value of one series in every window
    full_at = 0.0  # when every series was last counted

    def unsettled(now: float) -> bool:
        """Whether a window's count changed in the last second (its points may still be arriving)."""
        return any(now - series[-1][0] < 1.0 for series in arrivals.values())

    try:
        while time.time() < end_by and job.poll() is None:
            time.sleep(args.poll_s)
            now = time.time()
            st = _status(status_path)
            if st and st.get("last_batch_id", -1) not in seen:
                seen.add(st["last_batch_id"])
                batches.append(st)
            # Counting every series of the measurement costs InfluxDB a good part of a core at 4 queries a
            # second: CPU taken from the job under test. So count only while a window is arriving (seen by
            # one probe series: the feeder repeats one pool of pings, so every window holds the same
            # cells) or every 10 s, and only from the newest window on (windows are written in order).
            recent = max(since, max(arrivals, default=since))
            try:
                arriving = (
                    probe is None
                    or now - full_at > 10
                    or bool(
                        unsettled(now)
                        or influx_read.windows_of_series(
                            stack.url, DB, measurement, w.fields[0], w.tags[0], probe, recent
                        )
                        - set(arrivals)
                    )
                )
                counts = (
                    influx_read.counts_per_window(stack.url, DB, measurement, w.fields[0], recent)
                    if arriving
                    else {}
                )
                if arriving:
                    full_at = now
                if probe is None and len(arrivals) >= 1 and not unsettled(now):
                    probe = influx_read.one_tag_value(stack.url, DB, measurement, w.tags[0], min(arrivals))
            except Exception:  # noqa: BLE001 - a slow query: try again at the next poll
                counts = {}
            for t, n in counts.items():
                series = arrivals.setdefault(t, [])
                if not series or series[-1][1] != n:
                    series.append((now, n))
            info = _feeder_info(feed_out)
            if feeder.poll() is None and info and now > info["t0"] + args.seconds + 30:
                stop(feeder, 10)  # it fell behind the rate: what it sent is what the job got
            if feeder.poll() is not None and feeder_done_at is None:
                feeder_done_at = now
            if feeder_done_at is not None and info:
                last_sec = max(s for s, _, _ in info["sent_at"])
                last_closable = ((last_sec - WATERMARK_DELAY_MS / 1000) // WINDOW_S) * WINDOW_S
                if (
                    last_closable in arrivals and now - arrivals[last_closable][-1][0] > 5
                ) or now - feeder_done_at > WINDOW_S + 30:
                    break
    finally:
        sampler.stop()
        stop(feeder, 10)
        if job.poll() is not None:  # it exited by itself: a crash, not a result
            live.job_exit = job.returncode
            live.job_error = " | ".join(tail(folder / f"{w.key}-{runner}-live.log", 2).splitlines())[-400:]
        stop(job)
    info = _feeder_info(feed_out)
    if not info or not info["sent_at"]:
        live.note = f"the feeder sent nothing: {tail(folder / f'feeder-{runner}.log', 5)}"
        return live
    chunks = info["sent_at"]
    live.feeder_rate = len(chunks) * info["rate"] / max(1e-9, chunks[-1][2] - chunks[0][1])
    if not info.get("done"):
        live.note = (
            f"the feeder fell behind and was stopped after {len(chunks)} of {args.seconds} one-second "
            f"chunks ({live.feeder_rate:,.0f} events/s sent)"
        )
    sent_at = {int(s): float(begin) for s, begin, _ in info["sent_at"]}
    t0 = float(info["t0"])
    live.feeder_behind_s = max((end - (s + 1) for s, _, end in info["sent_at"]), default=0.0)
    warm = t0
    delays: list[float] = []
    status_delays: list[float] = []
    for end, series in sorted(arrivals.items()):
        wm_sec = int(end + WATERMARK_DELAY_MS / 1000)
        if end < t0 or wm_sec not in sent_at:
            continue  # the warm-up pings' window
        live.windows[end] = series[-1][1]
        wm_at = sent_at[wm_sec]
        live.window_timeline.append((end - t0, wm_at - t0, series[0][0] - t0, series[-1][0] - t0))
        prev = 0
        for t, n in series:
            delays.extend([t - wm_at] * (n - prev))
            prev = n
        # the job's own view: the batch before the first batch whose reported watermark passed the end
        crossed = [b for b in batches if b.get("watermark") and _iso_s(b["watermark"]) >= end]
        if crossed:
            idx = batches.index(crossed[0])
            known_at = batches[idx - 1]["updated_at"] if idx > 0 else crossed[0]["updated_at"]
            prev = 0
            for t, n in series:
                status_delays.extend([t - known_at] * (n - prev))
                prev = n
    if delays:
        live.delay_p50_s, live.delay_p99_s = _percentile(delays, 0.5), _percentile(delays, 0.99)
        live.delay_max_s = max(delays)
        live.delay_quantiles = [_percentile(delays, i / 100) for i in range(101)]
    if status_delays:
        live.delay_status_p50_s = _percentile(status_delays, 0.5)
        live.delay_status_p99_s = _percentile(status_delays, 0.99)
    steady = [b for b in batches if b.get("last_input_rows") and b["updated_at"] >= warm]
    if steady:
        durations = [float(b["batch_duration_ms"]) for b in steady]
        live.batch_timeline = [
            (
                b["updated_at"] - t0,
                float(b["batch_duration_ms"]),
                int(b.get("last_input_rows") or 0),
                _iso_s(b["watermark"]) - t0 if b.get("watermark") else None,
            )
            for b in batches
            if b["updated_at"] >= warm
        ]
        live.batch_ms_p50, live.batch_ms_p99 = _percentile(durations, 0.5), _percentile(durations, 0.99)
        span = steady[-1]["updated_at"] - steady[0]["updated_at"]
        rows = sum(int(b["last_input_rows"]) for b in steady[1:])
        live.input_rows_per_s = rows / span if span > 0 else 0.0
    live.events_in = int(batches[-1].get("input_rows", 0)) if batches else 0
    t_end = t0 + args.seconds
    live.driver_peak_mb = sampler.peak_rss(("driver-python", "jvm"), warm, t_end) / 2**20
    live.worker_peak_mb = sampler.peak_rss(("worker",), warm, t_end) / 2**20
    live.driver_peak_pss_mb = sampler.peak_pss(("driver-python", "jvm"), warm, t_end) / 2**20
    live.worker_peak_pss_mb = sampler.peak_pss(("worker",), warm, t_end) / 2**20
    live.job_cores = sampler.cpu_cores(warm, t_end)
    live.job_cores_second_half = sampler.cpu_cores(t0 + args.seconds / 2, t_end)
    live.broker_cores = sampler.extra_cores("broker", warm, t_end)
    live.influx_cores = sampler.extra_cores("influxdb", warm, t_end)
    live.memory_series = [
        (
            s.t - t0,
            (s.rss.get("driver-python", 0) + s.rss.get("jvm", 0)) / 2**20,
            s.rss.get("worker", 0) / 2**20,
        )
        for s in sampler.samples
    ]
    # growth over the second half of the feed: the first minute holds the state filling up with open windows
    half = [x for x in live.memory_series if args.seconds / 2 <= x[0] <= args.seconds]
    live.driver_growth_mb_per_min = _slope([(t, d) for t, d, _ in half])
    live.worker_growth_mb_per_min = _slope([(t, w_) for t, _, w_ in half])
    live.load_after = load_average()
    return live


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per minute (0 with fewer than 3 points)."""
    if len(points) < 3:
        return 0.0
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 60 * sum((t - mx) * (v - my) for t, v in points) / var if var else 0.0


def _feeder_info(path: Path) -> dict[str, Any]:
    """Return the feeder's record so far ({} before its first chunk)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _iso_s(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# --------------------------------------------------------------------------- components


def run_components(stack: Stack, topic: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run bench/components.py over ``topic``; return its stages (or an error note)."""
    out = folder / "components.json"
    load_before = load_average()
    proc = spawn(
        [
            PYTHON,
            str(ROOT / "bench/components.py"),
            "--bootstrap",
            stack.bootstrap,
            "--topic",
            topic,
            "--influx",
            stack.url,
            "--db",
            DB,
            "--out",
            str(out),
            "--cores",
            str(args.cores),
        ],
        folder / "components.log",
        cores=args.cores,
    )
    try:
        proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        stop(proc)
    if not out.exists():
        return {"error": tail(folder / "components.log", 8)}
    data = json.loads(out.read_text())
    data["load_before"], data["load_after"] = load_before, load_average()
    return data


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Benchmark Daggers end to end against Python peers.")
    ap.add_argument("--workload", choices=["a", "b", "c", "d", "all"], default="a")
    ap.add_argument(
        "--events", type=int, default=None, help="pre-loaded events per workload (default per workload)"
    )
    ap.add_argument(
        "--density",
        type=float,
        default=None,
        help="events per second of event time in the pre-loaded topics (default per workload; workload "
        "(a) at 100000 has the live run's ~136 drivers per cell and window)",
    )
    ap.add_argument(
        "--rate", type=float, default=None, help="also run workload (a) live at this many events/s"
    )
    ap.add_argument("--seconds", type=int, default=150, help="length of the live run")
    ap.add_argument("--cores", type=int, choices=[1, 2], default=2, help="cores given to the job under test")
    ap.add_argument(
        "--slots",
        type=int,
        default=None,
        help="Spark task slots of the job under test (local[N]; default: --cores)",
    )
    ap.add_argument("--broker", choices=["tansu", "noida"], default="tansu")
    ap.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions of the pre-loaded topics (1: every peer sees events in time order)",
    )
    ap.add_argument(
        "--peers",
        default=",".join(PEERS),
        help="comma-separated peers for workload (a), or none; also flink-udf, flink-builtin (Apache Flink "
        "SQL reading local CSV files, bench/setup_flink.sh) and engine-builtin (Daggers running "
        "flink-builtin's query), see bench/flink_bench.py",
    )
    ap.add_argument(
        "--peer-timeout", type=float, default=60.0, help="seconds a peer may process before it is stopped"
    )
    ap.add_argument("--engine-timeout", type=float, default=300.0)
    ap.add_argument("--no-preload", action="store_true", help="skip the pre-loaded runs (live run only)")
    ap.add_argument("--no-components", action="store_true")
    ap.add_argument("--trigger-s", type=float, default=0.0, help="trigger interval of the pre-loaded runs")
    ap.add_argument("--live-trigger-s", type=float, default=1.0, help="trigger interval of the live run")
    ap.add_argument("--poll-s", type=float, default=0.25, help="InfluxDB poll interval of the live run")
    ap.add_argument(
        "--max-records",
        type=int,
        default=None,
        help="max_records_per_batch of the dagger (default: the spec's default)",
    )
    ap.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for the engine's dagger (its spec's spark_conf); repeatable",
    )
    ap.add_argument(
        "--sql-file",
        type=Path,
        default=None,
        help="run the engine with this Dagger SQL instead of the workload's (an experiment: it must "
        "give the workload's results, which are checked as always)",
    )
    ap.add_argument(
        "--no-close-promptly",
        action="store_true",
        help="run the engine with close_windows_promptly: false (Spark closes a window in the next full "
        "micro-batch; for comparison)",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="make each engine run (pre-loaded and live) and each peer's run this many times and report "
        "the median and the worst; a round is the engine run(s) then every peer; the pre-loaded topic is "
        "produced once, every run must pass",
    )
    ap.add_argument(
        "--features",
        action="append",
        default=[],
        metavar="FEATURE=VALUE",
        help="pin this engine feature (job.query.plan.ENGINE_FEATURES) in the engine's checkpoints; repeatable",
    )
    ap.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="FEATURE=VALUE",
        help="also run the engine with this feature pinned (e.g. distinct_count=collect_set: the layout "
        "before), alternating with the engine run by run, on the same topic; repeatable",
    )
    ap.add_argument(
        "--baseline-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="also run the engine with this Spark setting (after --spark-conf), alternating with the "
        "engine run by run; with --baseline, that run has both; repeatable",
    )
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE;...",
        help="also run the engine with these settings, alternating with the engine (and the baseline) run "
        "by run: Spark settings, spec lines (spec.FIELD=V, stream.FIELD=V) and engine features "
        "(feature.F=V); repeatable, one NAME each",
    )
    ap.add_argument(
        "--live-goal-s",
        type=float,
        default=verdict.LIVE_P99_GOAL_S,
        help="the live run fails when its watermark → InfluxDB p99 is over this many seconds",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, specs)")
    ap.add_argument(
        "--record", action="store_true", help="append the results to bench/results/history.md with a plot"
    )
    args = ap.parse_args(argv)
    args.slots = args.slots or args.cores
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    try:
        engine_runs(args)  # a bad --features or --baseline fails here, before anything starts
    except ValueError as exc:
        ap.error(str(exc))
    return args


def _features(items: list[str], option: str) -> dict[str, str]:
    """``["k=v", ...]`` → ``{k: v}``; raise ValueError naming the option for an item without ``=`` or with a
    feature the engine does not have."""
    from job.query.plan import ENGINE_FEATURES

    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in ENGINE_FEATURES:
            raise ValueError(
                f"{option} {item!r}: give FEATURE=VALUE with FEATURE one of {', '.join(ENGINE_FEATURES)}"
            )
        out[name] = value
    return out


EngineRun = tuple[str, dict[str, str] | None, list[str]]


def engine_runs(args: argparse.Namespace) -> list[EngineRun]:
    """Return the engine runs to make, in order, as (label, pinned features, Spark settings): ``--runs`` rounds
    of the engine (``--features``) and, with ``--baseline`` or ``--baseline-conf``, of the engine with those
    features pinned and those settings, alternating so that both see the machine alike. Labels: ``engine``,
    ``baseline``, then ``engine_2``, ``baseline_2``, ..."""
    features = _features(args.features, "--features") or None
    baseline = {**(features or {}), **_features(args.baseline, "--baseline")} or None
    kinds: list[tuple[str, dict[str, str] | None, list[str]]] = [("engine", features, [])]
    if args.baseline or args.baseline_conf:
        kinds.append(("baseline", baseline, list(args.baseline_conf)))
    for text in args.variant:
        kinds.append(_variant(text, features))
    return [
        (name if i == 0 else f"{name}_{i + 1}", pinned, conf)
        for i in range(args.runs)
        for name, pinned, conf in kinds
    ]


#: A run over the pre-loaded topic: (label, peer, pinned features, Spark settings); peer None for an engine run.
PreloadRun = tuple[str, str | None, dict[str, str] | None, list[str]]
#: The peers bench/flink_bench.py runs (Flink reads CSV files; engine-builtin is Daggers on Flink's query).
FLINK_SIDE = ("flink-udf", "flink-builtin", "engine-builtin")


def preload_runs(args: argparse.Namespace, peers: list[str]) -> list[PreloadRun]:
    """Return the runs over a pre-loaded topic, in order: ``--runs`` rounds, each the round's engine runs
    (:func:`engine_runs`: the engine, then any baseline and variants) and then each of ``peers`` once, so
    that the engine and its peers see the machine alike. A peer's runs are labelled ``loop``, ``loop_2``,
    ... as the engine's are."""
    engines = engine_runs(args)
    per_round = len(engines) // args.runs
    out: list[PreloadRun] = []
    for i in range(args.runs):
        out += [
            (label, None, pinned, conf)
            for label, pinned, conf in engines[i * per_round : (i + 1) * per_round]
        ]
        out += [(peer if i == 0 else f"{peer}_{i + 1}", peer, None, []) for peer in peers]
    return out


def _variant(text: str, features: dict[str, str] | None) -> tuple[str, dict[str, str] | None, list[str]]:
    """``NAME:KEY=VALUE;KEY=VALUE`` (``--variant``) → (NAME, pinned features, settings): a KEY ``feature.F`` pins
    the engine feature F; any other is a Spark setting or a spec line (:data:`SPEC_PREFIXES`). Raises
    ValueError for a bad NAME or item."""
    name, sep, rest = text.partition(":")
    if not sep or not re.fullmatch(r"[a-z][a-z0-9]*", name) or name in ("engine", "baseline", *PEER_TITLES):
        raise ValueError(
            f"--variant {text!r}: give NAME:KEY=VALUE[;KEY=VALUE...], NAME lower-case letters and "
            "digits (not engine, baseline or a peer's name)"
        )
    pinned = dict(features or {})
    conf = []
    for item in filter(None, (i.strip() for i in rest.split(";"))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--variant {text!r}: {item!r} is not KEY=VALUE")
        if key.startswith("feature."):
            pinned.update(_features([f"{key.removeprefix('feature.')}={value}"], "--variant"))
        else:
            conf.append(item)
    return name, pinned or None, conf


def family(label: str) -> str:
    """The runner a run's label belongs to: ``engine_2`` → ``engine``."""
    name, _, number = label.rpartition("_")
    return name if name and number.isdigit() else label


def summarize(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per runner with more than one run (``--runs``), the median and the worst of its figures: events/s (worst:
    the lowest), CPU µs an event and, for live runs, the watermark → InfluxDB p99 and the batch p99 (worst:
    the highest)."""
    groups: dict[str, dict[str, list[float]]] = {}
    for label, run in (entry.get("runs") or {}).items():
        if run.get("events"):
            g = groups.setdefault(family(label), {})
            g.setdefault("events_per_s", []).append(float(run["events_per_s"]))
            g.setdefault("cpu_us_per_event", []).append(float(run.get("cpu_us_per_event") or 0))
    for label, live in (entry.get("lives") or {}).items():
        g = groups.setdefault(f"{family(label)} live", {})
        g.setdefault("delay_p99_s", []).append(
            float("inf") if live.get("delay_p99_s") is None else float(live["delay_p99_s"])
        )
        g.setdefault("batch_ms_p99", []).append(float(live.get("batch_ms_p99") or 0))
        g.setdefault("input_rows_per_s", []).append(float(live.get("input_rows_per_s") or 0))
        if live.get("input_rows_per_s") and live.get("job_cores"):
            g.setdefault("cpu_us_per_event", []).append(
                1e6 * float(live["job_cores"]) / float(live["input_rows_per_s"])
            )
        if live.get("input_rows_per_s") and live.get("job_cores_second_half"):
            g.setdefault("cpu_us_per_event_second_half", []).append(
                1e6 * float(live["job_cores_second_half"]) / float(live["input_rows_per_s"])
            )
    lowest_is_worst = {"events_per_s", "input_rows_per_s"}
    out: dict[str, dict[str, Any]] = {}
    for name, figures in groups.items():
        out[name] = {
            k: {
                "runs": len(v),
                "median": statistics.median(v),
                "worst": min(v) if k in lowest_is_worst else max(v),
                "all": v,
            }
            for k, v in figures.items()
        }
    return out


def main(argv: list[str] | None = None) -> int:
    from bench import report

    args = parse_args(argv)
    keys = ["a", "b", "c"] if args.workload == "all" else [args.workload]
    peers = [] if args.peers.strip() in ("", "none") else [p.strip() for p in args.peers.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="daggers-bench-"))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    results: dict[str, Any] = {
        "command": "python bench/run.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "date": datetime.now(UTC).strftime("%a %b %d %H:%M:%S UTC %Y"),
        "machine": report.machine(),
        "cores": args.cores,
        "slots": args.slots,
        "broker": args.broker,
        "runs": args.runs,
        "live_goal_s": args.live_goal_s,
        "features": args.features,
        "baseline": args.baseline,
        "baseline_conf": args.baseline_conf,
        "workloads": {},
    }
    print(
        f"daggers bench: {results['machine']}; job on {args.cores} core(s); load {load_average()}", flush=True
    )
    try:
        with local_stack(folder / "stack", args.broker) as stack:
            for key in keys:
                w = WORKLOADS[key]
                if args.density:
                    w = dataclasses.replace(w, default_density=args.density)
                if args.sql_file:
                    w = dataclasses.replace(w, sql=args.sql_file.read_text())
                entry: dict[str, Any] = {"title": w.title}
                results["workloads"][key] = entry
                if not args.no_preload:
                    print(f"workload ({key}) {w.title}", flush=True)
                    loaded = preload(w, stack, args.events or w.default_events, args.seed, args.partitions)
                    entry["events"] = loaded.events
                    entry["points"] = len(loaded.expected)
                    entry["runs"] = {}
                    flink_cache: dict[str, Any] = {}
                    for label, peer, features, conf in preload_runs(args, peers if key == "a" else []):
                        if peer is None:
                            res = run_engine(
                                w, stack, loaded, folder, args, runner=label, features=features, conf=conf
                            )
                        elif peer in FLINK_SIDE:
                            res = run_flink_side(peer, w, stack, loaded, folder, args, flink_cache, label)
                        else:
                            res = run_peer(peer, w, stack, loaded, folder, args, loaded.expected, label)
                        entry["runs"][label] = res.__dict__
                        print("  " + report.run_line(res), flush=True)
                    if key == "a" and not args.no_components:
                        entry["components"] = run_components(stack, loaded.topic, folder, args)
                if key == "a" and args.rate:
                    entry["lives"] = {}
                    for label, features, conf in engine_runs(args):
                        print(
                            f"workload ({key}) live at {args.rate:,.0f} events/s for {args.seconds} s ({label})",
                            flush=True,
                        )
                        live = run_live(w, stack, folder, args, runner=label, features=features, conf=conf)
                        entry["lives"][label] = live.__dict__
                        entry.setdefault("live", live.__dict__)
                        print("  " + report.live_line(live), flush=True)
                entry["summary"] = summarize(entry)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        stop_all()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        else:
            print(f"kept {folder}")
    print(report.table(results))
    for key, entry in results["workloads"].items():
        for line in report.summary_lines(entry.get("summary") or {}):
            print(f"({key}) {line}")
    failed = verdict.failures(results)
    results["failures"] = failed
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (out_dir / f"{stamp}.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"results: bench/results/{stamp}.json")
    if args.record:
        md = report.record(results, stamp)
        print(f"appended to bench/results/history.md; plot {md}")
    if failed:
        print("BENCHMARK FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
