"""Dagger density: how much memory and CPU N daggers take on this machine, shared against dedicated.

Usage::

    python bench/bench_density.py [--n 1,10,50,100] [--modes shared,dedicated] [--seconds 180]
                                  [--light-rate 100] [--heavy-rate 50000] [--mem-cap-gb 12] [--record]

For each mode and each N, in one run (everything on 127.0.0.1, ports from the OS, one temporary folder):

1. fresh topics: a *light* one that ``bench/feeder.py`` fills with ``--light-rate`` driver pings a second
   (event time = wall time) and, unless ``--heavy-rate 0``, a *heavy* one at ``--heavy-rate``;
2. N light daggers over the light topic, each reading all of it (so ~``--light-rate`` events/s each), in
   turn of four kinds from the seeds and the function library: S2Id + DistinctCount per minute (the
   drivers-per-S2 seed), a HOP window, an interval join of the stream with itself, and a pass-through
   (filtered rows straight to the sink); plus one heavy dagger (S2Id + DistinctCount) over the heavy
   topic. Each writes its own measurement;
3. **dedicated**: one ``python -m job.cli run`` process (its own Spark application, ``local[1]``; the
   heavy one ``local[2]``) per dagger. **shared**: one ``python -m job.shared.host`` (``--host-master``, FAIR
   pools) and every dagger assigned to it through its folder (:class:`job.shared.channel.HostFolder`);
4. once every dagger has read its warm-up events, the feeders run for ``--settle-s`` (the JVMs' JIT compiles
   the queries' code: it took a shared host of 20 light daggers 0.67 cores 90 s in and 0.27 cores 7 min
   in, and a long-lived host is measured warm), then for ``--seconds`` more; the resident memory
   (RSS) and CPU of every process of the daggers (drivers, JVMs, Python workers) are sampled from
   ``/proc`` (``bench/procstats.py``), and InfluxDB forwards every write to the benchmark through a
   subscription (``bench/influx_watch.py``; ``--arrivals poll`` counts the points by polling instead, which
   took InfluxDB ~0.6 cores with 100 daggers). A window's delay
   is the time from the moment the feeder sent the event that moved the watermark past the window's end
   to its points being visible (as ``bench/run.py``'s live run measures it); a pass-through row's, from
   the moment its second of events was sent. p99 per dagger;
5. dedicated daggers are started only while their projected memory (the last step's per-dagger RSS, at
   first 1.4 GB) stays under ``--mem-cap-gb`` and leaves 4 GB of the machine available: a step that
   would not fit is skipped and reported as such.

Marginal memory is the least-squares slope of total RSS over N. The table is printed;
``bench/results/density-<UTC time>.json`` keeps every figure; ``--record`` appends a section to
bench/results/history.md and writes the plot ``bench/results/plots/density-<UTC time>.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import verdict  # noqa: E402
from bench.procstats import (  # noqa: E402
    ProcInfo,
    forest,
    load_average,
    pss_bytes,
    python_module,
    read_proc,
    role,
    steal_s,
)
from bench.report import HISTORY, PLOT_LINK, PLOTS, machine  # noqa: E402
from bench.run import PYTHON, _percentile, local_stack, spawn, stop, stop_all  # noqa: E402
from bench.trim import Trimmer, drop_topics, read_floor  # noqa: E402
from bench.workloads import DRIVERS_SQL, PING_CLASS, WATERMARK_DELAY_MS  # noqa: E402
from job.shared.hosted import TRANSIENT  # noqa: E402

DB = "density"
WARMUP_EVENTS = 500
#: The first guess of a dedicated dagger's resident memory (measured: 1.33 GB for a light one).
DEDICATED_GUESS_GB = 1.4
#: Restarts of daggers that failed at start with a transient error, per step.
MAX_RESTARTS = 20
#: Memory the benchmark leaves to the rest of the machine (other programs, page cache).
RESERVE_GB = 4.0

HOP_SQL = """SELECT service_type AS tag_service_type,
       count(1) AS pings,
       HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE) AS window_timestamp
