"""How promptly windows close under a live feed: the source's short no-data batch (job.sources.pacing).

Usage::

    python bench/bench_close.py [--seconds 8.5] [--modes promptly,default-spark,read-at-window-close]

Starts tansu and InfluxDB on OS-chosen ports and a local[2] SparkSession, then, per mode, runs a dagger of
2-s windows (watermark delay 0, a trigger every 0.2 s) while a feeder sends 10 events every 50 ms stamped
with the time they are sent. It reports, per mode, the windows that ended and were written while the feeder
ran, how many a micro-batch with no input rows wrote (the short batch the pacing plans: what closes a window
soonest), and the share of the time the query was busy. This was a timed test until 2026-12-01 (issue 41):
how soon is speed, and belongs here; tests/job/test_close_promptly.py checks the plan and the counts.

Exits non-zero (``BENCHMARK FAILED``) when a window's count is wrong, when fewer than 3 windows closed, or
when promptly closes fewer than all but two of its windows in no-data batches.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import requests  # noqa: E402

from job.query.plan import plan  # noqa: E402
from job.query.runner import DaggerJob  # noqa: E402
from job.sinks.influx import InfluxSink  # noqa: E402
from job.spark.session import build_session  # noqa: E402
from job.spec import parse_spec  # noqa: E402
from job.stack import free_ports, make_broker  # noqa: E402
from job.stack.broker import create_topic  # noqa: E402
from job.stack.influx import InfluxServer, create_database  # noqa: E402
from tests.helpers import booking_spec, live_feed  # noqa: E402

SQL = """SELECT COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '2' SECOND) AS window_timestamp
FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '2' SECOND)"""
MODES = {"promptly": (True, False), "default-spark": (False, False), "read-at-window-close": (True, True)}


class _Recording(InfluxSink):
    """The real InfluxDB sink, noting which micro-batch wrote each window."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.written_by: dict[int, int] = {}

    def _write(self, table: pa.Table, batch_id: int) -> int:
        for end in table.column("window_timestamp").to_pylist():
            self.written_by[int(end.timestamp())] = batch_id
        return super()._write(table, batch_id)


def _spec(
    name: str,
    bootstrap: str,
    topic: str,
    influx_url: str,
    db: str,
    ckpt: Path,
    promptly: bool,
    at_close: bool,
) -> object:
    text = booking_spec(
        name,
        topic=topic,
        bootstrap=bootstrap,
        stream="    start_from: earliest\n",
        sql=SQL,
        settings=f"watermark_delay_ms: 0\ntrigger_interval_s: 0.2\nclose_windows_promptly: {str(promptly).lower()}\n"
        f"read_at_window_close: {str(at_close).lower()}\ncheckpoint_dir: {ckpt}\n",
        sink=f"sink:\n  type: influx\n  url: {influx_url}\n  database: {db}\n  measurement: m\n",
    )
    return parse_spec(text)


def run_mode(spark, bootstrap: str, influx_url: str, work: Path, mode: str, seconds: float) -> dict:  # type: ignore[no-untyped-def]
    promptly, at_close = MODES[mode]
    topic, db = f"close-{mode}-{int(time.time())}", f"close_{mode.replace('-', '_')}"
    create_topic(bootstrap, topic, 1)
    create_database(influx_url, db)
    spec = _spec(f"close-{mode}", bootstrap, topic, influx_url, db, work / mode / "ckpt", promptly, at_close)
    sink = _Recording(spec.sinks[0])  # type: ignore[attr-defined]
    job = DaggerJob(plan(spec, work / mode), spark, sinks=[sink])  # type: ignore[arg-type]
    sent: Counter = Counter()
    stop = threading.Event()
    query = job.start()
    feeder = threading.Thread(target=live_feed, args=(bootstrap, topic, sent, stop), daemon=True)
    feeder.start()
    try:
        deadline = time.time() + 60
        while not (query.lastProgress and query.lastProgress.numInputRows) and time.time() < deadline:
            time.sleep(0.05)
        warm = time.time()
        time.sleep(seconds)
        feeder_stop = time.time()
        stop.set()
        feeder.join(30)
        deadline = time.time() + 60
        while time.time() < deadline and not (
            query.lastProgress
            and sink.written_by
            and int(query.lastProgress.batchId) >= max(sink.written_by.values())
        ):
            time.sleep(0.1)
        rows_of = {int(p.batchId): int(p.numInputRows) for p in query.recentProgress}
        ran = [
            (
                datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp(),
                p.durationMs.get("triggerExecution", 0) / 1000,
                int(p.numInputRows),
            )
            for p in query.recentProgress
        ]
        ran = [(s, took, rows) for s, took, rows in ran if warm <= s <= feeder_stop]
    finally:
        stop.set()
        job.stop()
    closed = sorted(end for end in sent if warm + 0.5 < end < feeder_stop - 1)
    resp = requests.get(
        f"{influx_url}/query", params={"db": db, "epoch": "s", "q": 'SELECT n FROM "m"'}, timeout=30
    )
    got = {
        int(t): int(n)
        for r in resp.json()["results"]
        for s in r.get("series", []) or []
        for t, n in s["values"]
    }
    exact = all(got.get(end) == sent[end] for end in closed)
    empty = [end for end in closed if rows_of.get(sink.written_by.get(end, -1)) == 0]
    busy = sum(min(took, feeder_stop - s) for s, took, _ in ran) / max(feeder_stop - warm, 1e-9)
    data_batches = sum(1 for n in rows_of.values() if n)
    return {
        "mode": mode,
        "closed": len(closed),
        "exact": exact,
        "no_data_closes": len(empty),
        "busy": busy,
        "data_batches": data_batches,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.5, help="how long the feeder runs per mode")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-close-"))
    port, iport, backup = free_ports(3)
    broker = make_broker("tansu", work / "broker", port)
    influx = InfluxServer(work / "influx", iport, backup)
    broker.start()
    influx.start()
    failed: list[str] = []
    try:
        spark = build_session("bench-close", master="local[2]", shuffle_partitions=2)
        print(f"{'mode':22} {'closed':>6} {'no-data':>7} {'busy':>5} {'data batches':>12}  exact")
        for mode in args.modes.split(","):
            r = run_mode(spark, broker.bootstrap, influx.url, work, mode, args.seconds)
            print(
                f"{r['mode']:22} {r['closed']:>6} {r['no_data_closes']:>7} {r['busy']:>5.0%} "
                f"{r['data_batches']:>12}  {r['exact']}"
            )
            if not r["exact"]:
                failed.append(f"{mode}: a window's count differs from what was sent")
            if r["closed"] < 3:
                failed.append(f"{mode}: only {r['closed']} windows closed while measured")
            if mode == "promptly" and r["no_data_closes"] < max(2, r["closed"] - 2):
                failed.append(
                    f"promptly: {r['no_data_closes']} of {r['closed']} windows closed in no-data batches"
                )
        spark.stop()
    finally:
        influx.stop()
        broker.stop()
    for reason in failed:
        print(f"BENCHMARK FAILED: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
