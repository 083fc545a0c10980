"""Dagger SQL → Spark SQL: each rewrite is a small pure function from AST to AST.

``to_spark`` applies them in order. None of them mutates its input.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError

from job.errors import SqlError
from job.spark.jvm import DISTINCT_COUNT
from job.sql.calls import build, call_args, fail
from job.sql.catalog import DAGGER_FUNCTIONS, DaggerFunction
from job.sql.flink import FLINK_REWRITES
from job.sql.flink_numbers import NUMBER_REWRITES
from job.sql.infer import INTEGERS, STRINGS, infer
from job.sql.library import bottom_up, rewrite_library
from job.sql.parse import position
from job.sql.values import VALUE_REWRITES

UNITS = {
    "MILLISECOND": "milliseconds",
    "SECOND": "seconds",
    "MINUTE": "minutes",
    "HOUR": "hours",
    "DAY": "days",
    "WEEK": "weeks",
}
UNIT_MS = {
    "milliseconds": 1,
    "seconds": 1_000,
    "minutes": 60_000,
    "hours": 3_600_000,
    "days": 86_400_000,
    "weeks": 604_800_000,
}
WINDOW_FUNCS = {"TUMBLE", "HOP", "SESSION"}
WINDOW_PROPERTIES = {
    "TUMBLE_START": "start",
    "TUMBLE_END": "end",
    "HOP_START": "start",
    "HOP_END": "end",
    "SESSION_START": "start",
    "SESSION_END": "end",
}
ROWTIME_PROPERTIES = {"TUMBLE_ROWTIME", "HOP_ROWTIME", "SESSION_ROWTIME"}
ROWTIME_WINDOW = "__dagger_window"  # the inner window struct that an outer window_time() reads


def fname(node: exp.Expr) -> str:
    """Return the upper-case name of a function call node ('' for anything else)."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    return node.sql_name().upper() if isinstance(node, exp.Func) else ""


def interval_text(node: exp.Expr) -> str:
    """Return Spark's duration text for ``INTERVAL 'n' UNIT`` (e.g. ``'60 seconds'``).

    Raises SqlError at the node for anything that is not a positive whole interval.
    """
    line, col = position(node)
    if not isinstance(node, exp.Interval):
        raise SqlError(f"expected INTERVAL 'n' UNIT, found {node.sql()}", line=line, col=col)
    unit = (node.unit.name if node.unit else "").upper().rstrip("S") if node.unit else ""
    amount = node.this.name if isinstance(node.this, exp.Literal) else ""
    if unit not in UNITS:
        raise SqlError(
            f"unknown interval unit {unit or '(none)'!r}; use one of {', '.join(UNITS)}", line=line, col=col
        )
    if not amount.strip().isdigit() or int(amount) <= 0:
        raise SqlError(f"an interval needs a positive whole number, found {amount!r}", line=line, col=col)
    return f"{int(amount)} {UNITS[unit]}"


def interval_ms(text: str) -> int:
    """Return the milliseconds of an interval as :func:`interval_text` writes it (``'60 seconds'`` → 60000)."""
    amount, unit = text.split()
    return int(amount) * UNIT_MS[unit]


def window_args(fn: exp.Anonymous) -> tuple[exp.Expr, str, str | None]:
    """Return (time column, size, slide or None) of a TUMBLE/HOP/SESSION call or one of its properties
    (a SESSION's size is its gap)."""
    name, args = fname(fn), fn.expressions
    hop = name.startswith("HOP")
    want = 3 if hop else 2
    if len(args) != want:
        line, col = position(fn)
        usage = (
            f"{name}(rowtime, INTERVAL slide, INTERVAL size)"
            if hop
            else f"{name}(rowtime, INTERVAL 'n' unit)"
        )
        raise SqlError(f"{name} takes {want} arguments: {usage}", line=line, col=col)
    if hop:  # Flink's HOP is (time, slide, size); Spark's window() is (time, size, slide)
        return args[0], interval_text(args[2]), interval_text(args[1])
    return args[0], interval_text(args[1]), None


