"""The Daggers side of the harness: the events as protobuf on a broker, each query run as a dagger by the
real engine (plan, translation, Kafka source, protobuf decoding, watermark, Spark Structured Streaming,
``availableNow``), its rows kept by a sink that collects them."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Producer
from google.protobuf.message import Message

from bench.flink_compat.cases import DATASETS, TABLES, WATERMARK_DELAY_S, Case
from bench.flink_compat.rows import row
from job.sinks.base import Sink


def encode(message_class: type[Message], event: dict[str, Any]) -> bytes:
    """Return ``event`` (field name -> value; enums by name, the Timestamp as a datetime) as protobuf."""
    msg = message_class()
    fields = msg.DESCRIPTOR.fields_by_name
    for name, v in event.items():
        field = fields[name]
        if field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
            getattr(msg, name).FromDatetime(v)
        elif field.enum_type is not None:
            setattr(msg, name, field.enum_type.values_by_name[v].number)
        else:
            setattr(msg, name, v)
    return msg.SerializeToString()


def produce_datasets(bootstrap: str, kind: str = "tansu") -> dict[str, dict[str, str]]:
    """Create a topic (one partition: the order of the events is kept) per table of every data set and
    produce its events in order; return {data set: {table: topic}}. Raises StackError/RuntimeError when
    the broker refuses a topic or a delivery."""
    from job.schema.registry import default_registry
    from job.stack.broker import create_topic

    registry = default_registry()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    out: dict[str, dict[str, str]] = {}
    for name, tables in DATASETS.items():
        out[name] = {}
        for table, events in tables.items():
            topic = f"flinkcompat-{name}-{table}-{uuid.uuid4().hex[:8]}"
            create_topic(bootstrap, topic, 1, kind=kind)  # type: ignore[arg-type]
            cls = registry.message_class(TABLES[table])
            for event in events:
                producer.produce(topic, encode(cls, event))
            out[name][table] = topic
    if producer.flush(60) != 0:
        raise RuntimeError("flink_compat: events not delivered to the broker within 60 s")
    return out


_ARROW_TYPES = {
    "int8": "TINYINT",
    "int16": "SMALLINT",
    "int32": "INT",
    "int64": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "bool": "BOOLEAN",
    "string": "STRING",
    "large_string": "STRING",
    "date32[day]": "DATE",
    "binary": "BYTES",
    "large_binary": "BYTES",
}


def flink_type(kind: pa.DataType) -> str:
    """Return the Flink name of the SQL type of an Arrow column of Spark's rows."""
    if pa.types.is_decimal(kind):
        return f"DECIMAL({kind.precision}, {kind.scale})"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMP(6)"
    return _ARROW_TYPES.get(str(kind), str(kind).upper())


class CollectSink(Sink):
    """Keeps every row the dagger writes, in memory (the harness compares them)."""

    name = "collect"

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] = []
        #: each column's type, named as Flink names it (bench.flink_compat.rows.type_name compares them)
        self.types: list[str] = []
        self.rows: list[list[Any]] = []
        #: (batch id, rows written) of every micro-batch that wrote rows
        self.batches: list[tuple[int, int]] = []

    def open(self) -> None:
        return None

    def _write(self, table: pa.Table, batch_id: int) -> int:
        self.columns = table.column_names
        self.types = [flink_type(f.type) for f in table.schema]
        floats = [i for i, f in enumerate(table.schema) if pa.types.is_float32(f.type)]
        for r in table.to_pylist():
            values = list(r.values())
            for i in floats:  # as PyFlink gives a FLOAT: the shortest decimal that is that float32
                values[i] = None if values[i] is None else float(str(np.float32(values[i])))
            self.rows.append(row(values))
        if table.num_rows:
            self.batches.append((batch_id, table.num_rows))
        return table.num_rows


def spec_text(case: Case, topics: dict[str, str], bootstrap: str, checkpoint: Path) -> str:
    """Return the dagger spec that runs ``case`` over ``topics`` (its data set's {table: topic})."""
    name = f"compat-{case.id}-{uuid.uuid4().hex[:6]}"
    batch = 1 if case.one_record_batches else 100_000
    streams = "".join(
        f"""  - table: {table}
    topics: [{topics[table]}]
    proto_class: {TABLES[table]}
    timestamp_field: event_timestamp
    bootstrap_servers: {bootstrap}
    group: {name}-{table}
    start_from: earliest
    max_records_per_batch: {batch}
"""
        for table in case.tables
    )
    sql = "\n".join("  " + line for line in case.sql.splitlines())
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


def run_case(
    spark: Any, case: Case, topics: dict[str, dict[str, str]], bootstrap: str, folder: Path
) -> dict[str, Any]:
    """Run ``case`` as a dagger over its data set's topics until every record is read (and the windows
    the last batch closed are written); return {"columns", "rows"} (comparable form). Raises DaggerError
    when the query fails."""
    from job.query.plan import plan
    from job.query.runner import DaggerJob, explain_failure
    from job.spec import parse_spec

    work = folder / f"{case.id}-{uuid.uuid4().hex[:6]}"
    text = spec_text(case, topics[case.dataset], bootstrap, work / "ckpt")
    sink = CollectSink()
    job = DaggerJob(plan(parse_spec(text, f"{case.id}.yaml"), work), spark, sinks=[sink])
    query = job.start(available_now=True)
    try:
        try:
            query.awaitTermination()
        except (
            Exception
        ) as exc:  # the query failed: the one-line error a person reads, as `daggers run` gives
            raise explain_failure(exc) from None
        if query.exception() is not None:
            raise explain_failure(query.exception())
        inputs = [
            (p.batchId, p.numInputRows, (p.eventTime or {}).get("watermark")) for p in query.recentProgress
        ]
    finally:
        job.stop()
    return {
        "columns": sink.columns,
        "types": sink.types,
        "rows": sink.rows,
        "batches": sink.batches,
        "inputs": inputs,
    }
