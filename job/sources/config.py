"""The Kafka source's settings and its partitions (offset ranges): what the driver plans and an executor reads.

A :class:`SourceConfig` travels as Spark options (:func:`source_options`, :meth:`SourceConfig.from_options`);
an :class:`OffsetRange` (or a :class:`RangeGroup` of them) is one Spark task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DoubleType,
    FloatType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from job.errors import SourceError
from job.schema.arrow import ArrowDecoder
from job.schema.registry import SchemaRegistry
from job.sources import failover as kfo

SOURCE_NAME = "dagger_kafka"
#: The column that, where the source aggregates first (job.sources.partial), holds the records each row stands
#: for.
PARTIAL_RECORDS = "__dagger_records"


@dataclass(frozen=True)
class SourceConfig:
    """The parsed options of one stream's source."""

    bootstrap_servers: str
    topics: list[str]
    proto_class: str
    descriptor_set_b64: str
    columns: list[str]
    start_from: str = "earliest"  # earliest, latest, a time, or {topic: {partition: offset}} (a fused group)
    max_records_per_batch: int = 0
    split_records: int = 200_000
    #: A micro-batch's ranges are read by ceil(records / pack_records) tasks, at least one, each range
    #: whole (small ranges share a task: a task's fixed cost dwarfs reading a few hundred records).
    pack_records: int = 20_000
    #: At most this many tasks read a micro-batch (0: no cap). A shared host sets it for its heavy daggers
    #: so that a task slot stays free for the light ones (job.shared.hosted.heavy_task_cap).
    max_tasks: int = 0
    bad_records: str = "skip"
    bad_records_dir: str = ""
    consumer_config: dict[str, str] | None = None
    read_timeout_s: float = 60.0
    max_outage_s: float = 600.0
    fail_on_data_loss: bool = (
        True  # a position the broker no longer holds fails the stream (job.sources.data_loss)
    )
    dead_letter_topic: str = ""
    derived: list[list[Any]] | None = None  # columns computed from decoded ones (job.sql.pushdown)
    hidden: list[str] | None = None  # decoded only to compute derived columns: not handed to Spark
    batch_order: str = ""  # the column each batch is sorted by, stably ("": arrival order; job.sql.pushdown)
    failover_bootstrap_servers: str = ""  # the secondary cluster ("" : no failover)
    failover_after_s: float = 30.0
    positions_dir: str = ""  # where readers record the last record of each range read on the primary
    loss_dir: str = ""  # where a data loss's first sight is kept (job.sources.loss_mark)
    close_period_ms: int = (
        0  # window boundaries every this much event time (0: no windows; job.sources.pacing)
    )
    close_delay_ms: int = 0  # ... closed this long after, by the watermark
    #: A batch capped by the read limit reads its partitions to one record time give or take this (half the
    #: watermark delay: no record left unread is a delay older than one read; job.sources.align)
    align_ms: int = 0
    read_at_close: bool = False  # plan new data only when it closes a window (job.sources.pacing)
    gather_ms: int = 0  # far from a window boundary, plan new data at most this often (job.sources.pacing)
    #: A batch read's end, ``{topic: {partition: offset}}`` as JSON: each partition is read up to (not
    #: including) its offset here, or its end when that comes first ("": up to the end; batch reads only).
    end_at: str = ""
    #: What the source aggregates before Spark (job.sql.partial.SourcePartial as JSON; None: nothing): each
    #: task then hands over one row per window and key (job.sources.partial).
    partial: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.batch_order:
            return
        columns = self.output_columns()
        if self.batch_order not in columns:
            raise SourceError(
                f"batch_order {self.batch_order!r} is not a column the source hands over "
                f"({', '.join(columns)})"
            )

    def output_columns(self) -> list[str]:
        """Return the names of the columns each batch hands to Spark: the decoded ones but the hidden,
        then the derived ones."""
        if self.partial:
            return [
                *self.partial["keys"],
                self.partial["time"],
                *self.partial["distinct"].values(),
                *(output for _, _, output in self.partial.get("aggregates") or []),
                PARTIAL_RECORDS,
            ]
        hidden = set(self.hidden or [])
        return [c for c in self.columns if c not in hidden] + [str(d[0]) for d in self.derived or []]

    @property
    def failover(self) -> bool:
        """Whether the stream names a secondary cluster."""
        return bool(self.failover_bootstrap_servers)

    def bootstrap(self, cluster: str) -> str:
        """Return the bootstrap servers of ``cluster`` (primary or secondary)."""
        return self.failover_bootstrap_servers if cluster == kfo.SECONDARY else self.bootstrap_servers

    @classmethod
    def from_options(cls, options: Any) -> SourceConfig:
        """Build from Spark's (lower-cased) option map; raise SourceError naming a missing option."""

        def need(key: str) -> str:
            if key not in options:
                raise SourceError(f"the {SOURCE_NAME} source needs the option {key!r}")
            return str(options[key])

        return cls(
            bootstrap_servers=need("bootstrap_servers"),
            topics=json.loads(need("topics")),
            proto_class=need("proto_class"),
            descriptor_set_b64=need("descriptor_set"),
            columns=json.loads(need("columns")),
            start_from=str(options.get("start_from", "earliest")),
            max_records_per_batch=int(options.get("max_records_per_batch", 0)),
            split_records=int(options.get("split_records", 200_000)),
            pack_records=int(options.get("pack_records", 20_000)),
            max_tasks=int(options.get("max_tasks", 0)),
            bad_records=str(options.get("bad_records", "skip")),
            bad_records_dir=str(options.get("bad_records_dir", "")),
            consumer_config=json.loads(options.get("consumer_config", "{}")),
            read_timeout_s=float(options.get("read_timeout_s", 60.0)),
            max_outage_s=float(options.get("max_outage_s", 600.0)),
            fail_on_data_loss=options.get("fail_on_data_loss", "true") == "true",
            dead_letter_topic=str(options.get("dead_letter_topic", "")),
            derived=json.loads(options.get("derived", "[]")),
            hidden=json.loads(options.get("hidden", "[]")),
            batch_order=str(options.get("batch_order", "")),
            failover_bootstrap_servers=str(options.get("failover_bootstrap_servers", "")),
            failover_after_s=float(options.get("failover_after_s", 30.0)),
            positions_dir=str(options.get("positions_dir", "")),
            loss_dir=str(options.get("loss_dir", "")),
            close_period_ms=int(options.get("close_period_ms", 0)),
            close_delay_ms=int(options.get("close_delay_ms", 0)),
            align_ms=int(options.get("align_ms", 0)),
            read_at_close=options.get("read_at_close", "false") == "true",
            gather_ms=int(options.get("gather_ms", 0)),
            end_at=str(options.get("end_at", "")),
            partial=json.loads(options.get("partial", "null")),
        )

    def decoder(self) -> ArrowDecoder:
        """Return the decoder for this stream's message class and columns."""
        return ArrowDecoder(SchemaRegistry.from_b64(self.descriptor_set_b64), self.proto_class, self.columns)

    def spark_schema(self) -> StructType:
        """Return the rows' schema: the decoded columns but the hidden ones, then the derived ones
        (``s2id``: strings, ``s2cell``: longs)."""
        hidden = set(self.hidden or [])
        fields = [f for f in self.decoder().spark_schema.fields if f.name not in hidden] + [
            StructField(str(name), LongType() if function in ("s2cell", "bigint_of") else StringType(), True)
            for name, function, *_ in self.derived or []
        ]
        if self.partial:
            # the keys and the time as decoded, the DistinctCount buffers, the partial aggregates, the records
            by_name = {f.name: f for f in fields}
            by_name.update({f.name: f for f in self.decoder().spark_schema.fields})
            return StructType(
                [by_name[c] for c in (*self.partial["keys"], self.partial["time"])]
                + [StructField(c, BinaryType(), True) for c in self.partial["distinct"].values()]
                + [
                    StructField(output, partial_type(function, by_name[column].dataType), True)
                    for function, column, output in self.partial.get("aggregates") or []
                ]
                + [StructField(PARTIAL_RECORDS, LongType(), True)]
            )
        return StructType(fields)

    def add_derived(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Append the derived columns to a decoded batch (S2 cells and numeric keys computed with numpy) and
        drop the hidden ones. Raises SourceError for a derived column of an unknown function."""
        if not self.derived:
            return batch
        from job.functions.spark_udfs import s2cell_arrow, s2id_arrow
        from job.sources.numeric_key import bigint_of

        functions = {"s2id": s2id_arrow, "s2cell": s2cell_arrow}
        arrays, names = list(batch.columns), list(batch.schema.names)
        for name, function, *args in self.derived:
            if function == "bigint_of":
                arrays.append(bigint_of(args[0], batch))
            elif function in functions:
                lat, lng, level = args
                levels = pa.repeat(pa.scalar(int(level), pa.int32()), batch.num_rows)
                arrays.append(functions[function](batch.column(lat), batch.column(lng), levels))
            else:
                raise SourceError(f"unknown derived column function {function!r} for {name!r}")
            names.append(str(name))
        hidden = set(self.hidden or [])
        keep = [i for i, n in enumerate(names) if n not in hidden]
        return pa.RecordBatch.from_arrays([arrays[i] for i in keep], names=[names[i] for i in keep])

    def ordered(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Return ``batch`` sorted stably by ``batch_order`` (rows with equal keys keep their order)."""
        if not self.batch_order or batch.num_rows < 2:
            return batch
        return batch.take(pc.sort_indices(batch, [(self.batch_order, "ascending")]))  # nulls last


def partial_type(function: str, column: DataType) -> DataType:
    """The Spark type of a source's partial ``function`` (job.sql.partial.FUNCTIONS) of a column of type
    ``column``: a count is a BIGINT; a sum a BIGINT of integers, a DOUBLE of FLOATs and DOUBLEs (as Spark's
    SUM sums them); a minimum and a maximum the column's type."""
    if function == "count":
        return LongType()
    if function == "sum":
        return DoubleType() if isinstance(column, FloatType | DoubleType) else LongType()
    return column


def source_options(cfg: SourceConfig) -> dict[str, str]:
    """Return the Spark options that :meth:`SourceConfig.from_options` reads back."""
    return {
        "bootstrap_servers": cfg.bootstrap_servers,
        "topics": json.dumps(cfg.topics),
        "proto_class": cfg.proto_class,
        "descriptor_set": cfg.descriptor_set_b64,
        "columns": json.dumps(cfg.columns),
        "start_from": cfg.start_from,
        "max_records_per_batch": str(cfg.max_records_per_batch),
        "split_records": str(cfg.split_records),
        "pack_records": str(cfg.pack_records),
        "max_tasks": str(cfg.max_tasks),
        "bad_records": cfg.bad_records,
        "bad_records_dir": cfg.bad_records_dir,
        "consumer_config": json.dumps(cfg.consumer_config or {}),
        "read_timeout_s": str(cfg.read_timeout_s),
        "max_outage_s": str(cfg.max_outage_s),
        "fail_on_data_loss": "true" if cfg.fail_on_data_loss else "false",
        "dead_letter_topic": cfg.dead_letter_topic,
        "derived": json.dumps(cfg.derived or []),
        "hidden": json.dumps(cfg.hidden or []),
        "batch_order": cfg.batch_order,
        "failover_bootstrap_servers": cfg.failover_bootstrap_servers,
        "failover_after_s": str(cfg.failover_after_s),
        "positions_dir": cfg.positions_dir,
        "loss_dir": cfg.loss_dir,
        "close_period_ms": str(cfg.close_period_ms),
        "read_at_close": "true" if cfg.read_at_close else "false",
        "close_delay_ms": str(cfg.close_delay_ms),
        "align_ms": str(cfg.align_ms),
        "gather_ms": str(cfg.gather_ms),
        "end_at": cfg.end_at,
        "partial": json.dumps(cfg.partial),
    }


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """Records ``[start, end)`` of one topic partition on one cluster (primary or secondary): one Spark task.

    ``anchor`` is where the micro-batch starts on that partition (``start`` or before it, when a long
    range was split): the position recorded there lets a reader move a primary range to the secondary.
    """

    topic: str
    partition: int
    start: int
    end: int
    cluster: str
    anchor: int

    def __init__(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,  # InputPartition has __init__(value)
        cluster: str = kfo.PRIMARY,
        anchor: int | None = None,
    ) -> None:
        object.__setattr__(self, "topic", topic)
        object.__setattr__(self, "partition", partition)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "cluster", cluster)
        object.__setattr__(self, "anchor", start if anchor is None else anchor)
        object.__setattr__(self, "value", (topic, partition, start, end, cluster, self.anchor))


class RangeGroup(InputPartition):
    """Several offset ranges of one micro-batch, read one after the other by one Spark task."""

    ranges: tuple[OffsetRange, ...]

    def __init__(self, ranges: list[OffsetRange]) -> None:
        object.__setattr__(self, "ranges", tuple(ranges))
        object.__setattr__(self, "value", tuple(r.value for r in ranges))
