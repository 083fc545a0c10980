"""Can a new spec version resume from the old version's checkpoint?

Spark keeps a streaming query's source offsets and its window (or join) state in the checkpoint.
Following Spark's rules for restarting a changed query:

* the state must keep its shape: the same GROUP BY keys, window and aggregate functions (and join
  conditions) of every aggregating SELECT. Filters and projections may change;
* the sources must be the same streams: table names, proto classes, timestamp fields and the Kafka
  cluster (offsets of another cluster mean nothing). Topics may be added (read from their first
  record) or removed;
* ``spark.sql.shuffle.partitions`` is fixed by the checkpoint: a new ``parallelism`` does not apply;
* ``start_from`` only matters for a fresh checkpoint.

Anything else (sinks, trigger interval, batch limits, watermark delay, bad-record policy) applies
from the next micro-batch.
"""

from __future__ import annotations

from sqlglot import exp

from job.control.views import Compatibility
from job.spec import DaggerSpec
from job.sql.parse import parse
from job.sql.validate import has_aggregate


def _norm(node: exp.Expr) -> str:
    node = node.copy()
    for fn in node.find_all(exp.Anonymous):
        fn.set("this", str(fn.name).upper())
    return node.sql(dialect="spark", normalize=True)


def _aggregates(select: exp.Select) -> list[str]:
    out: list[str] = []
    for item in select.expressions:
        for sub in item.walk():
            if isinstance(sub, exp.AggFunc) or (
                isinstance(sub, exp.Anonymous) and str(sub.name).lower() == "distinctcount"
            ):
                out.append(_norm(sub))
    return sorted(out)


def state_signature(sql: str) -> list[tuple[str, ...]]:
    """Return the shape of the query's state: per aggregating SELECT its GROUP BY keys and aggregates,
    and per join its condition. Raises SqlError when the query does not parse."""
    tree = parse(sql)
    shape: list[tuple[str, ...]] = []
    for select in tree.find_all(exp.Select):
        if has_aggregate(select):
            group = select.args.get("group")
            keys = sorted(_norm(k) for k in group.expressions) if group else []
            shape.append(("aggregate", *keys, "|", *_aggregates(select)))
    for join in tree.find_all(exp.Join):
        on = join.args.get("on")
        shape.append(
            ("join", _norm(on) if on is not None else "", str(join.side or ""), str(join.kind or ""))
        )
    return shape


def _streams_reasons(old: DaggerSpec, new: DaggerSpec) -> tuple[list[str], list[str]]:
    reasons: list[str] = []
    notes: list[str] = []
    if [s.table for s in old.streams] != [s.table for s in new.streams]:
        reasons.append(
            f"the streams changed ({[s.table for s in old.streams]} -> {[s.table for s in new.streams]})"
        )
        return reasons, notes
    for i, (a, b) in enumerate(zip(old.streams, new.streams, strict=True)):
        for attr in ("proto_class", "timestamp_field"):
            if getattr(a, attr) != getattr(b, attr):
                reasons.append(
                    f"streams[{i}].{attr} changed ({getattr(a, attr)} -> {getattr(b, attr)}): "
                    "the source's schema is part of the checkpoint"
                )
        if sorted(p.strip() for p in a.bootstrap_servers.split(",")) != sorted(
            p.strip() for p in b.bootstrap_servers.split(",")
        ):
            reasons.append(
                f"streams[{i}].bootstrap_servers changed: the checkpoint's offsets belong to "
                "another Kafka cluster"
            )
        added = [t for t in b.topics if t not in a.topics]
        removed = [t for t in a.topics if t not in b.topics]
        if added:
            notes.append(f"streams[{i}] adds topic(s) {', '.join(added)}, read from their first record")
        if removed:
            notes.append(f"streams[{i}] stops reading {', '.join(removed)}")
        if a.start_from != b.start_from:
            notes.append(
                f"streams[{i}].start_from only applies to a fresh checkpoint; resuming keeps the offsets"
            )
    return reasons, notes


def compatibility(old: DaggerSpec, new: DaggerSpec) -> Compatibility:
    """Return whether ``new`` can resume from the checkpoint ``old`` wrote, with the reasons if not.

    Raises SqlError when either query does not parse.
    """
    reasons, notes = _streams_reasons(old, new)
    if old.sql.strip() != new.sql.strip():
        before, after = state_signature(old.sql), state_signature(new.sql)
        if before != after:
            reasons.append(
                "the aggregation changed (GROUP BY keys, window, aggregate functions or joins): "
                "Spark cannot reuse the window state"
            )
        elif before:
            notes.append(
                "the query changed outside its aggregation (filters, projections): open windows "
                "keep what they counted under the old query"
            )
        else:
            notes.append("the query changed (it keeps no state)")
    if (old.udf_file, old.udf_file_base64) != (new.udf_file, new.udf_file_base64):
        notes.append(
            "the functions of udf_file changed: open windows keep what they counted under the old ones"
        )
    if old.parallelism != new.parallelism:
        notes.append(f"parallelism stays {old.parallelism}: the checkpoint fixes the shuffle partitions")
    if old.watermark_delay_ms != new.watermark_delay_ms:
        notes.append(f"the watermark delay becomes {new.watermark_delay_ms} ms from the next batch")
    if [s.model_dump(mode="json") for s in old.sinks] != [s.model_dump(mode="json") for s in new.sinks]:
        notes.append("the sinks changed: the next batches go to the new sinks")
    return Compatibility(resume=not reasons, reasons=reasons, notes=notes)
