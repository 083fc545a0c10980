"""Nexmark as an oracle: the same events on Flink 2.3 (JSON-lines files) and on Daggers (protobuf on a broker,
each query a real dagger), the rows compared exactly, Flink's kept as golden files for CI.

The events: :data:`EVENTS` of Nexmark's generator (:mod:`bench.nexmark.generate`, seed :data:`SEED`) at
:data:`RATE` events per second of event time (Nexmark's ``first-event.rate``; 100 s of events, so 10 s
windows close), then one *closer* per table two days later: its watermark closes every window before it on
Daggers, as Flink's end of input does. Rows that carry a closer (an id of -1, the text ``closer``, a time or
day on or after the closers') are not compared.

A golden file keeps a query's column names, its row count and the SHA-256 of its rows (sorted, as JSON),
and the rows themselves when there are at most :data:`ROWS_KEPT`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.flink_compat.rows import canonical
from bench.nexmark import generate as gen
from bench.nexmark.queries import WATERMARK_DELAY_S, Query

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
EVENTS = 50_000
SEED = 52
RATE = 500.0
ROWS_KEPT = 2_000
ENGINE = "Apache Flink 2.3.0 (PyFlink, filesystem JSON-lines source, parallelism 1)"


class FlinkError(RuntimeError):
    """The Flink runner failed as a whole (not one query)."""


def config() -> gen.Config:
    return gen.Config(rate=RATE)


def closer_ms(c: gen.Config, events: int) -> int:
    """The closers' event time: two days after the last event (past the end of its day's window)."""
    last = int(c.time_ms(gen.np.array([events - 1]))[0])
    return last + int(timedelta(days=2) / timedelta(milliseconds=1))


def dataset(events: int = EVENTS, seed: int = SEED) -> dict[str, pa.Table]:
    """The oracle's events with their closers, per table."""
    c = config()
    made = gen.generate(events, seed, c).tables
    close = gen.closers(closer_ms(c, events))
    return {t: pa.concat_tables([made[t], close[t]]) for t in gen.TABLES}


def cut_text(events: int = EVENTS) -> str:
    """The closers' time in the comparable form (``YYYY-MM-DD HH:MM:SS.ffffff``)."""
    from datetime import UTC, datetime

    at = datetime.fromtimestamp(closer_ms(config(), events) / 1000, tz=UTC)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")


def closed(rows: Iterable[Sequence[Any]], cut: str) -> list[list[Any]]:
    """The rows both engines must give: without a closer's id or text, or a time or day at or after ``cut``."""
    day = cut[:10]

    def keep(r: Sequence[Any]) -> bool:
        for v in r:
            if v == gen.CLOSER_ID or v == gen.CLOSER_TEXT:
                return False
            if isinstance(v, str) and len(v) >= 10 and v[4:5] == "-" and v[7:8] == "-" and v[:10] >= day:
                return False
        return True

    return canonical(r for r in rows if keep(r))


def digest(rows: list[list[Any]]) -> str:
    """The SHA-256 of canonical rows."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- Flink


def flink_python() -> Path | None:
    """The Flink virtualenv's python, or None when bench/setup_flink.sh has not made it."""
    from bench.flink_compat.flink_side import flink_python as found

    return found()


