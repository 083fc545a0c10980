"""A dagger's start with the JVM's class archive (``daggers jvm-archive``) against without it (the peer).

Usage::

    python bench/bench_jvm_archive.py [--runs 4] [--events 20000] [--no-append]

Starts a tansu broker and influxd on OS-chosen ports, produces ``--events`` bookings (five minutes of event
time, then one event 15 minutes later so every window closes at once), and then, alternating, ``--runs``
times each: ``python -m job.cli run SPEC`` (a new dagger, checkpoint and measurement each time) with the
archive, and with ``DAGGERS_JVM_ARCHIVE=off``. For each: seconds from launch to the first point in InfluxDB
(polled every 0.1 s), and the CPU its processes (driver, JVM, Python workers) used until then. The archive
is written first when missing. The result is appended to BENCHMARKS.md.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_deploy import T0, first_point, machine, spec_text  # noqa: E402
from bench.procstats import tree  # noqa: E402
from job import jvm_archive  # noqa: E402
from job.produce.generator import generate  # noqa: E402
from job.produce.producer import produce  # noqa: E402
from job.stack.broker import TansuBroker, create_topic  # noqa: E402
from job.stack.influx import InfluxServer, create_database  # noqa: E402
from job.stack.ports import free_port, free_ports  # noqa: E402

PATHS = ("with the archive", "without (peer)")


def one_run(root: Path, name: str, bootstrap: str, influx: str, db: str, archive: bool) -> tuple[float, float]:
    """Run a new dagger by hand; return (seconds to its first point, core-seconds its processes used by then)."""
    spec = root / f"{name}.yaml"
    spec.write_text(spec_text(name, "bench-bookings", bootstrap, influx, db, root / "hand" / name))
    env = dict(os.environ)
    if not archive:
        env[jvm_archive.ARCHIVE_ENV] = "off"
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "job.cli", "run", str(spec), "--state-dir", str(root / "hand")],
                            stdout=(root / f"{name}.log").open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=REPO, env=env)
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4, help="Runs of each path (alternating).")
    parser.add_argument("--events", type=int, default=20_000, help="Bookings in the topic.")
    parser.add_argument("--no-append", action="store_true", help="Do not append the result to BENCHMARKS.md.")
    args = parser.parse_args()

    path = jvm_archive.archive_path()
    if path is None:
        print("DAGGERS_JVM_ARCHIVE=off: nothing to compare", file=sys.stderr)
        return 2
    if not path.is_file():
        print(f"writing the archive {path} first", flush=True)
        jvm_archive.build(path)
    root = Path(tempfile.mkdtemp(prefix="bench-jvm-archive-"))
    load_before = os.getloadavg()
    broker = TansuBroker(root / "broker", free_port())
    influx = InfluxServer(root / "influx", *free_ports(2))
    results: dict[str, list[tuple[float, float]]] = {p: [] for p in PATHS}
    try:
        broker.start()
        influx.start()
        db = "bench"
        create_topic(broker.bootstrap, "bench-bookings", 2)
        create_database(influx.url, db)
        events = generate("booking", args.events, seed=3, start=T0, duration_s=300)
        closer = generate("booking", 1, seed=4, start=T0 + timedelta(minutes=15), duration_s=1)
        produce(broker.bootstrap, "bench-bookings", [events, closer], progress=False)
        for run in range(args.runs):
            for label in (PATHS if run % 2 == 0 else PATHS[::-1]):
                archive = label == PATHS[0]
                name = f"{'cds' if archive else 'plain'}-{run}"
                seconds, cpu = one_run(root, name, broker.bootstrap, influx.url, db, archive)
                results[label].append((seconds, cpu))
                print(f"{label} run {run + 1}: first point after {seconds:.1f} s, {cpu:.1f} core-s", flush=True)
    finally:
        influx.stop()
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()

    med = {k: (statistics.median(s for s, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    lines = [
        "",
        "## A dagger's start: the JVM's class archive (`daggers jvm-archive`) vs none",
        "",
        f"- Command: `.venv/bin/python bench/bench_jvm_archive.py --runs {args.runs} --events {args.events}`",
        f"- Date: {datetime.now(UTC).strftime('%a %b %d %H:%M:%S UTC %Y')}",
        f"- Machine: {machine()}",
        f"- Load average (1/5/15 min) before: {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f}, "
        f"after: {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f}",
        f"- {args.events:,} bookings on a 2-partition tansu topic, influxd 1.6, Spark local[2] in the dagger's own "
        "process; a windowed count per city. Each run: `python -m job.cli run SPEC` for a new dagger, checkpoint "
        "and measurement; the clock starts at the launch and stops at its first point in InfluxDB (polled every "
        "0.1 s); CPU: every process of the dagger (driver, JVM, Python workers) until then. The paths alternate. "
        f"Peer: the same with `{jvm_archive.ARCHIVE_ENV}=off`.",
        "",
        "| path | first point, runs (s) | median (s) | CPU, runs (core-s) | median (core-s) | ratio to peer (time / CPU) |",
        "|---|---|---:|---|---:|---:|",
    ]
    peer = med[PATHS[1]]
    for label in PATHS:
        runs = results[label]
        lines.append(
            f"| {label} | {', '.join(f'{s:.1f}' for s, _ in runs)} | {med[label][0]:.1f} | "
            f"{', '.join(f'{c:.1f}' for _, c in runs)} | {med[label][1]:.1f} | "
            f"{med[label][0] / peer[0]:.2f}x / {med[label][1] / peer[1]:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_append:
        with (REPO / "BENCHMARKS.md").open("a") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
