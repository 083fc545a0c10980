"""Benchmark enrichment from PostgreSQL: Daggers' batched lookup against per-row lookups in a Python loop.

Usage::

    python bench/bench_enrich.py [--rate 50000] [--batches 3] [--customers 100000] [--dsn DSN] [--out FILE]

A stream of ``--rate`` events a second arrives in micro-batches of one second (``--batches`` of them); each
event names a customer (uniformly among ``--customers``, 5% unknown). Each batch is enriched with the
customer's name, tier and score from a PostgreSQL table (a server started here, or ``--dsn``):

* **daggers** — :class:`job.enrich.engine.Enricher` on the batch's Arrow table, as the runner does in
  ``foreachBatch``: the distinct keys not in its TTL cache in ``= ANY($1)`` queries of 5,000, 8 at once, the
  answers spread back on the rows by index, and kept on disk for a replay;
* **per-row** — a Python loop, one ``SELECT … WHERE customer_id = %s`` per event on one connection;
* **per-row + dict cache** — the same loop, asking each customer once (a dict in front of the query).

Every implementation's rows are checked equal to the others' (the script exits 1 when they differ or a
peer fails). Only the enrichment step is timed (not Spark, not the sinks). A batch keeps up with the stream
when it is enriched in less than the second it covers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job.enrich.engine import Enricher  # noqa: E402
from job.enrich.replay import ReplayStore  # noqa: E402
from job.spec import PostgresLookup  # noqa: E402

COLUMNS = ("customer_name", "customer_tier", "customer_score")


def make_customers(dsn: str, count: int) -> None:
    """Create table bench_customers with ``count`` customers c0 … c<count-1>."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS bench_customers")
        conn.execute(
            "CREATE TABLE bench_customers (customer_id text PRIMARY KEY, name text, tier text, score int)"
        )
        with conn.cursor().copy("COPY bench_customers FROM STDIN") as copy:
            for i in range(count):
                copy.write_row((f"c{i}", f"name-{i}", ("gold", "silver", "bronze")[i % 3], i % 1000))
        conn.execute("ANALYZE bench_customers")


def make_batches(rate: int, batches: int, customers: int, seed: int = 7) -> list[pa.Table]:
    """Return ``batches`` tables of ``rate`` events (order_number, customer_id, fare); 5% unknown customers."""
    rng = random.Random(seed)
    out = []
    for b in range(batches):
        ids = [
            f"c{rng.randrange(customers)}" if rng.random() >= 0.05 else f"x{rng.randrange(customers)}"
            for _ in range(rate)
        ]
        out.append(
            pa.table(
                {
                    "order_number": [f"o{b}-{i}" for i in range(rate)],
                    "customer_id": ids,
                    "fare": [rng.randrange(10_000, 200_000) for _ in range(rate)],
                }
            )
        )
    return out


def daggers_enricher(dsn: str, store: ReplayStore | None = None) -> Enricher:
    spec = PostgresLookup.model_validate(
        {
            "type": "postgres",
            "name": "customers",
            "dsn": dsn,
            "key": "customer_id",
            "query": "SELECT customer_id, name, tier, score FROM bench_customers WHERE customer_id = ANY($1)",
            "output_mapping": {
                "customer_name": "name",
                "customer_tier": "tier",
                "customer_score": {"path": "score", "type": "long"},
            },
        }
    )
    return Enricher([spec], store)


def per_row(dsn: str, cached: bool) -> Callable[[pa.Table], pa.Table]:
    """Return a function that enriches a batch with one query per event (or per new customer, ``cached``)."""
    import psycopg

    conn = psycopg.connect(dsn, autocommit=True)
    cache: dict[str, tuple[Any, Any, Any]] = {}

    def enrich(table: pa.Table) -> pa.Table:
        names, tiers, scores = [], [], []
        for customer in table.column("customer_id").to_pylist():
            if cached and customer in cache:
                row = cache[customer]
            else:
                found = conn.execute(
                    "SELECT name, tier, score FROM bench_customers WHERE customer_id = %s", (customer,)
                ).fetchone()
                row = found if found is not None else (None, None, None)
                if cached:
                    cache[customer] = row
            names.append(row[0])
            tiers.append(row[1])
            scores.append(row[2])
        return (
            table.append_column("customer_name", pa.array(names, pa.string()))
            .append_column("customer_tier", pa.array(tiers, pa.string()))
            .append_column("customer_score", pa.array(scores, pa.int64()))
        )

    return enrich


