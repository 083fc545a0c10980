"""``daggers demo``: the whole platform on one machine in one command.

Starts the local stack, produces realistic booking and driver-location events for the last few
minutes, runs the two seed daggers over them on Spark, and prints the windows they wrote to
InfluxDB, read back with InfluxQL.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
from rich.console import Console
from rich.table import Table

from job.plan import plan
from job.runner import run_foreground
from job.spec import parse_spec
from job.stack.local import LocalStack

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DEMO_STREAMS = [
    ("booking", "booking-log", "bookings-per-s2.yaml", "bookings_per_s2", "num_of_bookings"),
    ("driver_location", "driver-location", "drivers-per-s2.yaml", "drivers_per_s2", "drivers"),
]


def influx_query(url: str, db: str, q: str) -> list[dict[str, object]]:
    """Run InfluxQL and return the rows of the first series as dicts (empty when there are none)."""
    resp = requests.get(f"{url}/query", params={"db": db, "q": q, "epoch": "s"}, timeout=30)
    resp.raise_for_status()
    series = (resp.json().get("results") or [{}])[0].get("series") or []
    rows: list[dict[str, object]] = []
    for s in series:
        for values in s.get("values") or []:
            row = dict(zip(s["columns"], values, strict=False))
            row.update(s.get("tags") or {})
            rows.append(row)
    return rows


def run_demo(state_dir: Path, *, broker: str = "tansu", events: int = 200_000, minutes: int = 5,
             console: Console | None = None) -> dict[str, list[dict[str, object]]]:
    """Run the demo; return the windows read back per measurement."""
    from job.produce.generator import generate
    from job.produce.producer import ensure_topic, produce
    from job.spark_session import build_session

    console = console or Console()
    status = LocalStack(state_dir).up(broker=broker)  # type: ignore[arg-type]
    bootstrap, influx = status.bootstrap or "", status.influx_url or ""
    console.print(f"[bold]stack up[/]: broker {broker} at {bootstrap}, InfluxDB at {influx}, state in {state_dir}")
    now = datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(minutes=minutes)
    for i, (stream, topic, *_rest) in enumerate(DEMO_STREAMS):
        ensure_topic(bootstrap, topic, 4)
        batch = generate(stream, events, seed=42 + i, start=start, duration_s=minutes * 60,  # type: ignore[arg-type]
                         out_of_order_fraction=0.02)
        report = produce(bootstrap, topic, batch, progress=True)
        console.print(f"produced {report.count:,} {stream} events to {topic} ({report.events_per_s:,.0f}/s)")
    env = {"DAGGERS_BOOTSTRAP": bootstrap, "DAGGERS_INFLUX": influx}
    spark = build_session("daggers-demo", shuffle_partitions=2)
    results: dict[str, list[dict[str, object]]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="daggers-demo-"))
    try:
        for _stream, _topic, spec_file, measurement, field in DEMO_STREAMS:
            spec = parse_spec((EXAMPLES / spec_file).read_text(), source=spec_file, env=env)
            spec = spec.model_copy(update={"checkpoint_dir": str(scratch / spec.name)})
            started = time.monotonic()
            progress = run_foreground(plan(spec, state_dir), available_now=True, spark=spark)
            console.print(f"[bold]dagger {spec.name}[/]: {progress.input_rows:,} events in "
                          f"{time.monotonic() - started:.1f} s, {progress.late_rows_dropped} late dropped")
            rows = influx_query(influx, "daggers",
                                f"SELECT count({field}) AS cells, sum({field}) AS total FROM {measurement} "
                                f"WHERE time >= {int(start.timestamp())}s GROUP BY time(1m) fill(none)")
            results[measurement] = rows
            _print_windows(console, measurement, field, rows)
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    console.print("[green]done[/]: the stack keeps running (daggers status / daggers down)")
    return results


def _print_windows(console: Console, measurement: str, field: str, rows: list[dict[str, object]]) -> None:
    table = Table(title=f"{measurement}: windows written to InfluxDB")
    table.add_column("window end (UTC)")
    table.add_column("S2 cells × tags", justify="right")
    table.add_column(f"sum({field})", justify="right")
    for row in rows:
        ts = datetime.fromtimestamp(int(row["time"]), UTC).strftime("%Y-%m-%d %H:%M")  # type: ignore[arg-type]
        table.add_row(ts, f"{row['cells']:,}", f"{row['total']:,}")
    console.print(table)
