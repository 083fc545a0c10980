"""Run the harness's queries on Apache Flink (PyFlink 2.3): a script for the Flink virtualenv.

``python flink_runner.py JOB.json OUT.json`` (with bench/.flink-venv's python, repo root on PYTHONPATH):
JOB holds ``watermark_delay_s``, the JSON-lines file of each table of each data set and the cases
(id, data set, SQL). Each query runs as a streaming job over filesystem tables (one task, so the file
order is the order Flink reads in; a watermark after every record), and its rows go to OUT as
``{id: {"columns": [...], "rows": [...]} | {"error": text}}``. It imports only PyFlink and
:mod:`bench.flink_compat.rows`; the project's packages are not in the Flink virtualenv.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.flink_compat.rows import row

#: The columns of each table, as Flink declares them (protobuf enums as STRING, Timestamp as TIMESTAMP(3);
#: event_ts_row is the Timestamp as upstream Dagger reads it, ROW<seconds, nanos>).
COLUMNS = {
    "bookings": "order_number STRING, customer_id STRING, driver_id STRING, city_id INT, vehicle_type STRING, "
    "status STRING, pickup_lat DOUBLE, pickup_long DOUBLE, event_timestamp TIMESTAMP(3), "
    "fare_idr BIGINT",
    "pings": "driver_id STRING, lat DOUBLE, `long` DOUBLE, driver_status STRING, service_type STRING, "
    "event_timestamp TIMESTAMP(3), accuracy_m FLOAT, speed_kmh FLOAT",
}


def ddl(table: str, path: str, delay_s: int) -> str:
    """Return the CREATE TEMPORARY TABLE of ``table`` over the JSON-lines file ``path``."""
    return (
        f"CREATE TEMPORARY TABLE {table} ({COLUMNS[table]}, event_ts_row ROW<seconds BIGINT, nanos INT>, "
        f"rowtime AS event_timestamp, WATERMARK FOR rowtime AS rowtime - INTERVAL '{delay_s}' SECOND) "
        f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'json')"
    )


def environment() -> Any:
    """Return a streaming TableEnvironment: one task, UTC, a watermark after every record."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    conf = env.get_config()
    conf.set("parallelism.default", "1")
    conf.set("pipeline.auto-watermark-interval", "0")
    conf.set("table.local-time-zone", "UTC")
    return env


def run_case(env: Any, files: dict[str, str], sql: str, delay_s: int) -> dict[str, Any]:
    """Return the columns and rows (comparable form) of ``sql`` over the tables in ``files``."""
    for table, path in files.items():
        env.execute_sql(f"DROP TEMPORARY TABLE IF EXISTS {table}")
        env.execute_sql(ddl(table, path, delay_s))
    result = env.execute_sql(sql)
    columns = list(result.get_table_schema().get_field_names())
    types = [str(t.toString()) for t in result._j_table_result.getResolvedSchema().getColumnDataTypes()]
    rows = []
    with result.collect() as it:
        for r in it:
            rows.append(row(list(r)))
    return {"columns": columns, "types": types, "rows": rows}


def reason(text: str) -> str:
    """Return the line of a Flink (Java) error that says why: its first Flink exception, else its first line."""
    for line in text.splitlines():
        if "org.apache.flink" in line and "Exception:" in line:
            return line.strip()[:2000]
    return text.strip().splitlines()[0][:2000] if text.strip() else "?"


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text())
    env = environment()
    out: dict[str, Any] = {}
    for case in job["cases"]:
        try:
            out[case["id"]] = run_case(
                env, job["datasets"][case["dataset"]], case["sql"], job["watermark_delay_s"]
            )
        except Exception as exc:  # a query Flink refuses is a result of the comparison, not a crash
            out[case["id"]] = {"error": reason(str(exc))}
    Path(argv[1]).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