def window_column(fn: exp.Anonymous) -> str:
    """Return the Spark column of the window a TUMBLE/HOP/SESSION call or property names."""
    return "session_window" if fname(fn).startswith("SESSION") else "window"


def window_family(fn: exp.Anonymous) -> str:
    """Return TUMBLE, HOP or SESSION for a window call or one of its properties."""
    return fname(fn).split("_")[0]


def _spark_window(fn: exp.Anonymous) -> exp.Anonymous:
    time_col, size, slide = window_args(fn)
    args = [time_col.copy(), exp.Literal.string(size)]
    if slide is not None:
        args.append(exp.Literal.string(slide))
    return exp.Anonymous(this=window_column(fn), expressions=args)


def rewrite_group_windows(tree: exp.Expr) -> exp.Expr:
    """``GROUP BY TUMBLE(t, INTERVAL '60' SECOND)`` → ``GROUP BY window(t, '60 seconds')``;
    ``HOP(t, slide, size)`` → ``window(t, 'size', 'slide')``; ``SESSION(t, gap)`` → ``session_window(t, 'gap')``."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous) and fname(node) in WINDOW_FUNCS:
            if (
                fname(node) == "SESSION"
                and isinstance(node.parent, exp.Group)
                and len(node.parent.expressions) == 1
            ):
                raise fail(
                    "a SESSION window over the whole stream (no key in GROUP BY) is not supported: Spark "
                    "keeps sessions per key",
                    node,
                    hint="GROUP BY SESSION(rowtime, INTERVAL gap), k (or "
                    "SESSION(TABLE t PARTITION BY k, ...) grouped by window_start, window_end, k)",
                )
            return _spark_window(node)
        return node

    return tree.transform(visit)


def rewrite_window_properties(tree: exp.Expr) -> exp.Expr:
    """``TUMBLE_START(...)``/``HOP_START(...)`` → ``window.start``; ``*_END`` → ``window.end``;
    ``SESSION_START``/``SESSION_END`` → ``session_window.start``/``.end``."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous) and fname(node) in WINDOW_PROPERTIES:
            window_args(node)  # validates the arguments
            return exp.column(WINDOW_PROPERTIES[fname(node)], table=window_column(node))
        return node

    return tree.transform(visit)


def rewrite_distinct_count(tree: exp.Expr) -> exp.Expr:
    """``DistinctCount(x)`` → ``size(collect_set(x))`` (Spark streams reject COUNT(DISTINCT))."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous) and fname(node) == "DISTINCTCOUNT":
            if len(node.expressions) != 1:
                line, col = position(node)
                raise SqlError("DistinctCount takes one argument", line=line, col=col)
            inner = exp.Anonymous(this="collect_set", expressions=[node.expressions[0].copy()])
            return exp.Anonymous(this="size", expressions=[inner])
        return node

    return tree.transform(visit)


#: The types whose values DistinctCount's byte aggregate compares by their bytes: a string by its UTF-8 bytes,
#: the others by the text CAST(x AS STRING) gives, which tells apart every two values of these types.
_BYTES_AS_IS = STRINGS
_BYTES_AS_TEXT = (*INTEGERS, exp.DataType.Type.BOOLEAN, exp.DataType.Type.DATE, exp.DataType.Type.DECIMAL)


def distinct_count_input(x: exp.Expr) -> exp.Expr | None:
    """Return the binary value :data:`job.spark.jvm.DISTINCT_COUNT` counts for ``x``, or None when ``x``'s type is
    not known or is one whose text does not tell every two values apart as ``collect_set`` does (floating
    point: -0.0 and 0.0; timestamps: local times repeat when clocks go back; binary, arrays, structs)."""
    kind = infer(x)
    if kind is None:
        return None
    if kind.this in _BYTES_AS_IS:
        return exp.Cast(this=x.copy(), to=exp.DataType.build("BINARY"))
    if kind.this in _BYTES_AS_TEXT:
        text = exp.Cast(this=x.copy(), to=exp.DataType.build("STRING"))
        return exp.Cast(this=text, to=exp.DataType.build("BINARY"))
    return None


def rewrite_distinct_count_bytes(tree: exp.Expr) -> exp.Expr:
    """``size(collect_set(x))`` (what :func:`rewrite_distinct_count` makes of ``DistinctCount(x)``) →
    ``dagger_distinct_count(CAST(x AS BINARY))`` for a string ``x`` (and for an integer, boolean, date or
    DECIMAL ``x``, the bytes of its text): the same count, from an aggregate whose state is one sorted byte
    array of the distinct values (:mod:`job.spark.jvm`), which a micro-batch merges in one pass, where
    ``collect_set``'s was rebuilt as a hash set of the whole window for every key the batch touched.
    Other types keep ``collect_set``. Apply after :func:`to_spark`: ``x`` is then what ``collect_set`` reads.
    The state's layout is not ``collect_set``'s: a checkpoint keeps the one it was started with (the engine
    feature ``distinct_count``, :func:`job.query.plan.engine_features`)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Anonymous) and fname(node) == "SIZE" and len(node.expressions) == 1:
            inner = node.expressions[0]
            if (
                isinstance(inner, exp.Anonymous)
                and fname(inner) == "COLLECT_SET"
                and len(inner.expressions) == 1
            ):
                value = distinct_count_input(inner.expressions[0])
                if value is not None:
                    return exp.Anonymous(this=DISTINCT_COUNT, expressions=[value])
        return node

    return tree.transform(visit)


