"""A dagger's start with the JVM's class archive (``daggers jvm-archive``) against without it (the peer).

Usage::

    python bench/bench_jvm_archive.py [--runs 4] [--events 20000] [--no-append]

Starts a tansu broker and influxd on OS-chosen ports, produces ``--events`` bookings (five minutes of event
time, then one event 15 minutes later so every window closes at once), and then, alternating, ``--runs``
times each: ``python -m job.cli run SPEC`` (a new dagger, checkpoint and measurement each time) with the
archive, and with ``DAGGERS_JVM_ARCHIVE=off``. For each: seconds from launch to the first point in InfluxDB
(polled every 0.1 s), and the CPU its processes (driver, JVM, Python workers) used until then. The archive
is written first when missing. The result is appended to bench/results/history.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_deploy import by_hand, fill_topic  # noqa: E402
from bench.report import publish, section_header  # noqa: E402
from job import jvm_archive  # noqa: E402
from job.stack.broker import TansuBroker  # noqa: E402
from job.stack.influx import InfluxServer, create_database  # noqa: E402
from job.stack.ports import free_port, free_ports  # noqa: E402

PATHS = ("with the archive", "without (peer)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=4, help="Runs of each path (alternating).")
    parser.add_argument("--events", type=int, default=20_000, help="Bookings in the topic.")
    parser.add_argument(
        "--no-append", action="store_true", help="Do not append the result to bench/results/history.md."
    )
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
        create_database(influx.url, db)
        fill_topic(broker.bootstrap, "bench-bookings", args.events)
        for run in range(args.runs):
            for label in PATHS if run % 2 == 0 else PATHS[::-1]:
                archive = label == PATHS[0]
                name = f"{'cds' if archive else 'plain'}-{run}"
                env = {**os.environ, **({} if archive else {jvm_archive.ARCHIVE_ENV: "off"})}
                seconds, cpu = by_hand(root, name, "bench-bookings", broker.bootstrap, influx.url, db, env)
                results[label].append((seconds, cpu))
                print(
                    f"{label} run {run + 1}: first point after {seconds:.1f} s, {cpu:.1f} core-s", flush=True
                )
    finally:
        influx.stop()
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()

    med = {
        k: (statistics.median(s for s, _ in v), statistics.median(c for _, c in v))
        for k, v in results.items()
    }
    lines = [
        *section_header(
            "A dagger's start: the JVM's class archive (`daggers jvm-archive`) vs none",
            f".venv/bin/python bench/bench_jvm_archive.py --runs {args.runs} --events {args.events}",
            load_before,
            load_after,
        ),
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
            f"{med[label][0] / peer[0]:.2f}x / {med[label][1] / peer[1]:.2f}x |"
        )
    publish(lines, append=not args.no_append)
    return 0


if __name__ == "__main__":
    sys.exit(main())
