"""Nexmark's throughput per core: Daggers and Apache Flink 2.3 on the same pre-loaded events.

Usage::

    python bench/bench_nexmark.py [--events N] [--queries q0,q5,q8,q11] [--runs N] [--engines daggers,flink]
                                  [--partitions 2] [--seed 52] [--rate 10000]

What a run does (everything on 127.0.0.1, in a temporary folder):

1. generates ``--events`` Nexmark events (:mod:`bench.nexmark.generate`, Nexmark's mix and rules, ``--rate``
   events per second of event time) plus one closer per table, and pre-loads them: as protobuf into a tansu
   broker (a topic per table, ``--partitions`` partitions) and as JSON-lines files (``--partitions`` files
   per table) for Flink;
2. per query and run, each engine in a process of its own: Daggers (``bench/nexmark/run_dagger.py``: the
   dagger with ``availableNow`` on ``local[2]``, rows to a sink that drops them) and Flink
   (``bench/nexmark/flink_runner.py`` in bench/.flink-venv: Nexmark's query into a ``blackhole`` table,
   parallelism ``--partitions``); each measures the CPU seconds of its process tree (JVM and Python
   workers included) from the query's submission (its session already up) to the end of its input;
3. prints, per query and engine, events/s per core = the run's events / those CPU seconds, Nexmark's
   measure (its events per second per core), the median and the worst of ``--runs``, and keeps every
   figure in ``bench/results/nexmark-<UTC time>.json``.

Each engine reads only the tables its query names (a topic or a folder each): the events of the other
tables cost it nothing, as they do in Nexmark's source, which makes all of them and filters.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.nexmark import generate as gen  # noqa: E402
from bench.nexmark.oracle import flink_python, spec_text  # noqa: E402
from bench.nexmark.queries import WATERMARK_DELAY_S, Query, query  # noqa: E402

PYTHON = sys.executable
#: Nexmark's published figures: Flink 1.13, events/s per core (its README, V1 runner, 100M events, 8 cores)
PUBLISHED = {
    "q0": 155_020,
    "q1": 157_940,
    "q2": 175_210,
    "q5": 22_140,
    "q7": 12_330,
    "q8": 146_140,
    "q11": 39_700,
    "q14": 161_230,
    "q15": 72_420,
    "q16": 18_650,
    "q21": 98_490,
    "q22": 129_960,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", default="q0,q5,q8,q11")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--engines", default="daggers,flink")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--seed", type=int, default=52)
    ap.add_argument("--rate", type=float, default=10_000.0, help="events per second of event time")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds one run may take")
    return ap.parse_args(argv)


def preload(
    args: argparse.Namespace, bootstrap: str, folder: Path
) -> tuple[dict[str, str], dict[str, str], dict[str, int]]:
    """Generate the events chunk by chunk into the broker and the JSON files; return the topics, the files and
    the number of events of each table (closers included)."""
    from confluent_kafka import Producer

    from job.stack.broker import create_topic

    c = gen.Config(rate=args.rate)
    topics = {t: f"nexmark-{t}" for t in gen.TABLES}
    for t in gen.TABLES:
        create_topic(bootstrap, topics[t], args.partitions)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": True,
        }
    )
    counts = dict.fromkeys(gen.TABLES, 0)
    files: dict[str, str] = {}
    parts = [*gen.chunks(args.events, args.seed, c)]
    last = int(c.time_ms(gen.np.array([args.events - 1]))[0])
    for i, tables in enumerate([*(p.tables for p in parts), gen.closers(last + 2 * 86_400_000)]):
        if i == 0:
            files = gen.write_json(
                {t: tables[t].slice(0, 0) for t in gen.TABLES}, folder / "events", args.partitions
            )
        gen.append_json(tables, files, args.partitions, first=0)
        for t in gen.TABLES:
            ms = tables[t].column("dateTime").cast(gen.pa.int64()).to_numpy().tolist()
            for k, payload in enumerate(gen.encode(t, tables[t])):
                n = counts[t] + k
                while True:
                    try:
                        producer.produce(topics[t], payload, partition=n % args.partitions, timestamp=ms[k])
                        break
                    except BufferError:
                        producer.poll(0.05)
            counts[t] += tables[t].num_rows
        print(f"  pre-loaded {sum(counts.values()):,} events", flush=True)
    if producer.flush(300) != 0:
        raise RuntimeError("events not delivered to the broker within 300 s")
    return topics, files, counts


def run_daggers(
    q: Query, topics: dict[str, str], bootstrap: str, folder: Path, args: argparse.Namespace
) -> dict[str, Any]:
    work = folder / f"daggers-{q.id}-{time.time_ns()}"
    work.mkdir(parents=True)
    spec = work / "spec.yaml"
    spec.write_text(
        spec_text(q, topics, bootstrap, work / "ckpt", max_records=200_000).replace(
            "trigger_interval_s: 0\n", f"trigger_interval_s: 0\nparallelism: {args.partitions}\n"
        )
    )
    out = work / "out.json"
    done = subprocess.run(
        [PYTHON, "-m", "bench.nexmark.run_dagger", str(spec), str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=args.timeout,
        check=False,
    )
    if not out.exists():
        return {"error": f"exit {done.returncode}: {done.stderr[-1500:]}"}
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def run_flink(q: Query, files: dict[str, str], folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    python = flink_python()
    if python is None:
        return {"error": "no Flink virtualenv (bash bench/setup_flink.sh)"}
    work = folder / f"flink-{q.id}-{time.time_ns()}"
    work.mkdir(parents=True)
    job = {
        "mode": "bench",
        "parallelism": args.partitions,
        "watermark_delay_s": WATERMARK_DELAY_S,
        "files": {t: files[t] for t in q.tables},
        "queries": [{"id": q.id, "sql": q.flink}],
    }
    (work / "job.json").write_text(json.dumps(job))
    out = work / "out.json"
    done = subprocess.run(
        [str(python), "-m", "bench.nexmark.flink_runner", str(work / "job.json"), str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=args.timeout,
        check=False,
    )
    if not out.exists():
        return {"error": f"exit {done.returncode}: {done.stderr[-1500:]}"}
    result: dict[str, Any] = json.loads(out.read_text())[q.id]
    return result


def per_core(result: dict[str, Any], events: int) -> float | None:
    cpu = result.get("cpu_done", 0.0) - result.get("cpu_start", 0.0)
    return events / cpu if "error" not in result and cpu > 0 else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    queries = [query(i) for i in args.queries.split(",")]
    engines = args.engines.split(",")
    from job.stack import TansuBroker, free_ports

    started = datetime.now(UTC)
    report: dict[str, Any] = {
        "date": started.isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "machine": f"{platform.node()}, {os.cpu_count()} cores",
        "load_before": os.getloadavg(),
        "runs": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-nexmark-") as tmp:
        folder = Path(tmp)
        broker = TansuBroker(folder / "broker", free_ports(1)[0])
        broker.start()
        try:
            t = time.time()
            topics, files, counts = preload(args, broker.bootstrap, folder)
            print(
                f"pre-loaded {sum(counts.values()):,} events in {time.time() - t:.0f} s: {counts}", flush=True
            )
            total = sum(counts.values())
            for q in queries:
                for engine in engines:
                    for run in range(args.runs):
                        load = os.getloadavg()[0]
                        result = (
                            run_daggers(q, topics, broker.bootstrap, folder, args)
                            if engine == "daggers"
                            else run_flink(q, files, folder, args)
                        )
                        result.update(
                            {"load_1m": load, "events": total, "read": sum(counts[t] for t in q.tables)}
                        )
                        result["per_core"] = per_core(result, total)
                        report["runs"].setdefault(q.id, {}).setdefault(engine, []).append(result)
                        rate = result["per_core"]
                        print(
                            f"{q.id} {engine} run {run + 1}: "
                            + (
                                f"{rate:,.0f} events/s per core (cpu {result['cpu_done'] - result['cpu_start']:.1f} s, "
                                f"wall {result['done'] - result['submitted']:.1f} s, load {load:.1f})"
                                if rate
                                else f"failed: {result.get('error')}"
                            ),
                            flush=True,
                        )
        finally:
            with contextlib.suppress(Exception):
                broker.stop()
    report["load_after"] = os.getloadavg()
    print(f"\n{'query':6} {'engine':8} {'median':>10} {'worst':>10}  published Flink 1.13")
    for q in queries:
        for engine in engines:
            rates = [r["per_core"] for r in report["runs"][q.id][engine] if r["per_core"]]
            med = f"{statistics.median(rates):,.0f}" if rates else "-"
            worst = f"{min(rates):,.0f}" if rates else "-"
            pub = f"{PUBLISHED[q.id]:,}" if q.id in PUBLISHED else "-"
            print(f"{q.id:6} {engine:8} {med:>10} {worst:>10}  {pub}")
    out = ROOT / "bench" / "results" / f"nexmark-{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"figures: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