def _output_name(item: exp.Expr) -> str:
    """Return the column name a SELECT item produces; raise SqlError when it has none we can name."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return item.name
    line, col = position(item)
    raise SqlError(
        f"name this column (... AS name): a query with TUMBLE_ROWTIME/HOP_ROWTIME passes its "
        f"columns on by name, found {item.sql(dialect='spark')}",
        line=line,
        col=col,
    )


def _rowtime_select(select: exp.Select, top: bool) -> exp.Select:
    """Return ``select`` wrapped so each TUMBLE_ROWTIME/HOP_ROWTIME/SESSION_ROWTIME item becomes ``window_time``
    of the window (to the millisecond when ``top``: the query's own rows)."""
    inner = select.copy()
    names: list[tuple[str, bool]] = []  # (output name, is a rowtime item)
    items = []
    for item in inner.expressions:
        target = item.this if isinstance(item, exp.Alias) else item
        if isinstance(target, exp.Anonymous) and fname(target) in ROWTIME_PROPERTIES:
            window_args(target)  # validates the arguments
            names.append((item.alias if isinstance(item, exp.Alias) else "rowtime", True))
            items.append(exp.alias_(exp.column(window_column(target)), ROWTIME_WINDOW))
        else:
            names.append((_output_name(item), False))
            items.append(item)
    inner.set("expressions", items)
    outer = [
        exp.alias_(
            _to_ms(exp.Anonymous(this="window_time", expressions=[exp.column(ROWTIME_WINDOW)]), top), name
        )
        if rowtime
        else exp.column(name)
        for name, rowtime in names
    ]
    return exp.select(*outer).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("__dagger_rowtime")))
    )


def _to_ms(time: exp.Expr, top: bool = True) -> exp.Expr:
    """``time`` cut to the millisecond when ``top``: Spark's window_time is the window's end - 1 µs, Flink's
    rowtime of a window its end - 1 ms (an event time inside the query keeps its microsecond: it falls in the
    same windows)."""
    return (
        exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string("MILLISECOND"), time])
        if top
        else time
    )


def _is_top_level(select: exp.Expr) -> bool:
    """Whether ``select``'s rows are the query's own (the query, or a branch of its UNION ALL)."""
    node = select.parent
    while isinstance(node, exp.SetOperation):
        node = node.parent
    return node is None


