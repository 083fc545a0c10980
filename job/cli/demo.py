"""``daggers demo``: the whole platform on one machine in one command.

Starts the local stack, produces realistic booking and driver-location events for the last few
minutes, runs the two seed daggers over them on Spark, and prints the windows they wrote to
InfluxDB, read back with InfluxQL.

It is repeatable: every run produces to topics of its own (``booking-log-demo-<time>``) and announces
that it resets the demo's two measurements first, so a second run shows the same counts instead of
reading the first run's events again. Its output explains the two windows that look odd: the first
holds a partial minute, and the newest are still open (not written yet).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests
from rich.console import Console
from rich.table import Table

from job.common.words import counted
from job.query.plan import plan
from job.query.runner import run_foreground
from job.spec import parse_spec
from job.stack.local import LocalStack, StackStatus

if TYPE_CHECKING:
    from job.produce.generator import Stream

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DATABASE = "daggers"
DEMO_STREAMS: list[tuple[Stream, str, str, str, str]] = [
    ("booking", "booking-log", "bookings-per-s2.yaml", "bookings_per_s2", "num_of_bookings"),
    ("driver_location", "driver-location", "drivers-per-s2.yaml", "drivers_per_s2", "drivers"),
]


def influx_query(url: str, db: str, q: str) -> list[dict[str, Any]]:
    """Run InfluxQL and return the rows of the first series as dicts (empty when there are none)."""
    resp = requests.get(f"{url}/query", params={"db": db, "q": q, "epoch": "s"}, timeout=30)
    resp.raise_for_status()
    series = (resp.json().get("results") or [{}])[0].get("series") or []
    rows: list[dict[str, Any]] = []
    for s in series:
        for values in s.get("values") or []:
            row = dict(zip(s["columns"], values, strict=False))
            row.update(s.get("tags") or {})
            rows.append(row)
    return rows


def run_demo(
    state_dir: Path,
    *,
    broker: str = "tansu",
    events: int = 200_000,
    minutes: int = 5,
    console: Console | None = None,
    now: datetime | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Run the demo; return the windows read back per measurement.

    Uses the local stack in ``state_dir`` as it runs (its ports), else starts one on the default ports.
    ``now``: the end of the events' time span (default: the wall clock).
    """
    from job.produce.generator import generate
    from job.produce.producer import ensure_topic, produce
    from job.spark.session import borrowed_session
    from job.stack.influx import influx_query as influx_statement

    console = console or Console()
    status = _stack_up(LocalStack(state_dir), broker)
    bootstrap, influx = status.bootstrap or "", status.influx_url or ""
    console.print(
        f"[bold]stack up[/]: broker {broker} at {bootstrap}, InfluxDB at {influx}, state in {state_dir}"
    )
    now = (now or datetime.now(UTC)).replace(microsecond=0)
    start = now - timedelta(minutes=minutes)
    run_id = datetime.now(UTC).strftime("demo-%Y%m%d-%H%M%S")  # the wall clock: a new run gets new topics
    measurements = [m for *_, m, _f in DEMO_STREAMS]
    for m in measurements:
        influx_statement(influx, f'DROP MEASUREMENT "{m}"', DATABASE, method="POST")
    console.print(
        f"[bold]reset[/]: dropped the measurements {' and '.join(measurements)} in database {DATABASE} "
        f"(earlier demo runs); this run's events go to new topics *-{run_id}"
    )
    topics: dict[str, str] = {}
    for i, (stream, topic, *_rest) in enumerate(DEMO_STREAMS):
        topics[stream] = f"{topic}-{run_id}"
        ensure_topic(bootstrap, topics[stream], 4)
        batch = generate(
            stream, events, seed=42 + i, start=start, duration_s=minutes * 60, out_of_order_fraction=0.02
        )
        report = produce(bootstrap, topics[stream], batch, progress=True)
        console.print(
            f"produced {report.count:,} {stream} events to {topics[stream]} ({report.events_per_s:,.0f}/s), "
            f"event times {start:%H:%M:%S} to {now:%H:%M:%S} UTC"
        )
    env = {"DAGGERS_BOOTSTRAP": bootstrap, "DAGGERS_INFLUX": influx}
    results: dict[str, list[dict[str, Any]]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="daggers-demo-"))
    try:
        with borrowed_session("daggers-demo", shuffle_partitions=2) as spark:
            for stream, _topic, spec_file, measurement, field in DEMO_STREAMS:
                spec = parse_spec((EXAMPLES / spec_file).read_text(), source=spec_file, env=env)
                streams = [spec.streams[0].model_copy(update={"topics": [topics[stream]]})]
                spec = spec.model_copy(
                    update={"checkpoint_dir": str(scratch / spec.name), "streams": streams}
                )
                started = time.monotonic()
                progress = run_foreground(plan(spec, state_dir), available_now=True, spark=spark)
                console.print(
                    f"[bold]dagger {spec.name}[/]: {counted(progress.input_rows, 'event', fmt=',')} in "
                    f"{time.monotonic() - started:.1f} s, {progress.late_rows_dropped} late dropped"
                )
                rows = influx_query(
                    influx,
                    DATABASE,
                    f"SELECT count({field}) AS cells, sum({field}) AS total FROM {measurement} "
                    f"WHERE time >= {int(start.timestamp())}s GROUP BY time(1m) fill(none)",
                )
                results[measurement] = rows
                _print_windows(console, measurement, field, rows)
                _explain_edges(console, start, now, spec.watermark_delay_ms)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    console.print(
        "[green]done[/]: the stack keeps running (daggers status / daggers down); run the demo again "
        "for a fresh start, same counts"
    )
    return results