FROM data_stream
GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '3' MINUTE), service_type"""

JOIN_SQL = """SELECT a.service_type AS tag_service_type,
       count(1) AS pairs,
       TUMBLE_END(a.rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM pings AS a
JOIN later AS b
  ON a.driver_id = b.driver_id
 AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '10' SECOND
GROUP BY TUMBLE(a.rowtime, INTERVAL '60' SECOND), a.service_type"""

PASS_SQL = """SELECT driver_id AS tag_driver_id,
       speed_kmh,
       rowtime AS window_timestamp
FROM data_stream
WHERE speed_kmh > 30"""

#: S2Id/DistinctCount of the pings at or above a speed that differs from dagger to dagger ({index}: the
#: dagger's number): as many different queries as daggers (up to 40), where the s2distinct daggers are one
#: query many times (a fused group computes such copies once, job.shared.merge).
FILTERED_DRIVERS_SQL = DRIVERS_SQL.replace(
    "FROM data_stream\n", "FROM data_stream\nWHERE speed_kmh >= {index}\n"
)

#: kind -> (SQL, table names it reads, windowed). Light daggers take the kinds in turn.
KINDS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "s2distinct": (DRIVERS_SQL, ("data_stream",), True),
    "hop": (HOP_SQL, ("data_stream",), True),
    "join": (JOIN_SQL, ("pings", "later"), True),
    "pass": (PASS_SQL, ("data_stream",), False),
    "s2filter": (FILTERED_DRIVERS_SQL, ("data_stream",), True),
}
#: The seed mix the light daggers take by default (s2filter only when asked for).
DEFAULT_KINDS = ("s2distinct", "hop", "join", "pass")


@dataclass(frozen=True)
class Dagger:
    """One dagger of a step: its name (also its measurement), kind, spec file and checkpoint."""

    name: str
    kind: str
    heavy: bool
    spec: Path
    checkpoint: Path


def spec_text(
    name: str,
    kind: str,
    topic: str,
    bootstrap: str,
    influx: str,
    checkpoint: Path,
    isolation: str,
    parallelism: int = 2,
    trigger_s: float = 1.0,
    conf: dict[str, str] | None = None,
    settings: dict[str, str] | None = None,
    index: int = 0,
) -> str:
    """Return the spec of a dagger of ``kind`` over ``topic``, writing measurement ``name`` (``index``: its
    number among the light daggers)."""
    sql, tables, _ = KINDS[kind]
    sql = sql.replace("{index}", str(index % 40))
    streams = "".join(
        f"""  - table: {table}
    topics: [{topic}]
    proto_class: {PING_CLASS}
    timestamp_field: event_timestamp
    bootstrap_servers: {bootstrap}
    group: {name}-{table}
    start_from: earliest
    max_records_per_batch: 200000
"""
        for table in tables
    )
    body = "\n".join("  " + line for line in sql.splitlines())
    return f"""name: {name}
streams:
{streams}sql: |
{body}
watermark_delay_ms: {WATERMARK_DELAY_MS}
parallelism: {parallelism}
checkpoint_dir: {checkpoint}
trigger_interval_s: {trigger_s:g}
isolation: {isolation}
{"".join(f"{k}: {v}{chr(10)}" for k, v in (settings or {}).items())}{"spark_conf:" + "".join(f"{chr(10)}  {k}: '{v}'" for k, v in conf.items()) + chr(10) if conf else ""}sink:
  type: influx
  url: {influx}
  database: {DB}
  measurement: {name}
"""


def make_daggers(
    folder: Path,
    n: int,
    heavy: bool,
    light_topic: str,
    heavy_topic: str,
    stack: Any,
    isolation: str,
    light_parallelism: int = 1,
    trigger_s: float = 1.0,
    light_conf: dict[str, str] | None = None,
    light_settings: dict[str, str] | None = None,
    kinds: list[str] | None = None,
) -> list[Dagger]:
    """Write the specs of ``n`` light daggers (``kinds`` in turn, by default :data:`DEFAULT_KINDS`) and,
    with ``heavy``, one heavy dagger."""
    kinds = kinds or list(DEFAULT_KINDS)
    plan = [(f"l{i:03d}-{kinds[i % len(kinds)]}", kinds[i % len(kinds)], False) for i in range(n)]
    if heavy:
        plan.append(("heavy-s2distinct", "s2distinct", True))
    out = []
    for index, (name, kind, is_heavy) in enumerate(plan):
        checkpoint = folder / "checkpoints" / name
        path = folder / "specs" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        # the heavy dagger of a fused step runs as a query of its own (fusion is for light daggers)
        path.write_text(
            spec_text(
                name,
                kind,
                heavy_topic if is_heavy else light_topic,
                stack.bootstrap,
                stack.url,
                checkpoint,
                "shared" if is_heavy and isolation == "fused" else isolation,
                2 if is_heavy else light_parallelism,
                trigger_s,
                None if is_heavy else light_conf,
                None if is_heavy else light_settings,
                index,
            )
        )
        out.append(Dagger(name, kind, is_heavy, path, checkpoint))
    return out


def status(d: Dagger) -> dict[str, Any]:
    """The dagger's ``status.json`` ({} before it wrote one)."""
    try:
        return json.loads((d.checkpoint / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def status_error(daggers: list[Dagger], name: str) -> str:
    """The last error a dagger recorded."""
    d = next(d for d in daggers if d.name == name)
    return str(status(d).get("last_error") or status(d).get("error") or "?")


def note_failed(step: Step, daggers: list[Dagger], failed: list[str]) -> None:
    """Add the daggers of ``failed`` to ``step.failed`` (once each), with the first one's error."""
    for name in failed:
        if name not in step.failed:
            step.failed.append(name)
            if not step.failed_error:
                step.failed_error = status_error(daggers, name)[:300]


# --------------------------------------------------------------------------- running the daggers


class Dedicated:
    """One ``job.cli run`` process (its own Spark application) per dagger; at most ``parallel`` of them
    starting at once (ten JVMs starting together on two busy cores miss Spark's connect-back timeouts)."""

    def __init__(self, folder: Path, parallel: int = 2) -> None:
        self.folder = folder
        self.parallel = parallel
        self.procs: list[Any] = []

    def start(self, daggers: list[Dagger]) -> None:
        for i, d in enumerate(daggers):
            while (
                sum(
                    1
                    for p, e in zip(self.procs, daggers[:i], strict=False)
                    if p.poll() is None and status(e).get("state") != "running"
                )
                >= self.parallel
            ):
                time.sleep(0.5)
            self.procs.append(self._spawn(d))

    def _spawn(self, d: Dagger) -> Any:
        master = "local[2]" if d.heavy else "local[1]"
        return spawn(
            [
                PYTHON,
                "-m",
                "job.cli",
                "run",
                str(d.spec),
                "--master",
                master,
                "--state-dir",
                str(self.folder / "state"),
            ],
            self.folder / f"{d.name}.log",
        )

    def restart(self, daggers: list[Dagger], d: Dagger) -> None:
        """Start dagger ``d`` again (its process exited), as the controller does after its back-off."""
        i = daggers.index(d)
        stop(self.procs[i], timeout=10)
        self.procs[i] = self._spawn(d)

    def roots(self) -> list[int]:
        return [p.pid for p in self.procs]

    def failed(self) -> str | None:
        return None  # a dagger that exits shows as failed in its status.json

    def stop(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(15)
        for p in self.procs:
            stop(p, timeout=60)


class Shared:
    """One shared application host (``python -m job.shared.host``) running every dagger as a query."""

    def __init__(self, folder: Path, master: str = "local[2]") -> None:
        from job.shared.channel import HostFolder

        self.folder = folder
        self.master = master
        self.host_folder = HostFolder(folder / "host")
        self.proc: Any = None

    def start(self, daggers: list[Dagger]) -> None:
        self.host_folder.root.mkdir(parents=True, exist_ok=True)
        for d in daggers:  # assignments written before the host starts are picked up at once
            self.host_folder.assign(d.name, d.spec, self.folder / "state", uuid.uuid4().hex[:8])
        self.proc = spawn(
            [
                PYTHON,
                "-m",
                "job.shared.host",
                str(self.host_folder.root),
                "--master",
                self.master,
                "--poll",
                "0.5",
            ],
            self.host_folder.log_path,
        )

    def restart(self, daggers: list[Dagger], d: Dagger) -> None:
        """Assign ``d`` again with a new token (the host never retries a failed dagger by itself)."""
        self.host_folder.assign(d.name, d.spec, self.folder / "state", uuid.uuid4().hex[:8])

    def roots(self) -> list[int]:
        return [self.proc.pid] if self.proc is not None else []

    def failed(self) -> str | None:
        if self.proc is not None and self.proc.poll() is not None:
            return (
                f"the shared host exited with code {self.proc.returncode} (see {self.host_folder.log_path})"
            )
        return None

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc, timeout=120)


# --------------------------------------------------------------------------- measuring


@dataclass
class Step:
    """One mode at one N."""

    mode: str
    n: int
    daggers: int = 0
    ran: bool = False
    note: str = ""
    start_s: float = 0.0  # from starting the daggers until all read their warm-up events
    restarts: int = 0  # daggers started again after a transient failure at start
    windows_missing: int = 0  # windows closed by the feed but not in InfluxDB by the end
    #: With ``--arrivals subscription``: points InfluxDB held at the end that the watch never saw, and the
    #: subscription writes InfluxDB dropped (its queue full) while the watch was subscribed.
    points_unseen: int = 0
    watch_dropped: int = 0
    rss_mb: float = 0.0  # mean total RSS over the measured span
    rss_peak_mb: float = 0.0
    rss_by_role_mb: dict[str, float] = field(default_factory=dict)
    pss_mb: float = 0.0  # mean total PSS (shared pages split between the processes that share them)
    pss_by_kind_mb: dict[str, float] = field(default_factory=dict)  # by process kind (see Sampler.kind)
    count_by_kind: dict[str, int] = field(default_factory=dict)  # most processes of each kind at once
    cores_by_kind: dict[str, float] = field(default_factory=dict)  # mean CPU cores by process kind
    batches_per_s: float = 0.0  # micro-batches (no-data ones included) of all the daggers together
    core_ms_per_batch: float = 0.0  # the daggers' CPU over their micro-batches: what one batch costs
    processes: int = 0
    cores: float = 0.0  # mean CPU cores of the daggers' processes
    feeder_cores: float = 0.0
    broker_cores: float = 0.0
    influx_cores: float = 0.0
    #: Seconds the harness waited on its InfluxDB queries over the measured span (light, heavy): InfluxDB
    #: answers each on about one core, so these over the span are roughly the harness's share of its CPU.
    poll_light_s: float = 0.0
    poll_heavy_s: float = 0.0
    #: How arrivals were seen: InfluxDB's subscription (bench.influx_watch), or polls.
    arrivals: str = "poll"
    p99_s: dict[str, float] = field(default_factory=dict)  # dagger -> p99 delay
    points: dict[str, int] = field(default_factory=dict)  # dagger -> points seen
    light_p99_max_s: float | None = None
    light_p99_median_s: float | None = None
    heavy_p99_s: float | None = None
    heavy_rate: float = 0.0  # events/s the heavy dagger read (status.json)
    #: With ``--trim-s``: records deleted from the feed topics once read (bench.trim), and the broker's
    #: largest resident memory sampled over the measured span.
    trimmed: int = 0
    broker_rss_peak_mb: float = 0.0
    #: The broker's resident memory as the step began: each step's feed topics are deleted at its end
    #: (bench.trim.drop_topics), so a later step does not run beside the earlier steps' records.
    broker_rss_start_mb: float = 0.0
    #: With ``--slice-s``: the measured span in slices of that length (a long run: does anything drift?),
    #: each with its light p99s, heavy p99 and events/s, PSS and cores (see :func:`slices_of`).
    slices: list[dict[str, Any]] = field(default_factory=list)
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Cores the hypervisor took from this VM over the measured span (/proc/stat's steal): another guest's load.
    steal_cores: float = 0.0
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    #: Daggers seen failed (status.json state "failed") at start or during the step, and the first one's error.
    failed: list[str] = field(default_factory=list)
    failed_error: str = ""
    heavy_offered: float = 0.0  # events/s offered to the heavy dagger (--heavy-rate; 0 without one)
    run: int = 1  # which of the --runs rounds


class Sampler:
    """Total RSS (by role), PSS (by process kind) and CPU seconds of several process trees, sampled together."""

    def __init__(self, roots: list[int]) -> None:
        self.roots = roots
        self.samples: list[tuple[float, dict[str, int], float, int]] = []  # t, rss by role, cpu s, processes
        self.pss: list[tuple[float, dict[str, int], dict[str, int]]] = []  # t, pss by kind, processes by kind
        self.first_cpu: dict[int, float] = {}  # pid -> CPU seconds when first seen
        self.last_cpu: dict[int, tuple[str, float]] = {}  # pid -> (kind, CPU seconds when last seen)
        self.first_at = self.last_at = 0.0

    @staticmethod
    def kind(info: ProcInfo, root: int) -> str:
        """``driver`` (a dagger's or host's Python process), ``jvm``, ``python-workers`` (the worker daemon and
        the workers it forks), ``source-runner`` (the Python process Spark keeps per streaming Python data
        source), or the module another Python process runs."""
        r = role(info, root)
        if r != "worker":
            return {"driver-python": "driver"}.get(r, r)
        module = python_module(info)
        if module == "job.shared.forkserver":  # a fork server's child keeps its command line: its name tells
            module = {
                "python-runner": "streaming_source_runner",
                "python-daemon": "pyspark.daemon",
                "python-workers": "job.spark.worker_daemon",
            }.get(info.comm, "fork-server")
        if module in ("pyspark.daemon", "job.spark.worker_daemon") or not module:
            return "python-workers"
        return "source-runner" if "streaming_source_runner" in module else module

    def cores_by_kind(self) -> dict[str, float]:
        """Mean CPU cores by process kind over the sampled span (a process that ended between two samples
        counts up to its last sample; CPU its parent reaped shows in the parent's kind)."""
        span = max(self.last_at - self.first_at, 1e-9)
        out: dict[str, float] = {}
        for pid, (k, cpu) in self.last_cpu.items():
            out[k] = out.get(k, 0.0) + (cpu - self.first_cpu.get(pid, 0.0)) / span
        return {k: round(v, 3) for k, v in sorted(out.items())}

    def sample(self) -> None:
        trees = forest(self.roots)
        rss: dict[str, int] = {}
        pss: dict[str, int] = {}
        kinds: dict[str, int] = {}
        cpu, count = 0.0, 0
        for root, procs in trees.items():
            for p in procs:
                r = role(p, root)
                rss[r] = rss.get(r, 0) + p.rss
                cpu += p.cpu_s
                count += 1
                k = self.kind(p, root)
                pss[k] = pss.get(k, 0) + pss_bytes(p.pid)
                kinds[k] = kinds.get(k, 0) + 1
                # a process first seen after the first sample started within the span: all its CPU counts
                self.first_cpu.setdefault(p.pid, p.cpu_s if not self.samples else 0.0)
                self.last_cpu[p.pid] = (k, p.cpu_s)
        now = time.time()
        self.first_at = self.first_at or now
        self.last_at = now
        self.samples.append((now, rss, cpu, count))
        self.pss.append((now, pss, kinds))


def cpu_of(pid: int) -> float:
    info = read_proc(pid)
    return info.cpu_s if info is not None else 0.0


def rss_mb(pid: int) -> float:
    info = read_proc(pid)
    return info.rss / 2**20 if info is not None else 0.0


#: The measurements a poll counts, with their buckets: light windowed daggers per minute, light
#: pass-throughs per second, and the heavy dagger per minute. The heavy one writes ~44,000 series a
#: window, and counting them took InfluxDB 0.7-1.5 s a query: polled every second with the others, the
#: harness took ~0.4 of the machine's 2 cores and stamped every arrival that much late. It is polled
#: every ``--heavy-poll-s`` instead (its p99 has that resolution).
LIGHT_QUERIES = ((r"/^l[0-9]+-(s2distinct|s2filter|hop|join)$/", "60s"), (r"/^l[0-9]+-pass$/", "1s"))
HEAVY_QUERIES = ((r"/^heavy-.*$/", "60s"),)


def poll_points(
    url: str,
    since_s: int,
    queries: tuple[tuple[str, str], ...] = LIGHT_QUERIES + HEAVY_QUERIES,
) -> dict[tuple[str, int], int]:
    """Return (measurement, bucket start s) -> points for ``queries`` (measurement regex, bucket), one
    InfluxQL query each over every measurement it matches."""
    from bench import influx_read

    out: dict[tuple[str, int], int] = {}
    for regex, bucket in queries:
        q = f"SELECT count(*) FROM {regex} WHERE time >= {since_s}s GROUP BY time({bucket}) fill(none)"
        for series in influx_read.query(url, DB, q):
            for row in series["values"]:
                n = max((v for v in row[1:] if isinstance(v, int)), default=0)
                if n:
                    out[(series["name"], int(row[0]))] = n
    return out


@functools.cache
def final_after_s(kind: str) -> float:
    """Return how long after a window's end the event that makes it final is sent: the watermark delay,
    plus how long the joins of ``kind``'s SQL hold the window back (job.sql.join_lag)."""
    from job.sql.join_lag import join_lag_ms
    from job.sql.parse import parse

    return (
        WATERMARK_DELAY_MS / 1000 + (join_lag_ms(parse(KINDS[kind][0].replace("{index}", "0"))) or 0) / 1000
    )


def delays_of(
    arrivals: dict[tuple[str, int], list[tuple[float, int]]],
    sent_at: dict[int, float],
    t0: float,
    daggers: list[Dagger],
) -> dict[str, list[float]]:
    """Per dagger, one delay per point: arrival time minus the time the event that made it final was sent
    (for a window ending at E, the event at E + the watermark delay, plus an interval join's width; for a
    pass-through row, its second)."""
    windowed = {d.name: KINDS[d.kind][2] for d in daggers}
    after_s = {d.name: final_after_s(d.kind) for d in daggers}
    out: dict[str, list[float]] = {d.name: [] for d in daggers}
    for (name, bucket), series in arrivals.items():
        if name not in out:
            continue
        # a window's point carries its end time (a whole minute), so its minute bucket starts at the end
        # (an interval join holds a window until the watermark passes its end plus the join's width)
        final_sec = int(bucket + after_s[name]) if windowed[name] else bucket
        if bucket < t0 or final_sec not in sent_at:
            continue  # warm-up windows, or windows the feeders' run did not close
        prev = 0
        for t, n in series:
            out[name].extend([t - sent_at[final_sec]] * (n - prev))
            prev = n
    return out


def missing_windows(
    arrivals: dict[tuple[str, int], list[tuple[float, int]]],
    sent_at: dict[int, float],
    t0: float,
    daggers: list[Dagger],
    present: Collection[tuple[str, int]] = (),
) -> int:
    """How many (dagger, minute window) pairs the feed closed (the event at end + watermark delay, plus an
    interval join's width, was sent) but neither ``arrivals`` nor ``present`` (what InfluxDB holds, asked at
    the end) has: windowed daggers over the feeder's pings have points in every minute."""
    ends = range(int(t0 // 60 + 1) * 60, max(sent_at, default=0) + 1, 60)
    return sum(
        1
        for d in daggers
        for e in ends
        if int(e + final_after_s(d.kind)) in sent_at
        and (d.name, e) not in arrivals
        and (d.name, e) not in present
    )


def unseen_points(
    arrivals: dict[tuple[str, int], list[tuple[float, int]]],
    in_influx: dict[tuple[str, int], int],
    since: float,
) -> int:
    """Return the points InfluxDB holds (``in_influx``: (measurement, bucket) -> points, asked at the end)
    beyond what ``arrivals`` saw come: writes the subscription did not forward. Only buckets from ``since``
    (when the watch started) count: a point's time is its window's end or its event's time, so it was
    written after that time; a bucket before it may hold points written before there was a watch."""
    return sum(
        max(n - (arrivals[key][-1][1] if arrivals.get(key) else 0), 0)
        for key, n in in_influx.items()
        if key[1] >= since
    )


def feeder_info(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def available_memory_gb() -> float:
    """MemAvailable of this machine, in GB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0


def run_step(
    mode: str, n: int, stack: Any, folder: Path, args: argparse.Namespace, per_dagger_gb: float
) -> Step:
    """Run N light daggers (+ the heavy one) in ``mode``; measure memory, CPU and delays."""
    from bench.workloads import driver_pings
    from job.produce import ensure_topic, produce

    step = Step(mode, n, load_before=load_average())
    step.broker_rss_start_mb = rss_mb(stack.broker.process.pid)
    heavy = args.heavy_rate > 0
    step.daggers = n + (1 if heavy else 0)
    if mode == "dedicated":
        available_gb = available_memory_gb()
        need_gb = step.daggers * per_dagger_gb
        if need_gb > args.mem_cap_gb or need_gb > available_gb - RESERVE_GB:
            step.note = (
                f"skipped: {step.daggers} dedicated daggers need about {need_gb:.0f} GB "
                f"(cap {args.mem_cap_gb:g} GB, {available_gb:.0f} GB available, "
                f"{RESERVE_GB:g} GB kept free)"
            )
            return step
    tag = f"{mode}-{n}-{int(time.time())}"
    sub = folder / tag
    sub.mkdir(parents=True)
    light_topic, heavy_topic = f"light-{tag}", f"heavy-{tag}"
    for topic in (light_topic, heavy_topic):
        ensure_topic(stack.bootstrap, topic, 4)
    old = datetime.fromtimestamp(time.time() - 600, UTC)
    produce(stack.bootstrap, light_topic, driver_pings(WARMUP_EVENTS, 5, old, 10.0), progress=False)
    if heavy:
        produce(stack.bootstrap, heavy_topic, driver_pings(WARMUP_EVENTS, 6, old, 10.0), progress=False)
    daggers = make_daggers(
        sub,
        n,
        heavy,
        light_topic,
        heavy_topic,
        stack,
        mode,
        args.light_parallelism,
        args.trigger_s,
        dict(kv.split("=", 1) for kv in args.light_conf),
        dict(kv.split("=", 1) for kv in args.light_spec),
        args.kinds.split(","),
    )
    trimmer: Trimmer | None = None
    runner: Dedicated | Shared = (
        Dedicated(sub, args.start_parallel) if mode == "dedicated" else Shared(sub, args.host_master)
    )
    t_start = time.time()
    runner.start(daggers)
    try:
        ready_by = time.time() + args.start_timeout
        restarts = 0
        while time.time() < ready_by:
            waiting = [
                d
                for d in daggers
                if int(status(d).get("input_rows") or 0) < WARMUP_EVENTS * len(KINDS[d.kind][1])
            ]
            failed = [d.name for d in daggers if status(d).get("state") == "failed"]
            for d in daggers:
                if (
                    d.name in failed
                    and TRANSIENT in status_error(daggers, d.name)
                    and restarts < MAX_RESTARTS
                ):
                    # a supervisor's job (the controller's, with its back-off): start the dagger again
                    restarts += 1
                    (d.checkpoint / "status.json").unlink(missing_ok=True)
                    runner.restart(daggers, d)
                    failed.remove(d.name)
            if not waiting or runner.failed() or failed:
                break
            time.sleep(1)
        step.restarts = restarts
        if runner.failed() or failed or waiting:
            note_failed(step, daggers, failed)
            step.note = runner.failed() or (
                f"{len(failed)} daggers failed at start ({failed[0]}: {status_error(daggers, failed[0])[:300]})"
                if failed
                else f"{len(waiting)} daggers not warm after {args.start_timeout} s"
            )
            return step
        step.start_s = time.time() - t_start
        print(f"  {mode} N={n}: {step.daggers} daggers warm after {step.start_s:.0f} s", flush=True)
        feeders = [
            spawn(
                [
                    PYTHON,
                    str(ROOT / "bench/feeder.py"),
                    "--bootstrap",
                    stack.bootstrap,
                    "--topic",
                    topic,
                    "--rate",
                    str(int(rate)),
                    "--seconds",
                    str(args.settle_s + args.seconds),
                    "--out",
                    str(sub / f"{name}.json"),
                ],
                sub / f"feeder-{name}.log",
            )
            for name, topic, rate in (
                ("light", light_topic, args.light_rate),
                *((("heavy", heavy_topic, args.heavy_rate),) if heavy else ()),
            )
        ]
        names = ["light", *(["heavy"] if heavy else [])]
        ready_by = time.time() + 300  # a feeder encodes its pool of pings first (a million for 50,000/s)
        while time.time() < ready_by and not all(feeder_info(sub / f"{name}.json") for name in names):
            time.sleep(0.5)
        if args.trim_s:
            trimmer = Trimmer(
                stack.bootstrap,
                [light_topic, *([heavy_topic] if heavy else [])],
                args.trim_s,
                floor=functools.partial(read_floor, sub),
            )
            trimmer.start()
        settle_by = time.time() + args.settle_s  # the JIT compiles the queries' code, then measure
        while time.time() < settle_by and not runner.failed():
            time.sleep(1)
        sampler = Sampler(runner.roots())
        extra = {"broker": stack.broker.process.pid, "influx": stack.influx.process.pid}
        extra_cpu0 = {k: cpu_of(pid) for k, pid in extra.items()}
        feeder_cpu0 = sum(cpu_of(f.pid) for f in feeders)
        batches0 = sum(int(status(d).get("batches") or 0) for d in daggers)
        heavy_rows0 = sum(int(status(d).get("input_rows") or 0) for d in daggers if d.heavy)
        watch = None
        if args.arrivals == "subscription":
            from bench.influx_watch import ArrivalWatch, bucketer

            watch = ArrivalWatch(bucketer(LIGHT_QUERIES + HEAVY_QUERIES))
            watch.start(stack.url, DB)
        t0 = time.time()
        stolen0 = steal_s()
        arrivals: dict[tuple[str, int], list[tuple[float, int]]] = watch.arrivals if watch is not None else {}
        end_by = t0 + args.seconds + WATERMARK_DELAY_MS / 1000 + 30
        feeder_cpu = 0.0
        next_heavy_poll = 0.0
        heavy_rows: list[tuple[float, int]] = []  # (time, events the heavy dagger had read)
        traces = Traces()
        next_failed_check = 0.0
        while time.time() < end_by and not runner.failed():
            if time.time() >= next_failed_check:  # a dagger that fails mid-step fails the step
                note_failed(step, daggers, [d.name for d in daggers if status(d).get("state") == "failed"])
                next_failed_check = time.time() + 5
            sampler.sample()
            broker_mb = rss_mb(stack.broker.process.pid)
            step.broker_rss_peak_mb = max(step.broker_rss_peak_mb, broker_mb)
            traces.broker.append((time.time(), cpu_of(stack.broker.process.pid), broker_mb))
            if heavy:
                heavy_status = [status(d) for d in daggers if d.heavy]
                heavy_rows.append((time.time(), sum(int(st.get("input_rows") or 0) for st in heavy_status)))
                for st in heavy_status:
                    traces.note_heavy(st, time.time())
            if any(f.poll() is None for f in feeders):
                feeder_cpu = sum(cpu_of(f.pid) for f in feeders) - feeder_cpu0
            if watch is not None:
                time.sleep(args.poll_s)
                continue
            heavy_due = heavy and time.time() >= next_heavy_poll
            counts = {}
            polls = [(LIGHT_QUERIES, "poll_light_s")] + (
                [(HEAVY_QUERIES, "poll_heavy_s")] if heavy_due else []
            )
            for queries, attr in polls:
                asked = time.monotonic()
                with contextlib.suppress(Exception):  # a slow query: try again at the next poll
                    counts.update(poll_points(stack.url, int(t0) - 120, queries))
                setattr(step, attr, getattr(step, attr) + time.monotonic() - asked)
            if heavy_due:
                next_heavy_poll = time.time() + args.heavy_poll_s
            now = time.time()
            for key, n_points in counts.items():
                series = arrivals.setdefault(key, [])
                if not series or series[-1][1] != n_points:
                    series.append((now, n_points))
            time.sleep(args.poll_s)
        t1 = time.time()
        step.steal_cores = (steal_s() - stolen0) / max(t1 - t0, 1e-9)
        in_influx: dict[tuple[str, int], int] = {}
        if watch is not None:
            # what InfluxDB holds, to tell a window the subscription did not forward from one that is not there
            with contextlib.suppress(Exception):
                in_influx = poll_points(stack.url, int(t0) - 120)
            time.sleep(2)  # writes InfluxDB applied before the poll but had not forwarded yet
            watch.stop()
            step.arrivals = f"subscription ({watch.writes:,} writes)"
            step.watch_dropped = watch.dropped
            step.points_unseen = unseen_points(arrivals, in_influx, t0)
        step.batches_per_s = (sum(int(status(d).get("batches") or 0) for d in daggers) - batches0) / (t1 - t0)
        # what the heavy dagger read while its feeder ran (its rate once the feed stops is 0)
        step.heavy_rate = (
            sum(int(status(d).get("input_rows") or 0) for d in daggers if d.heavy) - heavy_rows0
        ) / min(t1 - t0, args.seconds)
        step.note = runner.failed() or ""
        note_failed(step, daggers, [d.name for d in daggers if status(d).get("state") == "failed"])
        step.heavy_offered = args.heavy_rate if heavy else 0.0
        if trimmer is not None:
            trimmer.stop()
            step.trimmed = trimmer.deleted
            if trimmer.error:
                step.note += f" the feed was not trimmed ({trimmer.error})."
        for f in feeders:
            stop(f, 10)
        info = feeder_info(sub / "light.json")
        sent_at = {int(s): float(begin) for s, begin, _ in info.get("sent_at", [])}
        if heavy:
            heavy_info = feeder_info(sub / "heavy.json")
            if heavy_info.get("sent_at") and len(heavy_info["sent_at"]) < args.settle_s + args.seconds:
                step.note += (
                    f" the heavy feeder sent {len(heavy_info['sent_at'])} of "
                    f"{args.settle_s + args.seconds} s."
                )
            heavy_sent = {int(s): float(b) for s, b, _ in heavy_info.get("sent_at", [])}
        since = max(float(info.get("t0", t0)), t0)  # windows and rows after the settling time
        delays = delays_of(arrivals, sent_at, since, [d for d in daggers if not d.heavy])
        if heavy:
            heavy_since = max(float(heavy_info.get("t0", t0)), t0)
            delays.update(delays_of(arrivals, heavy_sent, heavy_since, [d for d in daggers if d.heavy]))
        measure(step, sampler, t0, t1, extra, extra_cpu0, feeder_cpu, delays, daggers)
        if args.slice_s:
            step.slices = slices_of(
                sampler,
                arrivals,
                (sent_at, since),
                (heavy_sent, heavy_since) if heavy else None,
                (since, min(t1, since + args.seconds)),
                args.slice_s,
                daggers,
                heavy_rows,
                traces,
            )
        step.windows_missing = missing_windows(
            arrivals, sent_at, since, [d for d in daggers if not d.heavy and KINDS[d.kind][2]], in_influx
        )
        if heavy:
            step.windows_missing += missing_windows(
                arrivals, heavy_sent, heavy_since, [d for d in daggers if d.heavy], in_influx
            )
        if step.windows_missing:
            step.note += (
                f" {step.windows_missing} windows whose watermark had passed were not in InfluxDB by the"
                f" end (left out of the p99s, which are therefore too low)."
            )
        if step.steal_cores >= 0.02:
            step.note += (
                f" The hypervisor took {step.steal_cores:.2f} cores from this VM over the span (steal)."
            )
        if step.points_unseen:
            step.note += (
                f" {step.points_unseen:,} points reached InfluxDB but not the watch (InfluxDB dropped"
                f" {step.watch_dropped:,} subscription writes); they are left out of the p99s."
            )
        return step
    finally:
        if trimmer is not None:
            trimmer.stop()
        runner.stop()
        if why := drop_topics(stack.bootstrap, [light_topic, heavy_topic]):
            step.note += (
                f" The step's feed topics were not deleted ({why}): later steps run beside its records."
            )
        step.load_after = load_average()


@dataclass
class Traces:
    """What a long run samples besides the daggers' processes, to tell why a slice is slower than the first:
    the broker's CPU seconds and RSS over time, and each heavy micro-batch seen in its ``status.json``."""

    #: (time, the broker's CPU seconds so far, its RSS in MB)
    broker: list[tuple[float, float, float]] = field(default_factory=list)
    #: batch id -> (time first seen, input rows, duration ms, phases ms)
    heavy_batches: dict[int, tuple[float, int, int, dict[str, int]]] = field(default_factory=dict)

    def note_heavy(self, st: dict[str, Any], now: float) -> None:
        """Record the last batch of a heavy dagger's status ``st`` (once per batch id)."""
        batch = st.get("last_batch_id")
        if isinstance(batch, int) and batch >= 0 and batch not in self.heavy_batches:
            self.heavy_batches[batch] = (
                now,
                int(st.get("last_input_rows") or 0),
                int(st.get("batch_duration_ms") or 0),
                {str(k): int(v) for k, v in (st.get("batch_phases_ms") or {}).items()},
            )

    def of_slice(self, a: float, b: float) -> dict[str, Any]:
        """The broker's cores and mean RSS, and the heavy batches' mean duration, rows and main phases, in [a, b]."""
        out: dict[str, Any] = {}
        broker = [x for x in self.broker if a <= x[0] <= b]
        if len(broker) >= 2 and broker[-1][0] > broker[0][0]:
            out["broker_cores"] = round((broker[-1][1] - broker[0][1]) / (broker[-1][0] - broker[0][0]), 3)
            out["broker_rss_mb"] = round(sum(x[2] for x in broker) / len(broker))
        batches = [v for v in self.heavy_batches.values() if a <= v[0] < b and v[1]]
        if batches:
            out["heavy_batch_ms"] = round(sum(v[2] for v in batches) / len(batches))
            out["heavy_rows_per_batch"] = round(sum(v[1] for v in batches) / len(batches))
            out["heavy_phases_ms"] = {
                k: round(sum(v[3].get(k, 0) for v in batches) / len(batches)) for k in HEAVY_PHASES
            }
        return out


#: The micro-batch phases a slice reports the heavy dagger's mean of (Spark's durationMs keys).
HEAVY_PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def slices_of(
    sampler: Sampler,
    arrivals: dict[tuple[str, int], list[tuple[float, int]]],
    light_feed: tuple[dict[int, float], float],
    heavy_feed: tuple[dict[int, float], float] | None,
    span: tuple[float, float],
    slice_s: float,
    daggers: list[Dagger],
    heavy_rows: list[tuple[float, int]],
    traces: Traces | None = None,
) -> list[dict[str, Any]]:
    """Cut the measured ``span`` (start, end: times) into slices of ``slice_s`` seconds (the last one kept
    if at least half as long), each with: the median and worst of the light daggers' p99s over the
    windows made final by events sent in it, the heavy dagger's p99 and events/s read, the mean PSS and
    the daggers' cores (and with ``traces``, :meth:`Traces.of_slice`). A feed is (second -> when it was sent, its
    first measured second)."""
    sent_at, since = light_feed
    light = [d for d in daggers if not d.heavy]
    out: list[dict[str, Any]] = []
    start, end = span
    a = start
    while a + slice_s / 2 <= end:
        b = min(a + slice_s, end)
        delays = delays_of(arrivals, {s: t for s, t in sent_at.items() if a <= t < b}, since, light)
        p99s = sorted(_percentile(v, 0.99) for v in delays.values() if v)
        one: dict[str, Any] = {
            "from_s": round(a - start),
            "to_s": round(b - start),
            "light_points": sum(len(v) for v in delays.values()),
            "light_p99_median_s": round(_percentile(p99s, 0.5), 2) if p99s else None,
            "light_p99_max_s": round(p99s[-1], 2) if p99s else None,
        }
        if heavy_feed is not None:
            heavy_sent, heavy_since = heavy_feed
            found = [
                v
                for vs in delays_of(
                    arrivals,
                    {s: t for s, t in heavy_sent.items() if a <= t < b},
                    heavy_since,
                    [d for d in daggers if d.heavy],
                ).values()
                for v in vs
            ]
            one["heavy_p99_s"] = round(_percentile(found, 0.99), 2) if found else None
            rows = [(t, n) for t, n in heavy_rows if a <= t <= b]
            one["heavy_events_s"] = (
                round((rows[-1][1] - rows[0][1]) / (rows[-1][0] - rows[0][0]))
                if len(rows) >= 2 and rows[-1][0] > rows[0][0]
                else None
            )
        in_slice = [p for t, p, _ in sampler.pss if a <= t <= b]
        one["pss_mb"] = (
            round(sum(sum(p.values()) for p in in_slice) / len(in_slice) / 2**20) if in_slice else None
        )
        one["pss_by_kind_mb"] = (
            {
                k: round(sum(p.get(k, 0) for p in in_slice) / len(in_slice) / 2**20)
                for k in sorted({k for p in in_slice for k in p})
            }
            if in_slice
            else {}
        )
        cpu = [(t, c) for t, _, c, _ in sampler.samples if a <= t <= b]
        one["cores"] = (
            round((cpu[-1][1] - cpu[0][1]) / (cpu[-1][0] - cpu[0][0]), 3)
            if len(cpu) >= 2 and cpu[-1][0] > cpu[0][0]
            else None
        )
        if traces is not None:
            one.update(traces.of_slice(a, b))
        out.append(one)
        a = b
    return out


def measure(
    step: Step,
    sampler: Sampler,
    t0: float,
    t1: float,
    extra: dict[str, int],
    extra_cpu0: dict[str, float],
    feeder_cpu: float,
    delays: dict[str, list[float]],
    daggers: list[Dagger],
) -> None:
    """Fill ``step`` with the memory, CPU and delay figures of the measured span [t0, t1]."""
    samples = sampler.samples
    if len(samples) >= 2:
        totals = [sum(rss.values()) for _, rss, _, _ in samples]
        step.rss_mb = sum(totals) / len(totals) / 2**20
        step.rss_peak_mb = max(totals) / 2**20
        roles = {r for _, rss, _, _ in samples for r in rss}
        step.rss_by_role_mb = {
            r: sum(rss.get(r, 0) for _, rss, _, _ in samples) / len(samples) / 2**20 for r in sorted(roles)
        }
        step.processes = max(c for _, _, _, c in samples)
    if sampler.pss:
        step.pss_mb = sum(sum(p.values()) for _, p, _ in sampler.pss) / len(sampler.pss) / 2**20
        kinds = {k for _, p, _ in sampler.pss for k in p}
        step.pss_by_kind_mb = {
            k: sum(p.get(k, 0) for _, p, _ in sampler.pss) / len(sampler.pss) / 2**20 for k in sorted(kinds)
        }
        step.count_by_kind = {k: max(c.get(k, 0) for _, _, c in sampler.pss) for k in sorted(kinds)}
        step.cores = (samples[-1][2] - samples[0][2]) / (samples[-1][0] - samples[0][0])
        step.cores_by_kind = sampler.cores_by_kind()
        if step.batches_per_s:
            step.core_ms_per_batch = 1000 * step.cores / step.batches_per_s
    span = max(t1 - t0, 1e-9)
    step.broker_cores = (cpu_of(extra["broker"]) - extra_cpu0["broker"]) / span
    step.influx_cores = (cpu_of(extra["influx"]) - extra_cpu0["influx"]) / span
    step.feeder_cores = feeder_cpu / span
    for d in daggers:
        values = delays.get(d.name) or []
        step.points[d.name] = len(values)
        if values:
            step.p99_s[d.name] = round(_percentile(values, 0.99), 2)
    light = [v for d in daggers if not d.heavy and (v := step.p99_s.get(d.name)) is not None]
    if light:
        step.light_p99_max_s = max(light)
        step.light_p99_median_s = _percentile(light, 0.5)
    heavy = [d for d in daggers if d.heavy]
    if heavy:
        step.heavy_p99_s = step.p99_s.get(heavy[0].name)
    missing = [d.name for d in daggers if not step.p99_s.get(d.name)]
    if missing:
        step.note += f" no measured window from {len(missing)} daggers ({', '.join(missing[:4])}…)."
    step.ran = True


# --------------------------------------------------------------------------- report


def runs_summary(steps: list[Step]) -> list[str]:
    """One line per mode and N run more than once (``--runs``): the median and the worst (highest) of the light
    daggers' worst p99, the heavy dagger's p99 and the mean PSS, and the heavy dagger's events/s (worst: lowest)."""
    groups: dict[tuple[str, int], list[Step]] = {}
    for step in steps:
        if step.ran:
            groups.setdefault((step.mode, step.n), []).append(step)
    lines = []
    for (mode, n), group in groups.items():
        if len(group) < 2:
            continue
        parts = []
        for what, values, low_worst in (
            ("light p99 max", [s.light_p99_max_s for s in group], False),
            ("heavy p99", [s.heavy_p99_s for s in group], False),
            ("heavy events/s", [s.heavy_rate for s in group], True),
            ("PSS MB", [s.pss_mb for s in group], False),
        ):
            known = [float("inf") if v is None else float(v) for v in values]
            worst = min(known) if low_worst else max(known)
            parts.append(f"{what} median {statistics.median(known):,.1f} worst {worst:,.1f}")
        lines.append(f"{mode} N={n}, {len(group)} runs: " + "; ".join(parts))
    return lines


def marginal_mb(steps: list[Step], mode: str, attr: str = "rss_mb") -> float | None:
    """Least-squares slope of total RSS (or ``pss_mb``) over N for ``mode`` (MB per extra light dagger)."""
    pts = [(float(s.n), float(getattr(s, attr))) for s in steps if s.mode == mode and s.ran]
    if len(pts) < 2:
        return None
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    var = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / var if var else None


def table(steps: list[Step]) -> str:
    head = [
        "mode",
        "N light",
        "daggers",
        "processes",
        "RSS total (MB)",
        "RSS peak (MB)",
        "PSS total (MB)",
        "cores (daggers)",
        "light p99 median / max (s)",
        "heavy p99 (s)",
        "heavy events/s",
        "warm after (s)",
        "load avg before → after",
        "note",
    ]
    rows = []
    for s in steps:
        if not s.ran:
            rows.append([s.mode, str(s.n), str(s.daggers), *["-"] * 10, s.note.strip()])
            continue
        lat = (
            f"{s.light_p99_median_s:.1f} / {s.light_p99_max_s:.1f}" if s.light_p99_max_s is not None else "-"
        )
        rows.append(
            [
                s.mode,
                str(s.n),
                str(s.daggers),
                str(s.processes),
                f"{s.rss_mb:,.0f}",
                f"{s.rss_peak_mb:,.0f}",
                f"{s.pss_mb:,.0f}" if s.pss_mb else "-",
                f"{s.cores:.2f}",
                lat,
                f"{s.heavy_p99_s:.1f}" if s.heavy_p99_s is not None else "-",
                f"{s.heavy_rate:,.0f}",
                f"{s.start_s:.0f}",
                f"{s.load_before[0]:.1f} → {s.load_after[0]:.1f}",
                s.note.strip(),
            ]
        )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def mb(value: float | None) -> str:
    return f"{value:,.0f} MB" if value is not None else "-"


def kinds_table(steps: list[Step]) -> str:
    """Per step, the PSS of each process kind: where the memory of the daggers is."""
    kinds = sorted({k for s in steps for k in s.pss_by_kind_mb})
    lines = ["| mode | N light | " + " | ".join(kinds) + " |", "|" + "---|" * (len(kinds) + 2)]
    for s in steps:
        if s.pss_by_kind_mb:
            cells = [
                f"{s.pss_by_kind_mb[k]:,.0f} ({s.count_by_kind.get(k, 0)})" if k in s.pss_by_kind_mb else "-"
                for k in kinds
            ]
            lines.append(f"| {s.mode} | {s.n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def slices_table(step: Step) -> str:
    """A step's slices (``--slice-s``): one row each."""
    head = [
        "from → to (s)",
        "light p99 median / max (s)",
        "light points",
        "heavy p99 (s)",
        "heavy events/s",
        "PSS (MB)",
        "cores (daggers)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def num(value: Any, fmt: str) -> str:
        return format(value, fmt) if value is not None else "-"

    for c in step.slices:
        lines.append(
            f"| {c['from_s']} → {c['to_s']} | {num(c['light_p99_median_s'], '.1f')} / "
            f"{num(c['light_p99_max_s'], '.1f')} | {c['light_points']:,} | {num(c.get('heavy_p99_s'), '.1f')} | "
            f"{num(c.get('heavy_events_s'), ',')} | {num(c['pss_mb'], ',')} | {num(c['cores'], '.2f')} |"
        )
    kinds = sorted({k for c in step.slices for k in c.get("pss_by_kind_mb") or {}})
    if kinds:
        lines += [
            "",
            "| from → to (s) | " + " | ".join(f"PSS {k} (MB)" for k in kinds) + " |",
            "|" + "---|" * (len(kinds) + 1),
        ]
        for c in step.slices:
            lines.append(
                f"| {c['from_s']} → {c['to_s']} | "
                + " | ".join(num((c.get("pss_by_kind_mb") or {}).get(k), ",") for k in kinds)
                + " |"
            )
    if any("broker_cores" in c or "heavy_batch_ms" in c for c in step.slices):
        head = [
            "from → to (s)",
            "broker cores",
            "broker RSS (MB)",
            "heavy batches: ms / rows",
            *(f"{k} ms" for k in HEAVY_PHASES),
        ]
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in step.slices:
            phases = c.get("heavy_phases_ms") or {}
            lines.append(
                f"| {c['from_s']} → {c['to_s']} | {num(c.get('broker_cores'), '.2f')} | "
                f"{num(c.get('broker_rss_mb'), ',')} | {num(c.get('heavy_batch_ms'), ',')} / "
                f"{num(c.get('heavy_rows_per_batch'), ',')} | "
                + " | ".join(num(phases.get(k), ",") for k in HEAVY_PHASES)
                + " |"
            )
    return "\n".join(lines)


def _save(fig: Any, axes: tuple[Any, ...], path: Path) -> None:
    """Grid and legend on each of ``axes``, then write ``fig`` to ``path`` as PNG and close it."""
    import matplotlib.pyplot as plt

    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_slices(step: Step, path: Path) -> None:
    """Plot a long run's slices (``--slice-s``) over time: PSS, the p99s, and the heavy dagger's events/s."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mid = [(c["from_s"] + c["to_s"]) / 120 for c in step.slices]  # minutes

    def series(key: str) -> tuple[list[float], list[float]]:
        pts = [(m, c[key]) for m, c in zip(mid, step.slices, strict=True) if c.get(key) is not None]
        return [m for m, _ in pts], [v for _, v in pts]

    fig, (mem, lat, rate) = plt.subplots(1, 3, figsize=(14, 4.2))
    xs, pss = series("pss_mb")
    mem.plot(xs, [v / 1024 for v in pss], "o-", color="tab:green", label=f"{step.mode} N = {step.n} (PSS)")
    mem.axhline(8, color="grey", linestyle=":", label="goal at N=100: 8 GB")
    mem.set(ylim=(0, 9), ylabel="memory, all processes (GB)", title="Memory")
    for key, style, what in (
        ("light_p99_median_s", "o-", "light daggers' median"),
        ("light_p99_max_s", "o:", "worst light dagger"),
        ("heavy_p99_s", "s--", "heavy"),
    ):
        lat.plot(*series(key), style, label=what)
    lat.axhline(10, color="grey", linestyle=":", label="goal: p99 ≤ 10 s")
    lat.set(ylim=(0, None), ylabel="p99 watermark → InfluxDB (s)", title="Latency")
    xs, heavy = series("heavy_events_s")
    rate.plot(xs, [v / 1000 for v in heavy], "s-", color="tab:red", label="heavy dagger read")
    rate.set(
        ylim=(0, max(heavy, default=1000) / 1000 * 1.25), ylabel="thousand events/s", title="Heavy dagger"
    )
    for ax in (mem, lat, rate):
        ax.set(xlabel="minutes (middle of each slice)")
    _save(fig, (mem, lat, rate), path)


def plot(steps: list[Step], path: Path) -> None:
    """Plot memory and p99 over N; a run of one step in slices (``--slice-s``) over time instead."""
    ran = [s for s in steps if s.ran]
    if len(ran) == 1 and ran[0].slices:
        plot_slices(ran[0], path)
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (mem, lat) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, colour in (("shared", "tab:blue"), ("fused", "tab:green"), ("dedicated", "tab:orange")):
        ran = sorted((s for s in steps if s.mode == mode and s.ran), key=lambda s: s.n)
        if not ran:
            continue
        mem.plot(
            [s.n for s in ran], [s.rss_mb / 1024 for s in ran], "o:", color=colour, label=f"{mode} (RSS)"
        )
        pss = [(s.n, s.pss_mb / 1024) for s in ran if s.pss_mb]
        if pss:
            mem.plot([n for n, _ in pss], [v for _, v in pss], "o-", color=colour, label=f"{mode} (PSS)")
        for attr, style, what in (
            ("light_p99_max_s", "o-", "worst light dagger"),
            ("heavy_p99_s", "s--", "heavy"),
        ):
            pts = [
                (s.n, getattr(s, attr)) for s in ran if getattr(s, attr) is not None
            ]  # no window: no point
            if pts:
                lat.plot(
                    [n for n, _ in pts], [v for _, v in pts], style, color=colour, label=f"{mode}: {what}"
                )
    mem.axhline(8, color="grey", linestyle=":", label="goal at N=100: 8 GB")
    mem.set(xlabel="light daggers (+1 heavy)", ylabel="memory, all processes (GB)", title="Memory")
    lat.axhline(10, color="grey", linestyle=":", label="goal: p99 ≤ 10 s")
    lat.set(xlabel="light daggers (+1 heavy)", ylabel="p99 watermark → InfluxDB (s)", title="Latency")
    _save(fig, (mem, lat), path)


def marginal_line(steps: list[Step]) -> str:
    """Each mode's slope of total RSS and of total PSS over N ("-" where fewer than two steps ran)."""
    return ", ".join(
        f"{mode} {mb(marginal_mb(steps, mode))} / {mb(marginal_mb(steps, mode, 'pss_mb'))}"
        for mode in ("fused", "shared", "dedicated")
        if any(s.mode == mode for s in steps)
    )


def record(steps: list[Step], args: argparse.Namespace, stamp: str, plot_path: Path, argv: list[str]) -> None:
    ratio = ""
    by = {(s.mode, s.n): s for s in steps if s.ran}
    common = sorted(n for m, n in by if m == "shared" and ("dedicated", n) in by)
    if common:
        n = common[-1]
        ratio = (
            f"At N = {n}: dedicated takes {by[('dedicated', n)].rss_mb / by[('shared', n)].rss_mb:.1f}× the "
            f"memory of shared ({by[('dedicated', n)].rss_mb:,.0f} MB against {by[('shared', n)].rss_mb:,.0f} MB)."
        )
    text = f"""

## Dagger density: `python bench/bench_density.py {" ".join(argv)}`

- Date: {datetime.now(UTC).strftime("%a %b %d %H:%M UTC %Y")} (run started {stamp})
- Machine: {machine()} (the 1-minute load average before and after each step is in the table)
- Light daggers read {args.light_rate:,.0f} events/s each (one topic, all of it; {args.light_parallelism} shuffle
  partition(s)); the heavy dagger {args.heavy_rate:,.0f} events/s (2 shuffle partitions); every trigger
  {args.trigger_s:g} s; {args.seconds} s of feed per step. Memory: mean RSS of every process of the
  daggers over the feed (drivers, JVMs, Python workers; broker, InfluxDB and feeders apart). p99: per dagger, from
  the send of the event that moved the watermark past a window's end to its points in InfluxDB.
  Every figure: `bench/results/density-{stamp}.json`.

{table(steps)}

Marginal memory per light dagger (slope over N; RSS / PSS): {marginal_line(steps)}. {ratio}

PSS by process kind (MB, mean; the most processes of the kind at once in brackets):

{kinds_table(steps)}

![density]({PLOT_LINK}{plot_path.name})
"""
    for s in steps:
        if s.slices:
            text += f"\nOver time, {s.mode} N = {s.n} (slices of the measured span):\n\n{slices_table(s)}\n"
    text += (
        "\nEach step's feed topics were deleted at its end; the broker's RSS as each step began: "
        + ", ".join(f"{s.mode} N = {s.n}: {s.broker_rss_start_mb:,.0f} MB" for s in steps if s.ran)
        + ".\n"
    )
    if args.trim_s:
        text += (
            "\nThe feed's records were deleted once "
            + f"{args.trim_s:g} s old (`--trim-s`, bench/trim.py): "
            + ", ".join(
                f"{s.mode} N = {s.n}: {s.trimmed:,} records deleted, the broker's RSS at most {s.broker_rss_peak_mb:,.0f} MB"
                for s in steps
                if s.ran
            )
            + ".\n"
        )
    with HISTORY.open("a") as fh:
        fh.write(text)


#: The shortest ``--trim-s``: a light dagger reads a window's events at its close (a minute, plus the
#: watermark delay, plus a trigger): with 20 s, its records were gone and it wrote no window.
MIN_TRIM_S = 120.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", default="1,10,50,100", help="light dagger counts, comma separated")
    ap.add_argument(
        "--modes",
        default="shared,dedicated",
        help="of shared, fused (light daggers with isolation: fused, in one shared host), dedicated",
    )
    ap.add_argument("--seconds", type=int, default=180, help="how long the feeders run per step")
    ap.add_argument(
        "--settle-s",
        type=int,
        default=180,
        help="seconds the feeders run before the measurement starts (the JIT compiles the queries' code: "
        "a long-lived shared host is measured warm)",
    )
    ap.add_argument("--light-rate", type=float, default=100.0)
    ap.add_argument(
        "--light-parallelism",
        type=int,
        default=1,
        help="shuffle partitions of a light dagger (the heavy one has 2)",
    )
    ap.add_argument(
        "--light-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a spark.sql.* setting of every light dagger (repeatable)",
    )
    ap.add_argument(
        "--light-spec",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a top-level spec setting of every light dagger, e.g. read_at_window_close=true",
    )
    ap.add_argument(
        "--kinds", default=",".join(DEFAULT_KINDS), help=f"light dagger kinds taken in turn, of {list(KINDS)}"
    )
    ap.add_argument(
        "--host-master",
        default="local[*]",
        help="the shared host's Spark master: local[N] runs N tasks at once; local[*] (the host's "
        "default) one more than the cores",
    )
    ap.add_argument("--trigger-s", type=float, default=1.0, help="every dagger's trigger interval")
    ap.add_argument("--heavy-rate", type=float, default=50_000.0, help="0: no heavy dagger")
    ap.add_argument(
        "--mem-cap-gb", type=float, default=12.0, help="largest projected RSS of a dedicated step"
    )
    ap.add_argument("--start-timeout", type=float, default=600.0)
    ap.add_argument("--start-parallel", type=int, default=2, help="dedicated daggers starting at once")
    ap.add_argument(
        "--arrivals",
        choices=("subscription", "poll"),
        default="subscription",
        help="how points are seen to arrive: every write forwarded by an InfluxDB subscription "
        "(bench/influx_watch.py; costs InfluxDB next to nothing), or counted by polling InfluxDB "
        "every --poll-s (its queries took it ~0.6 cores with 100 daggers)",
    )
    ap.add_argument(
        "--poll-s", type=float, default=1.0, help="how often the light daggers' points are counted"
    )
    ap.add_argument(
        "--heavy-poll-s",
        type=float,
        default=5.0,
        help="how often the heavy dagger's points are counted (~44,000 series a window)",
    )
    ap.add_argument(
        "--broker",
        default="tansu",
        help="tansu or noida. Both keep every record in memory: at the heavy dagger's 50,000 events/s "
        "noida-db held 7.9 GB (anonymous RSS) after 16 minutes, tansu ~77 bytes a record "
        "(~14 GB an hour); for a run of an hour, use noida with --trim-s",
    )
    ap.add_argument(
        "--trim-s",
        type=float,
        default=0.0,
        help="delete the feed's records once they are this many seconds old and every dagger's checkpoint "
        "has committed them (DeleteRecords, every 30 s from the end of the warm-up; bench/trim.py): "
        "noida-db's memory stays bounded (tansu does not delete records); 0: keep them all",
    )
    ap.add_argument(
        "--slice-s",
        type=float,
        default=0.0,
        help="also report the measured span in slices of this many seconds (a long run: does memory "
        "grow, does latency drift?); 0: no slices",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="run every step this many times (in turn) and report the median and the worst of each figure; "
        "every run must pass",
    )
    ap.add_argument(
        "--mem-goal-mb",
        type=float,
        default=None,
        help="a step fails when its mean PSS (all the daggers' processes) is over this (default: only "
        "--mem-cap-gb)",
    )
    ap.add_argument(
        "--heavy-goal-s",
        type=float,
        default=verdict.HEAVY_P99_GOAL_S,
        help="a step fails when the heavy dagger's p99 is over this many seconds",
    )
    ap.add_argument("--record", action="store_true")
    ap.add_argument(
        "--keep", action="store_true", help="keep the temporary folder (logs, specs, checkpoints)"
    )
    args = ap.parse_args(argv)
    if 0 < args.trim_s < MIN_TRIM_S:
        ap.error(
            f"--trim-s {args.trim_s:g}: under {MIN_TRIM_S:g} s it deletes records the light daggers have not "
            "read yet (they read a window's events when it closes: a minute and the watermark delay after "
            "the first)"
        )
    unknown = sorted(set(args.kinds.split(",")) - set(KINDS))
    if unknown:
        ap.error(f"--kinds: unknown kind(s) {', '.join(unknown)}; known: {', '.join(KINDS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    counts = [int(x) for x in args.n.split(",")]
    modes = args.modes.split(",")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H%MZ")
    steps: list[Step] = []
    folder = Path(tempfile.mkdtemp(prefix="daggers-density-"))
    per_dagger_gb = DEDICATED_GUESS_GB
    out = ROOT / "bench" / "results" / f"density-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        out.write_text(
            json.dumps(
                {
                    "args": vars(args),
                    "machine": machine(),
                    "steps": [dataclasses.asdict(s) for s in steps],
                    "marginal_mb": {m: marginal_mb(steps, m) for m in modes},
                    "marginal_pss_mb": {m: marginal_mb(steps, m, "pss_mb") for m in modes},
                    "summary": runs_summary(steps),
                },
                indent=1,
            )
        )

    try:
        with local_stack(folder / "stack", args.broker) as stack:
            from job.stack.influx import create_database

            create_database(stack.url, DB)
            for round_ in range(1, args.runs + 1):
                for mode, n in [(m, c) for m in modes for c in counts]:
                    step = run_step(mode, n, stack, folder, args, per_dagger_gb)
                    step.run = round_
                    steps.append(step)
                    which = f" (run {round_} of {args.runs})" if args.runs > 1 else ""
                    print(
                        f"  {mode} N={n}{which}: RSS {step.rss_mb:,.0f} MB, PSS {step.pss_mb:,.0f} MB "
                        f"{ {k: round(v) for k, v in step.pss_by_kind_mb.items()} }, {step.cores:.2f} cores "
                        f"{step.cores_by_kind}, {step.batches_per_s:.1f} batches/s, "
                        f"{step.core_ms_per_batch:.0f} core-ms/batch, light p99 max "
                        f"{step.light_p99_max_s}, heavy p99 {step.heavy_p99_s}; broker {step.broker_cores:.2f}, "
                        f"InfluxDB {step.influx_cores:.2f} cores; arrivals by {step.arrivals}"
                        + (
                            f", whose queries took {step.poll_light_s:.0f} s (light) + {step.poll_heavy_s:.0f} s "
                            "(heavy)"
                            if step.arrivals == "poll"
                            else ""
                        )
                        + f" {step.note}",
                        flush=True,
                    )
                    if mode == "dedicated" and step.ran and step.daggers:
                        per_dagger_gb = max(per_dagger_gb, step.rss_peak_mb / 1024 / step.daggers)
                    save()
    except KeyboardInterrupt:
        print("interrupted: recording the steps that ran", flush=True)
    finally:
        stop_all()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(table(steps))
    for line in runs_summary(steps):
        print(line)
    save()
    if args.record and steps:
        plot_path = PLOTS / f"density-{stamp}.png"
        plot(steps, plot_path)
        record(steps, args, stamp, plot_path, argv)
    print(f"results: {out}")
    failed = verdict.density_failures(
        [dataclasses.asdict(s) for s in steps],
        mem_cap_mb=args.mem_cap_gb * 1024,
        mem_goal_mb=args.mem_goal_mb,
        heavy_goal_s=args.heavy_goal_s,
    )
    if failed:
        print("BENCHMARK FAILED: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