def rewrite_rowtime(tree: exp.Expr) -> exp.Expr:
    """``SELECT TUMBLE_ROWTIME(t, i) AS rt, k, n ... GROUP BY TUMBLE(t, i), k`` →
    ``SELECT window_time(__dagger_window) AS rt, k, n FROM (SELECT window AS __dagger_window, k, n ...)``.

    Spark's ``window_time(window)`` cannot sit in the SELECT that groups by the window, so the
    grouping SELECT hands the window struct up to a projection that turns it into an event time
    (the window's end - 1 µs), which an outer TUMBLE/HOP can group by again. Where the query outputs it (at the
    top, or a subquery's rowtime column that the top SELECT outputs as it is), it is cut to the millisecond:
    the window's end - 1 ms, as Flink gives it.
    """
    nested = {
        i.alias
        for s in tree.find_all(exp.Select)
        if not _is_top_level(s)
        for i in s.expressions
        if isinstance(i, exp.Alias)
        and isinstance(i.this, exp.Anonymous)
        and fname(i.this) in ROWTIME_PROPERTIES
    }

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Select) and any(
            isinstance(t, exp.Anonymous) and fname(t) in ROWTIME_PROPERTIES
            for item in node.expressions
            for t in [item.this if isinstance(item, exp.Alias) else item]
        ):
            return _rowtime_select(node, _is_top_level(node))
        if isinstance(node, exp.Select) and nested and node.args.get("group") is None and _is_top_level(node):
            node.set(
                "expressions",
                [
                    exp.alias_(_to_ms(i.copy()), i.name)
                    if isinstance(i, exp.Column) and i.name in nested
                    else i
                    for i in node.expressions
                ],
            )
        return node

    return bottom_up(tree, visit)


def rewrite_lateral_tables(tree: exp.Expr) -> exp.Expr:
    """Flink's ``FROM t, LATERAL TABLE(F(args)) AS T(c1, ...)`` → Spark's ``FROM t LATERAL VIEW g T AS c1, ...``.

    ``HistogramBucket(x, 'b1,b2')`` becomes ``explode`` of the buckets that x falls in (and '+Inf');
    ``OutlierMad(...)`` becomes ``inline`` of the Arrow UDF's array of row structs. ``LEFT JOIN LATERAL
    TABLE(...) ON TRUE`` becomes ``LATERAL VIEW OUTER``.
    """
    tree = tree.copy()
    count = 0
    for select in list(tree.find_all(exp.Select)):
        joins = list(select.args.get("joins") or [])
        keep, laterals = [], list(select.args.get("laterals") or [])
        for join in joins:
            lateral = join.this
            if not (
                isinstance(lateral, exp.Lateral)
                and isinstance(lateral.this, exp.Anonymous)
                and fname(lateral.this) == "TABLE"
            ):
                keep.append(join)
                continue
            calls = lateral.this.expressions
            call = calls[0] if len(calls) == 1 else None
            fn = DAGGER_FUNCTIONS.get(str(call.name).lower()) if isinstance(call, exp.Anonymous) else None
            if call is None or fn is None or fn.kind != "table":
                raise fail(
                    "LATERAL TABLE(...) takes one table function: HistogramBucket or OutlierMad", lateral
                )
            args = call_args(call)
            if fn.name == "HistogramBucket":
                gen = build(
                    "explode(concat(array('+Inf'), filter(split(__a1, ',', -1), "
                    "__b -> __a0 <= CAST(__b AS DOUBLE))))",
                    args,
                )
            else:
                gen = exp.Anonymous(this="inline", expressions=[call.copy()])
            alias = lateral.args.get("alias")
            columns = (
                list(alias.columns)
                if alias is not None and alias.columns
                else [exp.to_identifier(c) for c in fn.columns]
            )
            if len(columns) != len(fn.columns):
                raise fail(
                    f"{fn.name} adds {len(fn.columns)} column(s) ({', '.join(fn.columns)}), "
                    f"found {len(columns)} names",
                    alias,
                )
            name = alias.this if alias is not None and alias.this else exp.to_identifier(f"__dagger_t{count}")
            count += 1
            outer = bool(join.side) and str(join.side).upper() == "LEFT"
            laterals.append(
                exp.Lateral(
                    this=gen, view=True, outer=outer, alias=exp.TableAlias(this=name, columns=columns)
                )
            )
        if len(keep) != len(joins):
            select.set("joins", keep or None)
            select.set("laterals", laterals)
    return tree


