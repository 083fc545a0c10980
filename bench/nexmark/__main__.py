"""``python -m bench.nexmark golden|compare [QUERY ...]``: Nexmark's queries on Flink and Daggers.

* ``golden``: run the queries on Flink 2.3 (bench/.flink-venv) over the oracle's events and rewrite their
  golden files (bench/nexmark/golden);
* ``compare``: start a tansu broker and a local Spark, produce the same events as protobuf, run each query
  as a dagger and compare its rows with the golden file; print one line per query (same, differs, or the
  refusal). Exits 1 when a query differs.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from bench.nexmark import generate as gen
from bench.nexmark.oracle import (
    FlinkError,
    closed,
    cut_text,
    dataset,
    digest,
    local_session,
    produce_tables,
    read_golden,
    run_dagger,
    run_flink,
    write_golden,
)
from bench.nexmark.queries import QUERIES, Query, query


def _chosen(ids: list[str]) -> list[Query]:
    return [query(i) for i in ids] if ids else list(QUERIES)


def golden(queries: list[Query]) -> int:
    with tempfile.TemporaryDirectory(prefix="nexmark-") as tmp:
        files = gen.write_json(dataset(), Path(tmp) / "events")
        results = run_flink(queries, files, Path(tmp))
    failed = 0
    for q in queries:
        try:
            path = write_golden(q, results[q.id], cut_text())
        except FlinkError as exc:
            print(exc)
            failed += 1
            continue
        print(f"{q.id}: {read_golden(q.id)['count']} rows -> {path.name}")
    return 1 if failed else 0


def compare(queries: list[Query]) -> int:
    from job.errors import DaggerError
    from job.stack import TansuBroker, free_ports

    differs = 0
    with tempfile.TemporaryDirectory(prefix="nexmark-") as tmp:
        broker = TansuBroker(Path(tmp) / "broker", free_ports(1)[0])
        broker.start()
        try:
            topics = produce_tables(broker.bootstrap, dataset())
            spark = local_session("nexmark-compare")
            for q in queries:
                want = read_golden(q.id)
                try:
                    got = run_dagger(spark, q, topics, broker.bootstrap, Path(tmp))
                except DaggerError as exc:
                    print(f"{q.id}: refused: {exc.message} | {exc.hint or ''}", flush=True)
                    continue
                rows = closed(got["rows"], cut_text())
                same = got["columns"] == want["columns"] and digest(rows) == want["sha256"]
                differs += not same
                print(
                    f"{q.id}: {'same' if same else 'DIFFERS'} ({len(rows)} rows, Flink {want['count']})",
                    flush=True,
                )
                if not same and want["rows"] is not None:
                    extra = [r for r in rows if r not in want["rows"]][:3]
                    missing = [r for r in want["rows"] if r not in rows][:3]
                    print(
                        f"   columns {got['columns']} / {want['columns']}\n   only Daggers {extra}\n"
                        f"   only Flink {missing}",
                        flush=True,
                    )
                elif not same:
                    print(
                        f"   columns {got['columns']} / {want['columns']}; first rows {rows[:2]}", flush=True
                    )
            spark.stop()
        finally:
            broker.stop()
    return 1 if differs else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("golden", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        queries = _chosen(argv[1:])
    except KeyError as exc:
        print(f"nexmark: no query {exc}; the queries: {', '.join(q.id for q in QUERIES)}", file=sys.stderr)
        return 2
    try:
        return golden(queries) if argv[0] == "golden" else compare(queries)
    except FlinkError as exc:
        print(f"nexmark: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