def run_flink(
    queries: Sequence[Query],
    files: dict[str, str],
    folder: Path,
    *,
    mode: str = "rows",
    parallelism: int = 1,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Run ``queries`` on Flink over ``files`` ({table: JSON-lines path}); return {id: result}.

    Raises FlinkError when the Flink virtualenv is missing or the runner fails."""
    python = flink_python()
    if python is None:
        raise FlinkError("no Flink virtualenv: run bench/setup_flink.sh")
    folder.mkdir(parents=True, exist_ok=True)
    job = {
        "mode": mode,
        "parallelism": parallelism,
        "watermark_delay_s": WATERMARK_DELAY_S,
        "files": files,
        "queries": [{"id": q.id, "sql": q.flink} for q in queries],
    }
    (folder / "job.json").write_text(json.dumps(job))
    out = folder / f"flink-{mode}.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run(
            [str(python), "-m", "bench.nexmark.flink_runner", str(folder / "job.json"), str(out)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise FlinkError(f"the Flink runner took over {timeout_s:.0f} s") from exc
    if done.returncode != 0 or not out.exists():
        raise FlinkError(f"the Flink runner failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


# --------------------------------------------------------------------------- golden files


def golden_path(query_id: str) -> Path:
    return GOLDEN / f"{query_id}.json"


def write_golden(q: Query, result: dict[str, Any], cut: str) -> Path:
    """Keep Flink's rows of ``q`` (closed) as its golden file. Raises FlinkError when Flink refused it."""
    if "error" in result:
        raise FlinkError(f"{q.id}: Flink refused the query: {result['error']}")
    rows = closed(result["rows"], cut)
    body = {
        "query": q.id,
        "what": q.what,
        "engine": ENGINE,
        "events": {"count": EVENTS, "seed": SEED, "rate": RATE},
        "flink_sql": q.flink,
        "flink_change": q.flink_change,
        "columns": result["columns"],
        "count": len(rows),
        "sha256": digest(rows),
        "rows": rows if len(rows) <= ROWS_KEPT else None,
    }
    GOLDEN.mkdir(parents=True, exist_ok=True)
    path = golden_path(q.id)
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def read_golden(query_id: str) -> dict[str, Any]:
    """The golden file of ``query_id``. Raises OSError when missing."""
    body: dict[str, Any] = json.loads(golden_path(query_id).read_text())
    return body


# --------------------------------------------------------------------------- Daggers


def produce_tables(
    bootstrap: str, tables: dict[str, pa.Table], partitions: int = 1, prefix: str = "nexmark"
) -> dict[str, str]:
    """Create a topic per table (``partitions`` partitions; one keeps the order) and produce its events as
    protobuf, round robin over the partitions in time order; return {table: topic}."""
    from confluent_kafka import Producer

    from job.stack.broker import create_topic

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "batch.num.messages": 10_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 500_000,
        }
    )
    topics = {}
    for name, table in tables.items():
        topic = f"{prefix}-{name}-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, partitions)
        ms = table.column("dateTime").cast(pa.int64()).to_numpy().tolist()
        for i, payload in enumerate(gen.encode(name, table)):
            while True:
                try:
                    producer.produce(topic, payload, partition=i % partitions, timestamp=ms[i])
                    break
                except BufferError:
                    producer.poll(0.05)
        topics[name] = topic
    if producer.flush(120) != 0:
        raise RuntimeError("nexmark: events not delivered to the broker within 120 s")
    return topics


def spec_text(
    q: Query, topics: dict[str, str], bootstrap: str, checkpoint: Path, max_records: int = 100_000
) -> str:
    """The dagger spec of ``q`` over ``topics`` ({table: topic})."""
    name = f"nexmark-{q.id}-{uuid.uuid4().hex[:6]}"
    streams = "".join(
        f"""  - table: {t}
    topics: [{topics[t]}]
    proto_class: {gen.MESSAGES[t]}
    timestamp_field: dateTime
    bootstrap_servers: {bootstrap}
    group: {name}-{t}
    start_from: earliest
    max_records_per_batch: {max_records}
"""
        for t in q.tables
    )
    sql = "\n".join("  " + line for line in q.dagger.splitlines())
    return f"""name: {name}
streams:
{streams}sql: |
{sql}
watermark_delay_ms: {WATERMARK_DELAY_S * 1000}
checkpoint_dir: {checkpoint}
trigger_interval_s: 0
sink:
  type: log
"""


def run_dagger(spark: Any, q: Query, topics: dict[str, str], bootstrap: str, folder: Path) -> dict[str, Any]:
    """Run ``q`` as a dagger until every record is read; return {"columns", "rows"}. Raises DaggerError when the
    query is refused or fails."""
    from bench.flink_compat.daggers_side import CollectSink
    from job.query.plan import plan
    from job.query.runner import DaggerJob, explain_failure
    from job.spec import parse_spec

    work = folder / f"{q.id}-{uuid.uuid4().hex[:6]}"
    text = spec_text(q, topics, bootstrap, work / "ckpt")
    sink = CollectSink()
    job = DaggerJob(plan(parse_spec(text, f"{q.id}.yaml"), work), spark, sinks=[sink])
    query = job.start(available_now=True)
    try:
        query.awaitTermination()
    except Exception as exc:  # Spark's StreamingQueryException: the project's error, one line
        raise explain_failure(exc) from None
    finally:
        job.stop()
    return {"columns": sink.columns, "rows": sink.rows}


def local_session(app: str, slots: int = 2) -> Any:
    """A local Spark session as ``daggers run`` makes one: its Python processes forked from a fork server."""
    from job.shared import forkserver
    from job.spark.session import build_session

    forkserver.start_if_local(f"local[{slots}]")
    return build_session(
        app, master=f"local[{slots}]", shuffle_partitions=slots, extra=forkserver.spark_conf()
    )