def _is_window_key(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() in ("window", "session_window")


def put_window_keys_last(tree: exp.Expr) -> exp.Expr:
    """``GROUP BY window(t, '60 seconds'), cell, kind`` → ``GROUP BY cell, kind, window(t, '60 seconds')``.

    The order of GROUP BY items does not change a query's result, but it is the order of the window
    state's key. Spark's streaming aggregation sorts each batch's rows by that key (it leaves its
    hash map at 128 keys), and a sort can compare a leading number or string by an 8-byte prefix but
    must compare a leading window struct field by field: with the window last, the sort's share of
    workload (a)'s executor CPU fell from 54% to 31% (JFR samples, live at 100,000 events/s). Keys
    that are not windows keep their order. Not applied to a checkpoint whose state was keyed as
    written (see :func:`job.query.plan.engine_features`).
    """
    tree = tree.copy()
    for group in tree.find_all(exp.Group):
        keys = list(group.expressions)
        ordered = [k for k in keys if not _is_window_key(k)] + [k for k in keys if _is_window_key(k)]
        if ordered != keys:
            group.set("expressions", ordered)
    return tree


BARRIER_COLUMN = "__dagger_wm"


def add_watermark_barrier(tree: exp.Expr, streams: set[str]) -> exp.Expr:
    """``WHERE c`` → ``WHERE (c) AND <stream>.__dagger_wm >= 0`` for each stream read directly.

    Spark pushes a WHERE that does not touch the event time below the watermark, so the watermark
    would follow only the rows the query keeps. Each stream's view carries
    ``__dagger_wm = spark_partition_id()`` (never negative); a filter that reads it cannot pass that
    non-deterministic projection, so the watermark (like Flink's) follows every event of the stream.

    Not ``rand()``: a streaming query gives every expression with a random seed a new seed in each
    micro-batch, the seed is a literal of the generated code, and so every batch of every dagger
    compiled its code afresh (Janino, class loading, then the JIT), most of a light dagger's CPU.
    """
    tree = tree.copy()
    for select in tree.find_all(exp.Select):
        where = select.args.get("where")
        if where is None:
            continue
        sources = [select.args.get("from_") or select.args.get("from")] + list(select.args.get("joins") or [])
        refs = [
            t
            for src in sources
            if src is not None
            for t in [src.this]
            if isinstance(t, exp.Table) and t.name in streams
        ]
        cond = where.this
        for table in refs:
            guard = exp.GTE(
                this=exp.column(BARRIER_COLUMN, table=table.alias_or_name), expression=exp.Literal.number(0)
            )
            cond = exp.And(this=exp.paren(cond) if isinstance(cond, exp.Or) else cond, expression=guard)
        select.set("where", exp.Where(this=cond))
    return tree


REWRITES: list[Callable[[exp.Expr], exp.Expr]] = [
    *VALUE_REWRITES,
    *NUMBER_REWRITES,
    *FLINK_REWRITES,
    rewrite_lateral_tables,
    rewrite_rowtime,
    rewrite_window_properties,
    rewrite_group_windows,
    rewrite_distinct_count,
]


def to_spark(tree: exp.Expr, user: Mapping[str, DaggerFunction] | None = None) -> exp.Expr:
    """Apply every rewrite in order, then the function library (``user`` functions stay calls); return a new tree."""
    for rewrite in REWRITES:
        tree = rewrite(tree)
    return rewrite_library(tree, user)


def render(tree: exp.Expr) -> str:
    """Return Spark SQL text for a rewritten tree (function names keep their case).

    Raises SqlError for anything sqlglot's Spark generator cannot express (it would otherwise log a
    warning and write something else, e.g. ``TRUNCATE(x, 2)`` as ``CAST(x AS BIGINT)``).
    """
    try:
        return tree.sql(dialect="spark", normalize_functions=False, unsupported_level=ErrorLevel.RAISE)
    except UnsupportedError as exc:
        raise SqlError(f"cannot be translated to Spark SQL: {exc}") from None
