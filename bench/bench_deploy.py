"""Time from Deploy to the first point in InfluxDB: through the control plane vs ``daggers run`` by hand.

Usage::

    python bench/bench_deploy.py [--runs 3] [--events 20000] [--isolation shared|fused|dedicated] [--no-standby]
                                 [--no-append]

It starts a tansu broker and influxd on OS-chosen ports, produces ``--events`` bookings (five
minutes of event time, then one event 15 minutes later so every window closes at once), and then,
alternating, ``--runs`` times each:

* **control plane**: a ``daggers controller`` process is already running for the cluster (with its warm
  standby process unless ``--no-standby``; every measurement waits until the standby is ready, so
  nothing warms up in the background while either path is timed); the clock
  starts at ``ControlPlane.create(..., deploy=True)`` and stops when the measurement's first point is
  in InfluxDB (polled every 0.1 s). The controller's own steps are recorded too (process started,
  query started). With ``--isolation shared`` (the default, as in a spec that names none) the daggers
  are queries of the cluster's shared application: one untimed dagger is deployed first, which starts
  that application (its time to the first point is reported apart) and keeps running, so each timed
  run deploys into a running application. With ``--isolation fused`` every dagger (the resident one, the
  timed ones and the peer) is a pass-through of the bookings and a feeder adds live ones (10 a second): a
  timed dagger joins the resident's group, whose next generation starts where the last one stopped (a
  fused dagger that joins sees no history: the first point is the first live booking it writes);
* **by hand (peer)**: the clock starts when ``python -m job.cli run SPEC`` is launched and stops at
  the first point, the same way.

Each run is a fresh dagger (new name, checkpoint and measurement) and a fresh Spark application.
The result is printed and appended to bench/results/history.md with the command, date, machine and load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.procstats import tree  # noqa: E402
from bench.report import publish, section_header  # noqa: E402
from job.control import ControlPlane, Registry, bootstrap_admin  # noqa: E402
from job.produce.generator import generate  # noqa: E402
from job.produce.producer import produce  # noqa: E402
from job.stack.broker import TansuBroker, create_topic  # noqa: E402
from job.stack.influx import InfluxServer, create_database  # noqa: E402
from job.stack.ports import free_port, free_ports  # noqa: E402

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
PASS_SQL = """SELECT city_id AS tag_city_id, order_number AS tag_order_number, fare_idr AS fare,
         rowtime AS window_timestamp
  FROM data_stream"""
SQL = """SELECT city_id AS tag_city_id,
         count(1) AS bookings,
         TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
  FROM data_stream
  GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""


def spec_text(
    name: str,
    topic: str,
    bootstrap: str,
    influx: str,
    db: str,
    checkpoint: Path | None,
    isolation: str = "dedicated",
) -> str:
    """Return a bookings-per-city spec writing to measurement ``name`` (underscored)."""
    ckpt = f"checkpoint_dir: {checkpoint}\n" if checkpoint else ""
    sql = PASS_SQL if isolation == "fused" else SQL
    return f"""name: {name}
streams:
  - table: data_stream
    topics: [{topic}]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: {bootstrap}
    group: dagger-{name}
    start_from: earliest
sql: |
  {sql}
watermark_delay_ms: 10000
parallelism: 2
trigger_interval_s: 1
isolation: {isolation}
{ckpt}sink:
  type: influx
  url: {influx}
  database: {db}
  measurement: {name.replace("-", "_")}
"""


def first_point(influx: str, db: str, measurement: str, started: float, timeout: float = 600.0) -> float:
    """Poll InfluxDB until ``measurement`` has a point; return seconds since ``started`` (monotonic)."""
    deadline = started + timeout
    while time.monotonic() < deadline:
        try:
            body = requests.get(
                f"{influx}/query", params={"db": db, "q": f'SELECT * FROM "{measurement}" LIMIT 1'}, timeout=5
            ).json()
            if any(r.get("series") for r in body.get("results", [])):
                return time.monotonic() - started
        except (requests.RequestException, ValueError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"no point in {measurement} after {timeout:.0f} s")


def fill_topic(bootstrap: str, topic: str, events: int) -> None:
    """Create ``topic`` (2 partitions) with ``events`` bookings over five minutes of event time, then one
    15 minutes later, so that every window closes at once."""
    create_topic(bootstrap, topic, 2)
    bookings = generate("booking", events, seed=3, start=T0, duration_s=300)
    closer = generate("booking", 1, seed=4, start=T0 + timedelta(minutes=15), duration_s=1)
    produce(bootstrap, topic, [bookings, closer], progress=False)


