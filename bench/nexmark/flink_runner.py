"""Run Nexmark's queries on Apache Flink (PyFlink 2.3) over JSON-lines files: a script for the Flink virtualenv.

``python -m bench.nexmark.flink_runner JOB.json OUT.json`` (bench/.flink-venv's python, the repo root on
PYTHONPATH). JOB holds ``mode`` (``rows`` or ``bench``), ``parallelism``, the file of each table
(``person``, ``auction``, ``bid``) and the queries (id, SQL). Each table is Nexmark's view as a filesystem
table (JSON lines) with Nexmark's watermark, 4 s behind ``dateTime``.

* ``rows``: each query runs as a streaming job (one task: the file's order is the order Flink reads in)
  and its rows go to OUT as ``{id: {"columns", "rows"} | {"error"}}``;
* ``bench``: each query runs into a ``blackhole`` table, as Nexmark runs it, and OUT gets
  ``{id: {"submitted", "done", "cpu_start", "cpu_done"}}`` (epoch seconds; CPU seconds of this process tree,
  the JVM included).

It imports only PyFlink, :mod:`bench.flink_compat.rows` and :mod:`bench.procstats` (standard library only).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.flink_compat.rows import row

COLUMNS = {
    "person": "id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING, "
    "`dateTime` TIMESTAMP(3), extra STRING",
    "auction": "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT, "
    "`dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3), "
    "extra STRING",
}


def ddl(table: str, path: str, delay_s: int) -> str:
    """The CREATE TEMPORARY TABLE of ``table`` over its JSON-lines file, with Nexmark's watermark."""
    return (
        f"CREATE TEMPORARY TABLE {table} ({COLUMNS[table]}, WATERMARK FOR `dateTime` AS `dateTime` - "
        f"INTERVAL '{delay_s}' SECOND) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json')"
    )


def environment(parallelism: int) -> Any:
    """A streaming TableEnvironment in UTC."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", str(parallelism))
    conf.set("table.local-time-zone", "UTC")
    return env


def collect(env: Any, sql: str) -> dict[str, Any]:
    """The columns and rows (comparable form) of ``sql``."""
    result = env.execute_sql(sql)
    columns = list(result.get_table_schema().get_field_names())
    rows = []
    with result.collect() as it:
        for r in it:
            rows.append(row(list(r)))
    return {"columns": columns, "rows": rows}


def cpu_s() -> float:
    """The CPU seconds of this process and its descendants (the JVM that runs the job) so far."""
    from bench.procstats import tree

    return sum(p.cpu_s for p in tree(os.getpid()))


def blackhole(env: Any, query_id: str, sql: str) -> dict[str, float]:
    """Run ``sql`` into a blackhole table until its input ends; return when it was submitted and done, and the
    CPU seconds of the job's processes then."""
    from pyflink.table import Schema, TableDescriptor

    table = env.sql_query(sql)
    schema = (
        Schema.new_builder()
        .from_row_data_type(table.get_resolved_schema().to_physical_row_data_type())
        .build()
    )
    sink = f"nexmark_{query_id}"
    env.create_temporary_table(sink, TableDescriptor.for_connector("blackhole").schema(schema).build())
    cpu0, submitted = cpu_s(), time.time()
    table.execute_insert(sink).wait()
    return {"submitted": submitted, "done": time.time(), "cpu_start": cpu0, "cpu_done": cpu_s()}


def reason(text: str) -> str:
    """The line of a Flink (Java) error that says why."""
    for line in text.splitlines():
        if "org.apache.flink" in line and "Exception:" in line:
            return line.strip()[:2000]
    return text.strip().splitlines()[0][:2000] if text.strip() else "?"


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    env = environment(int(job.get("parallelism", 1)))
    for table, path in job["files"].items():
        env.execute_sql(ddl(table, path, int(job["watermark_delay_s"])))
    out: dict[str, Any] = {}
    if job["mode"] == "bench":  # start the local cluster before the clock starts, as the bench does Spark's
        with env.execute_sql("SELECT 1").collect() as it:
            list(it)
    for q in job["queries"]:
        try:
            out[q["id"]] = (
                collect(env, q["sql"]) if job["mode"] == "rows" else blackhole(env, q["id"], q["sql"])
            )
        except Exception as exc:  # a query Flink refuses is a result, not a crash
            out[q["id"]] = {"error": reason(str(exc))}
    Path(argv[1]).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
