"""Fused daggers (``isolation: fused``): daggers of one host that read the same stream, run as one query.

Every streaming query pays Spark's fixed cost in each micro-batch (planning, code generation, task
scheduling, the offset and commit logs): ~0.4 core-s for a light windowed dagger, and a windowed dagger
needs one or two at each window end. A hundred daggers whose windows end in the same minute then queue
behind each other on a small machine. Daggers that read one stream the same way can share one query:
one micro-batch a trigger for all of them. Those whose SQL has one simple shape merge into ONE
aggregation (:mod:`job.shared.merge`: one read of each event, one shuffle and one state store for the
group); the others are branches of a UNION ALL, each with its own aggregation and window state.
Measured (``bench/bench_density.py``, 2 cores): 20 daggers as a UNION ALL in one query took 0.09 cores
against 0.22-0.31 as 20 queries.

What may fuse (:func:`why_not_fusible`): a query with no ``udf_file`` and no failover that aggregates per
TUMBLE or HOP window (a HOP's output must show the window's end or start) or keeps no state at all (a
pass-through); an interval join (``b.rowtime BETWEEN a.rowtime … AND …``) under a window, when it merges
into one aggregation. Its *group* (:func:`fusion_key`) is every fused dagger of the host with the same
streams (topics, brokers, schema, start, bad-record policy, stream transformers), join reach, watermark
delay, window, trigger, parallelism and SQL settings. A fused dagger keeps its own sinks, ``status.json``, ``query.json`` and state file in the
host's folder; the group's offsets and window state live in the group's checkpoint.

A group's members change (a dagger deployed, removed or edited) by starting a new *generation* of the
group's query: the old one stops once its closed windows are written, and the new one reads the topic
again from the start of the oldest window still open (:func:`restart_ms`) and keeps only events from
then on. Each open window is computed again from all of its events; of a HOP's windows, those the old
generation wrote (they overlap the new start) are left out. So no member's windows have a gap or a
double, and a member that joins has every window from the oldest open one on. A group of pass-throughs
keeps no window: its next generation starts at the offsets where the last one stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from job.query.plan import DaggerPlan, StreamPlan
from job.sources.kafka import SourceConfig
from job.sql.rewrite import interval_ms

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from job.shared.merge import Shape

#: The column of a group's output that names the dagger of each row, and the one with the row as JSON.
MEMBER_COLUMN = "__member"
ROW_COLUMN = "__row"
#: How timestamps travel through a group's JSON rows (microseconds, UTC offset): pyarrow reads them back.
JSON_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
#: The source settings a group's members may differ in: each dagger's columns are read for the group.
_PER_MEMBER = (
    "columns",
    "derived",
    "hidden",
    "batch_order",
    "bad_records_dir",
    "dead_letter_topic",
    "positions_dir",
    "loss_dir",
    "align_ms",  # half the watermark delay, which the key holds: out of the key, which it kept before it came
)


def why_not_fusible(plan: DaggerPlan) -> str | None:
    """Return why ``plan`` cannot run fused (None when it can)."""
    from job.shared.merge import member_shape

    spec, tr = plan.spec, plan.translation
    if tr.aggregates and tr.window is None:
        return "it aggregates without a window"
    if tr.window is not None and tr.window[1] is not None and window_end_column(plan) is None:
        return "its HOP window's end or start is not a column of its output"
    if len(plan.streams) > 1 or tr.join_lag_ms != 0:
        # a join fuses when it merges (job.shared.merge): a new generation then leaves out the windows
        # that start before it, whose events it read again only for the join's sake
        if tr.join_lag_ms is None:
            return "it joins on something other than a time interval"
        shape = member_shape(tr.spark_sql, {s.table for s in plan.streams})
        if isinstance(shape, str) or shape.window is None or spec.transformers:
            return f"its join does not merge into one aggregation ({shape if isinstance(shape, str) else 'no window'})"
    if tr.dedups:
        return "it deduplicates (ROW_NUMBER() ... = 1), through a view of its own"
    if spec.udf_file:
        return "it has a udf_file"
    if spec.lookups:  # a generation's batch ids start again at 0: the answers kept for a replay are per query
        return "it has lookups"
    if any(s.source.failover for s in plan.streams):
        return "its stream has a failover cluster"
    return None


def window_end_column(plan: DaggerPlan) -> tuple[str, int] | None:
    """Return (output column, ms to add) that gives each output row's window end: the column of
    ``HOP_END``/``TUMBLE_END`` (0), or of ``HOP_START``/``TUMBLE_START`` (the window's size); None when
    the output has neither."""
    from sqlglot import exp

    from job.shared.merge import parse_spark

    tree = parse_spark(plan.translation.spark_sql)
    if not isinstance(tree, exp.Select) or plan.translation.window is None:
        return None
    found: tuple[str, int] | None = None
    for item in tree.expressions:
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column) and node.table == "window" and node.name in ("end", "start"):
            shift = 0 if node.name == "end" else interval_ms(plan.translation.window[0])
            if found is None or shift == 0:
                found = (item.alias_or_name, shift)
    return found


def fusion_key(plan: DaggerPlan) -> str:
    """Return the group ``plan`` fuses into: equal for daggers that may share one query. Call only for a
    plan :func:`why_not_fusible` accepts."""
    streams = []
    for planned, stream in zip(plan.streams, plan.spec.streams, strict=True):
        source = {k: v for k, v in dataclasses.asdict(planned.source).items() if k not in _PER_MEMBER}
        if stream.bad_records == "dead-letter":
            source["dead_letter_topic"] = planned.source.dead_letter_topic
        streams.append(
            {
                "source": source,
                "table": stream.table,
                "timestamp": [stream.timestamp_field, planned.timestamp_kind],
                "stream_transformers": [t.model_dump(mode="json") for t in stream.transformers],
            }
        )
    parts = {
        "streams": streams,
        "join_lag_ms": plan.translation.join_lag_ms,
        "watermark_delay_ms": plan.spec.watermark_delay_ms,
        "window": list(plan.translation.window or ()),
        "trigger_s": plan.trigger_interval_s,
        "parallelism": plan.spec.parallelism,
        "light": plan.spec.light,
        "dart_store": plan.spec.dart_store,
        "sql_conf": sorted((k, v) for k, v in plan.spec.spark_conf.items() if k.startswith("spark.sql.")),
        "features": sorted(plan.features.items()),
    }
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"g-{digest[:12]}"


def merged_source(
    sources: Sequence[SourceConfig],
    bad_records_dir: Path,
    start_from: str | None,
    loss_dir: Path | None = None,
) -> SourceConfig:
    """Return the source of a group whose members read ``sources`` (equal but for :data:`_PER_MEMBER`):
    every column any of them reads, every derived column once, a column hidden only when no member reads
    it as it is; bad records under the group's ``bad_records_dir``, its data-loss marks under ``loss_dir``
    (the group's checkpoint holds its offsets); from ``start_from`` when given (epoch ms, or the JSON of
    ``{topic: {partition: offset}}``)."""
    first = sources[0]
    columns = sorted({c for s in sources for c in s.columns})
    direct = {c for s in sources for c in s.columns if c not in set(s.hidden or [])}
    hidden = sorted({c for s in sources for c in s.hidden or []} - direct)
    derived: dict[str, list[Any]] = {}
    for s in sources:
        for d in s.derived or []:
            derived.setdefault(str(d[0]), d)
    orders = {s.batch_order for s in sources}
    return dataclasses.replace(
        first,
        columns=columns,
        hidden=hidden,
        derived=list(derived.values()),
        batch_order=orders.pop() if len(orders) == 1 else "",
        bad_records_dir=str(bad_records_dir),
        loss_dir=str(loss_dir) if loss_dir is not None else first.loss_dir,
        start_from=start_from if start_from is not None else first.start_from,
    )


def group_plan(members: Sequence[DaggerPlan], checkpoint: Path, start_from: str | None) -> DaggerPlan:
    """Return the plan of the group's sources: the first member's, with each stream merged (see
    :func:`merged_source`) and the group's ``checkpoint``."""
    first = members[0]
    streams = []
    for i, stream in enumerate(first.streams):
        source = merged_source(
            [m.streams[i].source for m in members],
            checkpoint / "bad_records" / stream.table,
            start_from,
            loss_dir=checkpoint / "data-loss" / stream.table,
        )
        streams.append(StreamPlan(stream.table, source, stream.timestamp_field, stream.timestamp_kind))
    return dataclasses.replace(first, streams=streams, checkpoint=checkpoint)


def restart_ms(watermark_ms: int, window: Sequence[str | None]) -> int:
    """Return where a new generation of a group with ``window`` (size, slide or None) starts reading,
    given the watermark its old one had evicted by: the start of the oldest window still open (whose
    end is past the watermark)."""
    size = interval_ms(str(window[0]))
    slide = interval_ms(str(window[1])) if len(window) > 1 and window[1] else size
    return ((watermark_ms - size) // slide + 1) * slide


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def records_read(start: Any, end: Any, seen: dict[str, dict[str, int]] | None = None) -> int:
    """Return the records of a micro-batch from offsets ``start`` to ``end`` (as a progress event gives
    them: ``{topic: {partition: offset}}``, or its JSON), or with ``seen`` only those an earlier generation
    had not read (at or past its committed offsets ``seen``).

    A group's query reads its source once for each member, and Spark's ``numInputRows`` counts every read:
    a member's count comes from the offsets instead."""
    from job.query.offset_log import lag_of

    start_, end_ = _offsets(start), _offsets(end)
    end_ = {t: parts for t, parts in end_.items() if isinstance(parts, dict)}
    floor = {
        t: {
            p: max(int((start_.get(t) or {}).get(p, 0)), int(((seen or {}).get(t) or {}).get(str(p), 0)))
            for p in parts
        }
        for t, parts in end_.items()
    }
    return lag_of(floor, end_)


@dataclass(frozen=True)
class Branch:
    """One member's part of a group's query: its output schema (as its sinks see it)."""

    key: str
    schema: pa.Schema


def group_frame(
    spark: SparkSession,
    group: DaggerPlan,
    members: dict[str, DaggerPlan],
    start_ms: int | None,
    written_ms: int | None = None,
    written_by: Mapping[str, int] | None = None,
) -> tuple[DataFrame, dict[str, Branch]]:
    """Return the group's streaming DataFrame (``__member``, ``__row`` as JSON) and each member's branch.

    Each stream's view is the group's source, without the events before ``start_ms`` (less the join's
    reach, :attr:`job.sql.translate.Translation.join_lag_ms`: the windows that start before ``start_ms``
    are then left out). The members whose query merges (:func:`job.shared.merge.member_shape`) run as
    ONE query per source (stream, or join) that reads each event once and aggregates once
    (:func:`job.shared.merge.merged_sql`); each other member's SQL runs over the views as a branch of its
    own, with its output transformers; all are one UNION ALL. With HOP windows a window that ended by
    ``written_ms`` (an earlier generation wrote it) overlaps the new start: such rows are left out.
    ``written_by`` (member key -> ms) leaves out, of that member's rows, the windows that ended by then
    (its earlier query, in a group of one, wrote them); such a member's output must show its window's
    end or start unless it merges. Raises what planning a member raises (SqlError, SpecError), and
    ValueError for a member of ``written_by`` whose rows cannot be told apart by window."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_schema

    from job.query import late
    from job.query.runner import stream_frame
    from job.shared.merge import member_shape
    from job.spark import jvm as jvm_functions

    reach = group.translation.join_lag_ms or 0
    late_ms = late_window_ms(group, members.values())
    for i, stream in enumerate(group.streams):
        frame = stream_frame(spark, group, i)
        if start_ms is not None:
            frame = frame.where(F.col("rowtime") >= F.timestamp_millis(F.lit(start_ms - reach)))
        if late_ms is not None and jvm_functions.available(spark):
            # the stream's records per window, which count each member's records dropped as late
            frame = late.observe_windows(frame, i, bool(stream.source.partial), late_ms)
        frame.createOrReplaceTempView(stream.table)
    tables = {s.table for s in group.streams}
    hop = bool((group.translation.window or (None, None))[1])
    branches: dict[str, Branch] = {}
    mergeable: dict[str, dict[str, tuple[Shape, list[str | None]]]] = {}
    frames = []
    for key, plan in members.items():
        result, names = member_result(spark, plan)
        branches[key] = Branch(key, to_arrow_schema(result.schema, timezone="UTC"))
        shape = (
            member_shape(plan.translation.spark_sql, tables)
            if not plan.spec.transformers
            else "it has output transformers"
        )
        if not isinstance(shape, str) and len(shape.outputs) == len(names):  # no *
            mergeable.setdefault(shape.source, {})[key] = (shape, names)
            continue
        log.info(
            "fused %s: a branch of its own in its group (%s)",
            key,
            shape if isinstance(shape, str) else "its output columns",
        )
        floor = max(
            [w for w in (written_ms if hop else None, (written_by or {}).get(key)) if w is not None],
            default=None,
        )
        end = window_end_column(plan) if floor is not None else None
        if end is not None and floor is not None:
            column, shift = end
            result = result.where(F.col(f"`{column}`") > F.timestamp_millis(F.lit(floor - shift)))
        elif key in (written_by or {}):
            raise ValueError(f"{key}: its output shows neither its window's end nor its start")
        frames.append(
            result.select(
                F.lit(key).alias(MEMBER_COLUMN),
                F.to_json(
                    F.struct(*[F.col(f"`{c}`") for c in result.columns]),
                    {"timestampFormat": JSON_TIME_FORMAT},
                ).alias(ROW_COLUMN),
            )
        )
    for _, merged in sorted(mergeable.items()):
        frames.append(
            merged_frame(
                spark,
                merged,
                written_ms if hop else None,
                start_ms if reach and start_ms is not None else None,
                {k: w for k, w in (written_by or {}).items() if k in merged},
            )
        )
    return reduce(lambda a, b: a.unionAll(b), frames), branches


def late_window_ms(group: DaggerPlan, members: Iterable[DaggerPlan]) -> int | None:
    """The TUMBLE window's size when a fused group observes its stream's records per window
    (:mod:`job.query.late`): one stream, a TUMBLE window and members that read only it; else None. A member
    whose query filters its records (:attr:`job.sql.translate.Translation.late_where`) counts those its
    WHERE would have dropped too: its figure is an upper bound (:func:`job.query.late.counted_before_filter`)."""
    window = group.translation.window
    if len(group.streams) != 1 or window is None or window[1] or group.translation.join_lag_ms:
        return None
    sizes = {m.translation.late_window_ms for m in members}
    if sizes == {None}:
        try:
            return interval_ms(window[0])
        except Exception:  # noqa: BLE001 - a size not read here: Spark's figure stays
            return None
    return next((s for s in sizes if s is not None), None)


def member_result(spark: SparkSession, plan: DaggerPlan) -> tuple[DataFrame, list[str | None]]:
    """Return a member's own result (its SQL over the stream's view, less internal columns, with its
    output transformers) and, for each item of its SELECT, the name of its output column (None for an
    internal one)."""
    from job.transform import apply_output_transformers

    result = spark.sql(plan.translation.spark_sql)
    names = output_names(result.columns)
    internal = [c for c in result.columns if c not in names]
    return apply_output_transformers(result.drop(*internal) if internal else result, plan.spec), names


def output_names(columns: Sequence[str]) -> list[str | None]:
    """Return the names of a query's output ``columns``, None for those internal to the engine (the
    watermark barrier, an S2 cell its source computed)."""
    from job.sql.pushdown import DERIVED_PREFIX
    from job.sql.rewrite import BARRIER_COLUMN

    return [None if c == BARRIER_COLUMN or c.startswith(DERIVED_PREFIX) else c for c in columns]


def merged_frame(
    spark: SparkSession,
    members: Mapping[str, tuple[Shape, Sequence[str | None]]],
    written_ms: int | None = None,
    from_ms: int | None = None,
    written_by: Mapping[str, int] | None = None,
) -> DataFrame:
    """Return the one query (``__member``, ``__row``) of the members that merge, over the views of the
    source they read: each one's shape (:func:`job.shared.merge.member_shape`) and output names (see
    :func:`output_names`). Their keys' and values' types are those Spark gives their expressions over the
    views. See :func:`job.shared.merge.merged_sql` for ``written_ms``, ``from_ms`` and ``written_by``."""
    from job.shared.merge import Member, drop_outputs, merged_sql
    from job.sql.rewrite import render

    merged = []
    for key, (shape, names) in sorted(members.items()):  # the same order each time: a resumed checkpoint
        shape = drop_outputs(shape, [n is None for n in names])
        probe = [f"{render(k)} AS `k{i}`" for i, k in enumerate(shape.keys)]
        probe += [
            f"{render(v)} AS `a{j}_{n}`"
            for j, a in enumerate(shape.aggregates)
            for n, v in enumerate(a.values)
        ]
        types = (
            [
                f.dataType.simpleString()
                for f in spark.sql(f"SELECT {', '.join(probe)} FROM {shape.source}").schema
            ]
            if probe
            else []
        )
        key_types = tuple(types[: len(shape.keys)])
        rest = iter(types[len(shape.keys) :])
        value_types = tuple(tuple(next(rest) for _ in a.values) for a in shape.aggregates)
        merged.append(Member(key, shape, tuple(n for n in names if n is not None), key_types, value_types))
    sql = merged_sql(merged, JSON_TIME_FORMAT, written_ms, MEMBER_COLUMN, ROW_COLUMN, from_ms, written_by)
    log.info(
        "fused: %d daggers in one %s",
        len(merged),
        "aggregation" if merged[0].shape.stateful else "projection",
    )
    return spark.sql(sql)


def split_rows(table: pa.Table, branches: dict[str, Branch]) -> dict[str, pa.Table]:
    """Return each member's rows of a group's micro-batch ``table`` (``__member``, ``__row``), as Arrow
    tables of the member's schema (empty for a member with no rows). A row whose ``__member`` names
    several members (:data:`job.shared.merge.MEMBER_SEP` between them) is each one's, and parsed once."""
    import io

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as paj

    from job.shared.merge import MEMBER_SEP

    def parse(label: str, schema: pa.Schema) -> pa.Table:
        rows = pc.filter(table.column(ROW_COLUMN), pc.equal(table.column(MEMBER_COLUMN), label))
        data = "\n".join(str(r) for r in rows.to_pylist()).encode()
        parsed = paj.read_json(
            io.BytesIO(data),
            parse_options=paj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
        return pa.Table.from_arrays(
            [
                parsed.column(f.name) if f.name in parsed.column_names else pa.nulls(parsed.num_rows, f.type)
                for f in schema
            ],
            schema=schema,
        )

    parts: dict[str, list[pa.Table]] = {key: [] for key in branches}
    parsed: dict[tuple[str, pa.Schema], pa.Table] = {}
    labels = pc.unique(table.column(MEMBER_COLUMN)).to_pylist() if table.num_rows else []
    for label in labels:
        for key in label.split(MEMBER_SEP):
            if key in parts:
                schema = branches[key].schema
                if (label, schema) not in parsed:
                    parsed[label, schema] = parse(label, schema)
                parts[key].append(parsed[label, schema])
    return {
        key: (pa.concat_tables(got) if len(got) > 1 else got[0])
        if got
        else branches[key].schema.empty_table()
        for key, got in parts.items()
    }