class LiveFeed:
    """Bookings at the wall clock's time, ``per_s`` a second, from a thread (``--isolation fused``)."""

    def __init__(self, bootstrap: str, topic: str, per_s: int = 10) -> None:
        import threading

        self.bootstrap, self.topic, self.per_s = bootstrap, topic, per_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        second = 0
        while not self._stop.is_set():
            batch = generate(
                "booking",
                self.per_s,
                seed=100 + second,
                start=datetime.now(UTC),
                duration_s=1,
                first_index=1_000_000 + second * self.per_s,
            )
            produce(self.bootstrap, self.topic, batch, progress=False)
            second += 1
            self._stop.wait(1.0)


def by_hand(
    root: Path,
    name: str,
    topic: str,
    bootstrap: str,
    influx: str,
    db: str,
    env: dict[str, str] | None = None,
    isolation: str = "dedicated",
) -> tuple[float, float]:
    """Run a new dagger ``name`` with ``python -m job.cli run SPEC`` (``env``: its environment); return the
    seconds from the launch to its first point in InfluxDB and the CPU its processes used by then (core-s)."""
    spec = root / f"{name}.yaml"
    spec.write_text(
        spec_text(
            name,
            topic,
            bootstrap,
            influx,
            db,
            root / "hand" / name,
            "dedicated" if isolation != "fused" else "fused",
        )
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "job.cli", "run", str(spec), "--state-dir", str(root / "hand")],
        stdout=(root / f"{name}.log").open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=REPO,
        env=env,
    )
    try:
        seconds = first_point(influx, db, name.replace("-", "_"), started)
        cpu = sum(p.cpu_s for p in tree(proc.pid))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    return seconds, cpu