def run(name: str, enrich: Callable[[pa.Table, int], pa.Table], batches: list[pa.Table]) -> dict[str, Any]:
    """Enrich every batch in order; return the name, per-batch seconds and the enriched tables."""
    seconds, tables = [], []
    for i, batch in enumerate(batches):
        started = time.perf_counter()
        tables.append(enrich(batch, i))
        seconds.append(time.perf_counter() - started)
    return {"name": name, "seconds": seconds, "tables": tables}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=50_000, help="events a second (= rows a one-second batch)")
    ap.add_argument("--batches", type=int, default=3, help="one-second micro-batches")
    ap.add_argument("--customers", type=int, default=100_000, help="rows of the PostgreSQL table")
    ap.add_argument("--dsn", help="an existing PostgreSQL (default: start one in a temporary folder)")
    ap.add_argument("--out", type=Path, help="also write the results (markdown) to this file")
    args = ap.parse_args()

    server, root = None, None
    dsn = args.dsn
    try:
        if dsn is None:
            from job.stack.ports import free_port
            from job.stack.postgres import PostgresServer

            root = Path(tempfile.mkdtemp(prefix="bench-enrich-"))
            os.chmod(root, 0o755)
            server = PostgresServer(root / "pg", free_port())
            server.start()
            dsn = server.dsn
        make_customers(dsn, args.customers)
        batches = make_batches(args.rate, args.batches, args.customers)
        keep = Path(
            tempfile.mkdtemp(prefix="bench-enrich-kept-")
        )  # the answers kept for a replay, as a dagger does
        enricher = daggers_enricher(dsn, ReplayStore(keep / "lookups"))
        results = [run("daggers: Enricher (= ANY($1) of distinct keys, TTL cache)", enricher.enrich, batches)]
        metrics = enricher.metrics()["customers"]
        enricher.close()
        shutil.rmtree(keep, ignore_errors=True)
        for cached in (True, False):
            peer = per_row(dsn, cached)
            label = (
                "per-row Python loop + dict cache" if cached else "per-row Python loop, one query an event"
            )
            results.append(run(label, lambda t, _i, p=peer: p(t), batches))
        want = results[0]["tables"]
        for r in results[1:]:
            for i, (got, ref) in enumerate(zip(r["tables"], want, strict=True)):
                if not got.equals(ref):
                    print(f"FAILED: {r['name']} batch {i} differs from daggers'", file=sys.stderr)
                    return 1
        report = render(args, results, metrics)
        print(report)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(report)
        return 0
    except Exception as exc:  # a benchmark that fails says so and exits non-zero
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


def render(args: argparse.Namespace, results: list[dict[str, Any]], metrics: dict[str, Any]) -> str:
    """Return the results as the markdown of bench/results/enrich.md."""
    rows = args.rate * args.batches
    base = sum(results[0]["seconds"])
    lines = [
        "# Enrichment from PostgreSQL: batched lookups against per-row lookups",
        "",
        f"- Command: `python bench/bench_enrich.py --rate {args.rate} --batches {args.batches} "
        f"--customers {args.customers}{' --out ' + str(args.out) if args.out else ''}`",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {platform.machine()}, nproc={os.cpu_count()}, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}; PostgreSQL 15 on the same machine (fsync off), shared with other work "
        f"(load average {os.getloadavg()[0]:.1f} at the end of the run)",
        f"- Data: {args.batches} one-second micro-batches of {args.rate:,} events ({rows:,} in all), customer ids "
        f"uniform over {args.customers:,} customers, 5% unknown; every implementation's rows checked equal.",
        "",
        f"| implementation | seconds a batch (each) | events/s | keeps up with {args.rate:,}/s | ratio |",
        "|---|---|---:|---|---:|",
    ]
    for r in results:
        total = sum(r["seconds"])
        each = ", ".join(f"{s:.2f}" for s in r["seconds"])
        keeps = "yes" if max(r["seconds"]) < 1.0 else "no"
        lines.append(
            f"| {r['name']} | {each} | {rows / total:,.0f} | {keeps} | "
            f"{'1.0x' if r is results[0] else f'{total / base:.1f}x slower'} |"
        )
    lines += [
        "",
        f"Daggers' lookup: {metrics['keys']:,} distinct keys asked over the batches, {metrics['cache_hits']:,} "
        f"answered by the cache (hit rate {metrics['hit_rate']:.0%}), {metrics['requests']:,} queries, "
        f"{metrics['found']:,} found and {metrics['not_found']:,} not found.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
