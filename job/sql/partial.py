"""Aggregate in the Kafka source first: per window and key, a task's records at a time.

A windowed aggregation over one stream costs Spark work per input row before any state is touched: the
hand-over from the Python source to rows, the window's projection, the map-side aggregation (a hash map,
then a sort past 128 keys) and its spill into the shuffle. When every aggregate is one that merges, the
source can do that first step itself: it groups the records a task read by the query's keys and TUMBLE
window, and hands Spark one row per group with each aggregate's partial value. Spark merges those partials
exactly as it merges the buffers of its own partial aggregation, so the results are the same, and its
per-row work is per group: on workload (a) a task of ~225,000 records hands over ~44,000 rows.

=======================  ================================  ============================================
aggregate                the source hands over per group    Spark then computes
=======================  ================================  ============================================
``DistinctCount(s)``     the distinct values as its buffer  ``dagger_distinct_count_merge(buffer)``
                         (:mod:`job.spark.jvm`)
``COUNT(*)``             the group's records                ``SUM(records)``
``COUNT(x)``             the count of non-NULL ``x``        ``SUM(count)``
``SUM(x)``               the sum of non-NULL ``x`` (NULL    ``SUM(sum)``
                         when none)
``MIN(x)``, ``MAX(x)``   the least, greatest ``x``          ``MIN(min)``, ``MAX(max)``
``AVG(x)``               the sum and the count              ``SUM(sum) / NULLIF(SUM(count), 0)``
=======================  ================================  ============================================

``s`` is a string column; ``x`` a numeric column of the stream (TINYINT to BIGINT, FLOAT, DOUBLE; ``COUNT``
any column). Each result has the type Spark's own aggregate gives it (a partial sum of integers is a BIGINT,
of FLOATs and DOUBLEs a DOUBLE, as Spark sums them; a minimum keeps the column's type), and the rewrites that
wrap an aggregate (``CAST(SUM(n) AS INT)``, an integer ``AVG`` as ``SUM DIV COUNT``) stay as they are. The
edges are Spark's: a partial sum of integers past BIGINT's range stops the dagger with
``[ARITHMETIC_OVERFLOW]`` as Spark's ANSI sum does (it wraps around where ``spark.sql.ansi.enabled`` is off,
as Spark's does then); NaN is greater than any other number in ``MIN`` and ``MAX``. A sum of DOUBLEs adds
the same values in another grouping, which may change its last digit, as Spark's own tasks already may.

What stays the same:

* **event time**: a group's row carries the latest event time of its records, so the micro-batch's
  watermark (the maximum over its rows, less the delay) is the same; every record of a group lies in one
  window, so the row falls in that window too;
* **late records**: Spark drops them per window (the state key's window end against the watermark), never
  per record, so a group is dropped exactly when its records would each have been;
* **NULLs**: a NULL key is a group of its own, as in Spark; NULL values are left out of a buffer, a count,
  a sum and a minimum, as the aggregates leave them out (a group without a value has a count of 0 and a
  NULL sum, minimum and maximum, which Spark's ``SUM``, ``MIN`` and ``MAX`` then skip); a NULL event time
  gives a row with a NULL time, which Spark's window leaves out as it leaves out the record.

It applies to a query that reads one stream and nothing else (no join, WHERE, HAVING or subquery), groups by
a TUMBLE window and columns of the stream, and whose every aggregate is one of the table's above (with
``aggregates`` off, as checkpoints pinned before them run: ``DistinctCount`` only); the rest of the SELECT may
only name its keys and the window, in any expression. Any other query runs as before. Spark's
``numInputRows`` then counts the rows handed over (groups): the query adds up the records they stand for
(:func:`job.query.runner.observed_records`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlglot import exp

from job.spark.jvm import DISTINCT_COUNT, DISTINCT_COUNT_MERGE

#: The prefix of a column whose values are DistinctCount buffers that the source made.
BUFFER_PREFIX = "__dagger_distinct_"
#: The column of the rows handed over that holds how many records each row stands for (the same name as
#: job.sources.config.PARTIAL_RECORDS, which this layer does not import): ``COUNT(*)`` adds it up.
RECORDS = "__dagger_records"
#: The Spark types of the columns a source sums, takes the least and greatest of (lower case).
INTEGERS = frozenset({"tinyint", "smallint", "int", "bigint"})
FLOATS = frozenset({"float", "double"})
#: The partial aggregates a source computes per group, each handed over as ``__dagger_<function>_<column>``.
FUNCTIONS = ("count", "sum", "min", "max")


@dataclass(frozen=True)
class SourcePartial:
    """What a stream's source aggregates: per ``keys`` (columns it hands over) and TUMBLE window of
    ``window_ms``, the distinct values of each column in ``distinct``, handed over as the buffer column it
    maps to, and each ``aggregates`` entry ``[function, column, output]`` (a :data:`FUNCTIONS` of a column,
    handed over as ``output``). ``time`` is the event-time column (filled in by the plan: the stream's
    timestamp field); ``wrap``: an integer sum past BIGINT's range wraps around (Spark without ANSI) instead
    of stopping the dagger."""

    keys: list[str]
    window_ms: int
    distinct: dict[str, str]
    time: str = ""
    aggregates: list[list[str]] = field(default_factory=list)
    wrap: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "keys": self.keys,
            "window_ms": self.window_ms,
            "distinct": self.distinct,
            "time": self.time,
            "aggregates": self.aggregates,
            "wrap": self.wrap,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SourcePartial:
        keys, distinct, aggregates = data["keys"], data["distinct"], data.get("aggregates") or []
        assert isinstance(keys, list) and isinstance(distinct, dict) and isinstance(aggregates, list)
        return cls(
            [str(k) for k in keys],
            int(str(data["window_ms"])),
            {str(k): str(v) for k, v in distinct.items()},
            str(data.get("time", "")),
            [[str(x) for x in entry] for entry in aggregates],
            bool(data.get("wrap", False)),
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


_SIMPLE = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)


def _simple_aggregate(call: exp.Expr, types: Mapping[str, object]) -> tuple[str, str | None] | None:
    """``(function, column)`` of an aggregate the source can take the first step of: ``("count", None)`` for
    ``COUNT(*)`` (or of a literal that is not NULL), ``("count", x)``, ``("sum", x)``, ``("min", x)``,
    ``("max", x)``, ``("avg", x)`` of a stream column ``x`` of the right type; None for any other."""
    if not isinstance(call, _SIMPLE) or call.expressions or call.args.get("ignore_nulls") is not None:
        return None
    arg = call.this
    if isinstance(call, exp.Count):
        if isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not isinstance(arg, exp.Null)):
            return "count", None
        if isinstance(arg, exp.Column) and not arg.table and arg.name in types:
            return "count", arg.name
        return None
    if not (isinstance(arg, exp.Column) and not arg.table and arg.name in types):
        return None
    kind = str(types.get(arg.name) or "").lower()
    function = type(call).__name__.lower()
    if function == "avg":  # of a DOUBLE or FLOAT; an integer AVG is SUM DIV COUNT already (job.sql.values)
        return ("avg", arg.name) if kind in FLOATS else None
    return (function, arg.name) if kind in INTEGERS | FLOATS else None


def _column(function: str, column: str) -> str:
    return f"__dagger_{function}_{column}"


def source_partial(
    tree: exp.Expr,
    tables: Mapping[str, Mapping[str, str | None] | object],
    derived: Mapping[str, list[str]],
    aggregates: bool = True,
) -> tuple[exp.Expr, str, SourcePartial] | None:
    """Return (the query with its aggregates merging the source's partials, the stream table, what its
    source aggregates) when the source can aggregate first (see the module docstring), else None.

    ``tree`` is the Spark query after :func:`job.sql.rewrite.rewrite_distinct_count_bytes`; ``tables`` maps a
    stream table to its columns' Spark types; ``derived`` a table to the columns its source computes;
    ``aggregates`` False: DistinctCount only."""
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
    calls: list[exp.Expr] = []
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
    simple: dict[int, tuple[str, str | None]] = {}
    for agg in tree.find_all(exp.AggFunc):
        what = _simple_aggregate(agg, types) if aggregates else None
        if what is None:
            return None  # an aggregate of Spark's that reads every record
        simple[id(agg)] = what
        calls.append(agg)
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
    if any(str(call.this).lower() not in ("window", DISTINCT_COUNT) for call in tree.find_all(exp.Anonymous)):
        return None  # a function of the keys might be an aggregate too (a user's)
    partials: dict[str, tuple[str, str]] = {}  # output column -> (function, column)

    def partial(function: str, column: str | None) -> exp.Expr:
        if column is None:
            return exp.column(RECORDS)
        name = _column(function, column)
        partials[name] = (function, column)
        return exp.column(name)

    def merged(what: tuple[str, str | None]) -> exp.Expr:
        function, column = what
        if function == "count":
            return exp.Sum(this=partial("count", column))
        if function == "avg":  # Spark's AVG of a DOUBLE: the sum over the count, NULL for no value
            count = exp.Nullif(this=exp.Sum(this=partial("count", column)), expression=exp.Literal.number(0))
            return exp.Div(this=exp.Sum(this=partial("sum", column)), expression=count)
        return {"sum": exp.Sum, "min": exp.Min, "max": exp.Max}[function](this=partial(function, column))

    out = tree.copy()
    originals = list(tree.find_all(exp.AggFunc))
    copies = list(out.find_all(exp.AggFunc))
    for original, copy in zip(originals, copies, strict=True):
        copy.replace(merged(simple[id(original)]))
    for call in out.find_all(exp.Anonymous):
        if str(call.this) == DISTINCT_COUNT:
            column = call.expressions[0].this.name
            call.replace(exp.Anonymous(this=DISTINCT_COUNT_MERGE, expressions=[exp.column(distinct[column])]))
    listed = sorted(
        ([function, column, name] for name, (function, column) in partials.items()),
        key=lambda entry: (entry[1], FUNCTIONS.index(entry[0])),
    )
    return out, table, SourcePartial(keys, window_ms, distinct, aggregates=listed)