def wait(what: str, check: Callable[[], bool], timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="Runs of each path (alternating).")
    parser.add_argument("--events", type=int, default=20_000, help="Bookings in the topic.")
    parser.add_argument(
        "--no-append", action="store_true", help="Do not append the result to bench/results/history.md."
    )
    parser.add_argument(
        "--isolation",
        choices=("shared", "fused", "dedicated"),
        default="shared",
        help="How the control plane runs the daggers (the peer is always a process of its own).",
    )
    parser.add_argument(
        "--no-standby",
        action="store_true",
        help="Run the controller without its warm standby process (every deploy starts Spark).",
    )
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-deploy-"))
    load_before = os.getloadavg()
    broker = TansuBroker(root / "broker", free_port())
    influx = InfluxServer(root / "influx", *free_ports(2))
    controller: subprocess.Popen[bytes] | None = None
    feed: LiveFeed | None = None
    results: dict[str, list[float]] = {"control plane": [], "by hand": []}
    steps: list[tuple[float, float, float]] = []
    try:
        broker.start()
        influx.start()
        topic, db = "bench-bookings", "bench"
        create_database(influx.url, db)
        fill_topic(broker.bootstrap, topic, args.events)
        if args.isolation == "fused":
            feed = LiveFeed(broker.bootstrap, topic)
            feed.start()

        url = f"sqlite:///{root / 'registry.db'}"
        registry = Registry(url)
        bootstrap_admin(registry, "root")
        admin = ControlPlane(registry, "root")
        admin.add_team("bench")
        admin.add_user("operator")
        admin.set_member("bench", "operator", "editor")
        admin.add_datacentre("local")
        admin.add_cluster(
            "bench",
            team="bench",
            datacentre="local",
            spark_master="local[2]",
            kafka_bootstrap=broker.bootstrap,
            influx_url=influx.url,
        )
        plane = ControlPlane(registry, "operator")
        controller = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "job.cli",
                "controller",
                "--cluster",
                "bench",
                "--registry",
                url,
                "--state-dir",
                str(root / "state"),
                "--poll",
                "0.5",
                "--stop-daggers-on-exit",
                "--no-standby" if args.no_standby else "--standby",
            ],
            stdout=(root / "controller.log").open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )
        wait("the controller's heartbeat", lambda: plane.cluster("bench").controller_alive(time.time()), 120)

        standby = root / "state" / "controller" / "bench" / "standby"

        def quiet() -> None:
            """Start each measurement with nothing warming up in the background (fair to both paths)."""
            if not args.no_standby:
                wait("the controller's standby", lambda: any(standby.glob("*.ready")), 300)

        cold: float | None = None
        if args.isolation != "dedicated":  # start the shared application with a dagger that stays
            started = time.monotonic()
            plane.create(
                "bench",
                spec_text(
                    "resident", topic, "${DAGGERS_BOOTSTRAP}", "${DAGGERS_INFLUX}", db, None, args.isolation
                ),
                deploy=True,
            )
            cold = first_point(influx.url, db, "resident", started)
            print(
                f"shared application started: first point of the resident dagger after {cold:.1f} s",
                flush=True,
            )
        for run in range(args.runs):
            quiet()
            name = f"via-control-{run}"
            started = time.monotonic()
            wall = time.time()
            plane.create(
                "bench",
                spec_text(name, topic, "${DAGGERS_BOOTSTRAP}", "${DAGGERS_INFLUX}", db, None, args.isolation),
                deploy=True,
            )
            seconds = first_point(influx.url, db, name.replace("-", "_"), started)
            results["control plane"].append(seconds)
            view = plane.dagger(name)
            running_at = next((s.at for s in plane.samples(name)), None)
            steps.append(((view.started_at or wall) - wall, (running_at or wall) - wall, seconds))
            print(
                f"control plane run {run + 1}: first point after {seconds:.1f} s "
                f"(process started after {steps[-1][0]:.1f} s)",
                flush=True,
            )
            plane.stop(name)
            wait("the dagger to stop", lambda n=name: plane.dagger(n).actual_state == "stopped", 120)

            quiet()
            seconds, _ = by_hand(
                root, f"by-hand-{run}", topic, broker.bootstrap, influx.url, db, isolation=args.isolation
            )
            results["by hand"].append(seconds)
            print(f"by hand run {run + 1}: first point after {seconds:.1f} s", flush=True)
        registry.close()
    finally:
        if feed is not None:
            feed.stop()
        if controller is not None:
            controller.send_signal(signal.SIGTERM)
            try:
                controller.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(controller.pid, signal.SIGKILL)
        influx.stop()
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()

    if args.isolation == "fused":
        label = "into a running fused group"
        mode = (
            "fused (`isolation: fused`) into the group of one resident dagger of the cluster's shared application "
            f"(first point after {cold:.1f} s, not counted); every dagger here, the peer's too, is a pass-through "
            "of the bookings, and 10 live bookings a second are added while it runs (a fused dagger that joins "
            "a group sees no history)"
        )
    elif args.isolation == "shared":
        label = "into the running shared application"
        mode = (
            "as queries of the cluster's shared application (`isolation: shared`), already running one "
            f"resident dagger (it started the application: first point after {cold:.1f} s, not counted)"
        )
    else:
        label = "dedicated, " + ("no standby" if args.no_standby else "warm standby")
        mode = "each dagger its own process and Spark application (`isolation: dedicated`), " + (
            "without the standby (every deploy starts Spark)"
            if args.no_standby
            else "with its warm standby process"
        )
    med = {k: statistics.median(v) for k, v in results.items()}
    ratio = med["control plane"] / med["by hand"]
    flags = f"{'' if args.isolation == 'shared' else ' --isolation ' + args.isolation}{' --no-standby' if args.no_standby else ''}"
    lines = [
        *section_header(
            f"Deploy to the first point in InfluxDB: control plane ({label}) vs `daggers run` by hand",
            f".venv/bin/python bench/bench_deploy.py --runs {args.runs} --events {args.events}{flags}",
            load_before,
            load_after,
        ),
        f"- {args.events:,} bookings on a 2-partition tansu topic, influxd 1.6, Spark local[2]; "
        f"{'a pass-through' if args.isolation == 'fused' else 'a windowed count per city'}; every run a new dagger, checkpoint and measurement. "
        f"Control plane: the clock starts at `ControlPlane.create(..., deploy=True)`, with `daggers controller "
        f"--poll 0.5` already running, {mode}. Each measurement starts with nothing warming up in the "
        "background. Peer: the clock starts when `python -m job.cli run SPEC` (a Spark application of its own) "
        "is launched. Both stop at the first point a query to InfluxDB returns (polled every 0.1 s).",
        "",
        "| path | runs (s) | median (s) | ratio to peer |",
        "|---|---|---:|---:|",
        f"| control plane, {label} (deploy → first point) | "
        f"{', '.join(f'{s:.1f}' for s in results['control plane'])} | {med['control plane']:.1f} | {ratio:.2f}x |",
        f"| `daggers run` by hand (peer) | {', '.join(f'{s:.1f}' for s in results['by hand'])} | "
        f"{med['by hand']:.1f} | 1.00x |",
        "",
        "Control-plane runs, seconds after Deploy: the controller started the dagger / the first progress "
        "sample / the first point: " + "; ".join(f"{a:.1f} / {b:.1f} / {c:.1f}" for a, b, c in steps) + ".",
        (
            "Goal (issue 17): deploy into a running shared application → first point ≤ 5 s median. "
            if args.isolation != "dedicated"
            else "Goal: under 30 s (the original platform said 2 minutes). "
        )
        + f"Median here: {med['control plane']:.1f} s.",
    ]
    publish(lines, append=not args.no_append)
    return 0


if __name__ == "__main__":
    sys.exit(main())
