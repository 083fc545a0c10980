"""One Nexmark query as a dagger over pre-loaded topics, for the bench: ``python -m bench.nexmark.run_dagger
SPEC.yaml OUT.json [--slots 2]``.

A local Spark session is started and warmed (its start is not measured); then the dagger runs with
``availableNow`` until every record is read, into a sink that counts the rows and drops them (Nexmark's
``blackhole``). OUT gets ``{"submitted", "done", "cpu_start", "cpu_done", "rows"}`` (and ``error``): epoch
seconds, and the CPU seconds of this process tree (the Python driver, Spark's JVM, its Python workers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.procstats import tree
from job.sinks.base import Sink


def cpu_s() -> float:
    """The CPU seconds of this process and its descendants so far (exited workers through their reapers)."""
    return sum(p.cpu_s for p in tree(os.getpid()))


class CountSink(Sink):
    """Counts the rows and drops them."""

    name = "blackhole"

    def __init__(self) -> None:
        super().__init__()
        self.rows = 0

    def open(self) -> None:
        return None

    def _write(self, table: pa.Table, batch_id: int) -> int:
        self.rows += table.num_rows
        return table.num_rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("spec", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--slots", type=int, default=2)
    args = ap.parse_args(argv)

    from bench.nexmark.oracle import local_session
    from job.query.plan import plan
    from job.query.runner import DaggerJob, explain_failure
    from job.spec import load_spec

    spark = local_session("nexmark-bench", args.slots)
    spark.range(1000).selectExpr("sum(id)").collect()  # the session is up before the clock starts
    p = plan(load_spec(args.spec), args.spec.parent / "state")
    sink = CountSink()
    job = DaggerJob(p, spark, sinks=[sink])
    cpu0, submitted = cpu_s(), time.time()
    query = job.start(available_now=True)
    result: dict[str, Any] = {}
    try:
        query.awaitTermination()
    except Exception as exc:  # Spark's StreamingQueryException
        result["error"] = explain_failure(exc).message
    done, cpu1 = time.time(), cpu_s()
    job.stop()
    result.update(
        {"submitted": submitted, "done": done, "cpu_start": cpu0, "cpu_done": cpu1, "rows": sink.rows}
    )
    args.out.write_text(json.dumps(result))
    spark.stop()
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