def _stack_up(stack: LocalStack, broker: str) -> StackStatus:
    """The local stack as it runs (whatever its ports), else a new one on the default ports."""
    status = stack.status()
    if status.healthy and status.bootstrap and status.influx_url:
        # a name from the command line: up() refuses a broker it does not know
        return stack.up(
            broker=broker,  # type: ignore[arg-type]
            broker_port=int(status.bootstrap.rsplit(":", 1)[1]),
            influx_port=int(status.influx_url.rsplit(":", 1)[1]),
            database=DATABASE,
        )
    return stack.up(broker=broker, database=DATABASE)  # type: ignore[arg-type]  # as above


def _explain_edges(console: Console, start: datetime, now: datetime, watermark_delay_ms: int) -> None:
    """Say why the first window is small and why the newest minutes are missing."""
    first_end = start.replace(second=0) + timedelta(minutes=1)
    if start.second:
        console.print(
            f"  the first window (ending {first_end:%H:%M}) holds a partial minute: the events start at "
            f"{start:%H:%M:%S}, so it counts only {60 - start.second} of its 60 seconds"
        )
    watermark = now - timedelta(milliseconds=watermark_delay_ms)
    open_from = watermark.replace(second=0) + timedelta(minutes=1)
    console.print(
        f"  windows ending {open_from:%H:%M} and later are still open, so not written yet: a window is "
        f"written once the watermark (the newest event time, {now:%H:%M:%S}, less the "
        f"{watermark_delay_ms / 1000:g} s watermark delay) passes its end; a live dagger writes them "
        "as events arrive"
    )


def _print_windows(console: Console, measurement: str, field: str, rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"{measurement}: windows written to InfluxDB")
    table.add_column("window end (UTC)")
    table.add_column("S2 cells × tags", justify="right")
    table.add_column(f"sum({field})", justify="right")
    for row in rows:
        ts = datetime.fromtimestamp(int(row["time"]), UTC).strftime("%Y-%m-%d %H:%M")
        table.add_row(ts, f"{row['cells']:,}", f"{row['total']:,}")
    console.print(table)
