"""Aggregate in the Kafka source first: DistinctCount per window and key, a task's records at a time.

A windowed aggregation over one stream costs Spark work per input row before any state is touched: the
hand-over from the Python source to rows, the window's projection, the map-side aggregation (a hash map,
then a sort past 128 keys) and its spill into the shuffle. When every aggregate is a ``DistinctCount`` of a
string column, the source can do that first step itself: it groups the records a task read by the query's
keys and TUMBLE window, and hands Spark one row per group, whose value is the group's distinct values as the
DistinctCount buffer (:mod:`job.spark.jvm`: sorted, each after its length). Spark merges those buffers
(``dagger_distinct_count_merge``) exactly as it merges the buffers of its own partial aggregation, so the
results are the same, and its per-row work is per group: on workload (a) a task of ~225,000 records hands
over ~44,000 rows.

What stays the same:

* **event time**: a group's row carries the latest event time of its records, so the micro-batch's
  watermark (the maximum over its rows, less the delay) is the same; every record of a group lies in one
  window, so the row falls in that window too;
* **late records**: Spark drops them per window (the state key's window end against the watermark), never
  per record, so a group is dropped exactly when its records would each have been;
* **NULLs**: a NULL key is a group of its own, as in Spark; NULL values are left out of a buffer, as
  DistinctCount leaves them out; a NULL event time gives a row with a NULL time, which Spark's window
  leaves out as it leaves out the record.

It applies to a query that reads one stream and nothing else (no join, WHERE, HAVING or subquery), groups by
a TUMBLE window and columns of the stream, and whose every aggregate is ``DistinctCount`` of a string column;
the rest of the SELECT may only name its keys and the window. Any other query runs as before. Spark's
``numInputRows`` then counts the rows handed over (groups): the records read are counted from the offsets
(:func:`job.query.runner.batch_records`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from job.spark.jvm import DISTINCT_COUNT, DISTINCT_COUNT_MERGE

#: The prefix of a column whose values are DistinctCount buffers that the source made.
BUFFER_PREFIX = "__dagger_distinct_"


@dataclass(frozen=True)
class SourcePartial:
    """What a stream's source aggregates: per ``keys`` (columns it hands over) and TUMBLE window of
    ``window_ms``, the distinct values of each column in ``distinct``, handed over as the buffer column it
    maps to. ``time`` is the event-time column (filled in by the plan: the stream's timestamp field)."""

    keys: list[str]
    window_ms: int
    distinct: dict[str, str]
    time: str = ""

    def to_json(self) -> dict[str, object]:
        return {"keys": self.keys, "window_ms": self.window_ms, "distinct": self.distinct, "time": self.time}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SourcePartial:
        keys, distinct = data["keys"], data["distinct"]
        assert isinstance(keys, list) and isinstance(distinct, dict)
        return cls(
            [str(k) for k in keys],
            int(str(data["window_ms"])),
            {str(k): str(v) for k, v in distinct.items()},
            str(data.get("time", "")),
        )


def _window_ms(call: exp.Expr) -> int | None:
    """The size in ms of ``window(rowtime, '<n> <unit>')`` (a TUMBLE window), else None."""
    from job.sql.rewrite import interval_ms

    if not (isinstance(call, exp.Anonymous) and str(call.this).lower() == "window"):
        return None
    args = call.expressions
    if len(args) != 2 or not isinstance(args[0], exp.Column) or args[0].name != "rowtime":
        return None
    if not isinstance(args[1], exp.Literal) or not args[1].is_string:
        return None
    try:
        return interval_ms(args[1].this)
    except Exception:  # noqa: BLE001 - a size this module does not read: not for the source
        return None


def source_partial(
    tree: exp.Expr, tables: Mapping[str, Mapping[str, str | None] | object], derived: Mapping[str, list[str]]
) -> tuple[exp.Expr, str, SourcePartial] | None:
    """Return (the query with its DistinctCounts merging the source's buffers, the stream table, what its
    source aggregates) when the source can aggregate first (see the module docstring), else None.

    ``tree`` is the Spark query after :func:`job.sql.rewrite.rewrite_distinct_count_bytes`; ``tables`` maps a
    stream table to its columns' Spark types; ``derived`` a table to the columns its source computes."""
    if not isinstance(tree, exp.Select) or tree.args.get("where") or tree.args.get("having"):
        return None
    if tree.args.get("joins") or tree.args.get("with") or tree.args.get("qualify"):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    if (
        source is None
        or not isinstance(source.this, exp.Table)
        or any(True for _ in tree.find_all(exp.Subquery))
    ):
        return None
    table = source.this.name
    types = tables.get(table)
    if not isinstance(types, Mapping):
        return None
    group = tree.args.get("group")
    if group is None:
        return None
    keys: list[str] = []
    window_ms = None
    for item in group.expressions:
        size = _window_ms(item)
        if size is not None and window_ms is None:
            window_ms = size
        elif isinstance(item, exp.Column) and (item.name in types or item.name in derived.get(table, [])):
            keys.append(item.name)
        else:
            return None
    if window_ms is None or len(set(keys)) != len(keys):
        return None
    distinct: dict[str, str] = {}
    calls: list[exp.Anonymous] = []
    for call in tree.find_all(exp.Anonymous):
        if str(call.this) != DISTINCT_COUNT:
            continue
        arg = call.expressions[0] if len(call.expressions) == 1 else None
        if not (isinstance(arg, exp.Cast) and isinstance(arg.this, exp.Column)):
            return None
        column = arg.this.name
        if str(types.get(column) or "").lower() != "string":  # other types count by their text: not here
            return None
        distinct[column] = f"{BUFFER_PREFIX}{column}"
        calls.append(call)
    if not calls:
        return None
    # every other column named is a key, or the window's
    in_calls = {id(c) for call in calls for c in call.find_all(exp.Column)}
    in_group = {id(c) for c in group.find_all(exp.Column)}
    for named in tree.find_all(exp.Column):
        if id(named) in in_calls or id(named) in in_group:
            continue
        if named.name in keys or (named.table == "window" and named.name in ("start", "end")):
            continue
        if named.name == "window" and not named.table:
            continue
        return None
    if any(True for _ in tree.find_all(exp.AggFunc)):
        return None  # Spark's own aggregates (count, sum...) read every record
    if any(str(call.this).lower() not in ("window", DISTINCT_COUNT) for call in tree.find_all(exp.Anonymous)):
        return None  # a function of the keys might be an aggregate too (a user's)
    out = tree.copy()
    for call in out.find_all(exp.Anonymous):
        if str(call.this) == DISTINCT_COUNT:
            column = call.expressions[0].this.name
            call.replace(exp.Anonymous(this=DISTINCT_COUNT_MERGE, expressions=[exp.column(distinct[column])]))
    return out, table, SourcePartial(keys, window_ms, distinct)
