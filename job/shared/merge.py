"""One aggregation for a fused group: its members' windows in one stateful operator.

A fused group (:mod:`job.shared.fusion`) that ran each member's SQL as a branch of a UNION ALL still
paid, per member and per micro-batch, a scan of the batch (the Python source read it again), a shuffle
and a state store: ~100 ms a member at each window end on two cores. Members whose query has one shape,
``SELECT … FROM <stream> [WHERE …] GROUP BY <keys>, window(…) [HAVING …]`` (or the same with no GROUP
BY and no aggregate: a pass-through), merge instead:

1. each event is read once and becomes one row per member that keeps it (its WHERE): the member's
   number, its grouping keys and the values its aggregates read, in typed *slots* shared by all
   members (``explode`` of an array of structs);
2. ONE aggregation groups by (member, key slots, window) and computes each *aggregate slot* (an
   aggregate function of value slots, shared by every member that calls it alike);
3. one projection writes each member's own output columns (and HAVING) from the slots, as the JSON
   row the group's ``foreachBatch`` splits (:func:`job.shared.fusion.split_rows`).

Rows of different members never meet in a group (the member is a key), so a member's windows are
exactly what its own query would give. The functions here are pure (sqlglot trees and text);
:func:`member_shape` says why a query cannot merge, and such a member keeps a branch of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp

from job.sql.rewrite import render

#: Columns of the merged query (all start with ``__`` and so never clash with a member's columns).
MEMBER_INDEX = "__m"
EVENT = "__e"
#: Between the keys of members whose rows are the same (one row for all of them, split by the group).
MEMBER_SEP = " "
#: Aggregate functions Spark knows but sqlglot parses as plain calls.
_ANONYMOUS_AGGREGATES = frozenset(
    {
        "collect_set",
        "collect_list",
        "approx_count_distinct",
        "percentile_approx",
        "approx_percentile",
        "first",
        "last",
        "first_value",
        "last_value",
        "any_value",
        "count_if",
        "bool_and",
        "bool_or",
        "every",
        "some",
        "max_by",
        "min_by",
        "mode",
        "median",
        "percentile",
        "skewness",
        "kurtosis",
        "histogram_numeric",
        "count_min_sketch",
        "bit_and",
        "bit_or",
        "bit_xor",
        "try_sum",
        "try_avg",
        "regr_count",
        "array_agg",
        "listagg",
        "string_agg",
        "hll_sketch_agg",
        "hll_union_agg",
        "sum_distinct",
        "dagger_distinct_count",  # DistinctCount (job.spark.jvm)
    }
)


_WINDOW_CALL = re.compile(r"\bwindow\s*\(", re.IGNORECASE)
_RENAMED_WINDOW = "__dagger_window"


@dataclass(frozen=True)
class Aggregate:
    """One aggregate call of a member: its text with ``__v0``, ``__v1``, … for the values it reads per
    row (the rest of it, literals such as a percentile, is part of the call), and those values."""

    template: str
    values: tuple[exp.Expr, ...]


@dataclass(frozen=True)
class Shape:
    """A member's query taken apart (see the module docstring); ``outputs`` and ``having`` read
    ``__K<i>`` for its i-th key, ``__A<j>`` for its j-th aggregate and ``window.start``/``window.end``."""

    where: exp.Expr | None
    keys: tuple[exp.Expr, ...]
    window: exp.Expr | None
    aggregates: tuple[Aggregate, ...]
    outputs: tuple[exp.Expr, ...]
    having: exp.Expr | None = None
    #: what it reads: its stream's name, or the text of its FROM … JOIN …
    source: str = ""

    @property
    def stateful(self) -> bool:
        return self.window is not None


def _is_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and str(node.name).lower() in _ANONYMOUS_AGGREGATES


def _replace(node: exp.Expr, fn: Callable[[exp.Expr], exp.Expr | None]) -> exp.Expr:
    """Return ``node`` with each outermost subtree for which ``fn`` gives a node replaced by it (in place)."""
    new = fn(node)
    if new is not None:
        return new
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _replace(value, fn))
        elif isinstance(value, list):
            node.set(key, [_replace(v, fn) if isinstance(v, exp.Expression) else v for v in value])
    return node


def _unqualify(tree: exp.Expr, names: set[str]) -> None:
    """Drop the stream's name (or alias) from its columns: ``data_stream.x`` and ``x`` are one key."""
    for column in tree.find_all(exp.Column):
        if column.table and column.table in names:
            column.set("table", None)


def _aggregate(node: exp.Expr) -> Aggregate:
    """Return the slot form of aggregate call ``node``: each argument that is not a literal (nor ``*``)
    becomes a value ``__v<n>``."""
    call = node.copy()
    values: list[exp.Expr] = []

    def value(arg: exp.Expr) -> exp.Expr | None:
        if arg is call or isinstance(arg, exp.Literal | exp.Star | exp.Null | exp.Boolean | exp.DataType):
            return None
        if isinstance(arg, exp.Identifier | exp.Var):
            return arg
        values.append(arg.copy())
        return exp.column(f"__v{len(values) - 1}")

    for key, arg in list(call.args.items()):
        if isinstance(arg, exp.Expression):
            call.set(key, _replace(arg, value))
        elif isinstance(arg, list):
            call.set(key, [_replace(a, value) if isinstance(a, exp.Expression) else a for a in arg])
    return Aggregate(render(call), tuple(values))


def parse_spark(spark_sql: str) -> exp.Expr | str:
    """Return the tree of a translated query, or the parser's error. sqlglot reads ``GROUP BY window(…)``
    as the start of a WINDOW clause when the window is the only key: such a query is read with the call
    renamed, and named ``window`` again in the tree."""
    try:
        return sqlglot.parse_one(spark_sql, read="spark")
    except sqlglot.errors.ParseError as exc:
        error = str(exc)
    try:
        tree = sqlglot.parse_one(_WINDOW_CALL.sub(_RENAMED_WINDOW + "(", spark_sql), read="spark")
    except sqlglot.errors.ParseError:
        return error
    for call in tree.find_all(exp.Anonymous):
        if call.name == _RENAMED_WINDOW:
            call.set("this", "window")
    return tree


def member_shape(spark_sql: str, tables: str | set[str]) -> Shape | str:
    """Return the shape of a member's translated query over stream ``tables`` (one, or the streams an
    interval join reads: members merge when their FROM and JOINs are the same text), or why it cannot
    merge."""
    tables = {tables} if isinstance(tables, str) else tables
    tree = parse_spark(spark_sql)
    if isinstance(tree, str):
        return f"its SQL does not parse: {tree}"
    if not isinstance(tree, exp.Select):
        return "it is not a single SELECT"
    source = tree.args.get("from_") or tree.args.get("from")
    relation = source.this if source is not None else None
    joins = list(tree.args.get("joins") or [])
    relations = [relation, *(j.this for j in joins)]
    if (
        not all(isinstance(r, exp.Table) and r.name in tables for r in relations)
        or tree.args.get("laterals")
        or any(
            j.args.get("using") or str(j.args.get("kind") or "INNER").upper() != "INNER" or j.side
            for j in joins
        )
    ):
        return f"it does not read {' and '.join(sorted(tables))} alone, or with an inner JOIN … ON"
    assert relation is not None
    text = " ".join([render(relation), *(render(j) for j in joins)])
    if tree.args.get("distinct") or tree.args.get("order") or tree.args.get("limit") or tree.args.get("with"):
        return "it has DISTINCT, ORDER BY, LIMIT or WITH"
    if any(True for _ in tree.find_all(exp.Subquery, exp.Window, exp.Explode, exp.Unnest)) or any(
        isinstance(s, exp.Star) or isinstance(s, exp.Column) and isinstance(s.this, exp.Star)
        for s in tree.expressions
    ):
        return "it has a subquery, an OVER, a generator or *"
    if any(
        isinstance(a, exp.Distinct | exp.Filter)
        for node in tree.find_all(exp.AggFunc, exp.Anonymous)
        if _is_aggregate(node)
        for a in node.iter_expressions()
    ):
        return "an aggregate has DISTINCT or FILTER"
    tree = tree.copy()
    if not joins:
        _unqualify(tree, {relation.name, relation.alias_or_name})
        text = relation.name
    group = tree.args.get("group")
    items = list(group.expressions) if group is not None else []
    windows = [g for g in items if isinstance(g, exp.Anonymous) and str(g.name).lower() == "window"]
    if (
        len(windows) > 1
        or group is not None
        and (group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"))
    ):
        return "it groups by more than one window, or by ROLLUP, CUBE or GROUPING SETS"
    if any(isinstance(g, exp.Literal) for g in items):
        return "it groups by position"
    keys = tuple(g for g in items if g not in windows)
    window = windows[0] if windows else None
    selects = [s.this if isinstance(s, exp.Alias) else s for s in tree.expressions]
    having_node = tree.args.get("having")
    having = having_node.this if having_node is not None else None
    if window is None:
        if keys or having is not None or any(_is_aggregate(n) for s in selects for n in s.find_all(exp.Func)):
            return "it aggregates without a window"
        if joins:
            return "it joins without a window"
        return Shape(
            tree.args["where"].this if tree.args.get("where") else None,
            (),
            None,
            (),
            tuple(s.copy() for s in selects),
            source=text,
        )
    aggregates: list[Aggregate] = []
    found: dict[str, int] = {}

    def slot(node: exp.Expr) -> exp.Expr | None:
        if _is_aggregate(node):
            agg = _aggregate(node)
            signature = f"{agg.template}|{'|'.join(render(v) for v in agg.values)}"
            if signature not in found:
                found[signature] = len(aggregates)
                aggregates.append(agg)
            return exp.column(f"__A{found[signature]}")
        for i, key in enumerate(keys):
            if node == key:
                return exp.column(f"__K{i}")
        return None

    outputs = tuple(_replace(s.copy(), slot) for s in selects)
    having = _replace(having.copy(), slot) if having is not None else None
    for node in (*outputs, *([having] if having is not None else [])):
        for column in node.find_all(exp.Column):
            if column.table == "window" and column.name in ("start", "end"):
                continue
            if column.table or not (column.name.startswith("__K") or column.name.startswith("__A")):
                return f"its output reads {render(column)} outside its GROUP BY and aggregates"
    where = tree.args["where"].this if tree.args.get("where") else None
    return Shape(where, keys, window, tuple(aggregates), outputs, having, text)


@dataclass(frozen=True)
class Member:
    """A member of a merged query: its key in the group, shape, output column names (as its own query
    names them, so its sinks see the same schema) and the Spark types of its keys and of each
    aggregate's values (``DataType.simpleString()``)."""

    key: str
    shape: Shape
    names: tuple[str, ...]
    key_types: tuple[str, ...] = ()
    value_types: tuple[tuple[str, ...], ...] = ()


@dataclass
class _Slots:
    """Typed slots shared by the members: the n-th key of a type is one column, and so is the n-th
    aggregate of a kind (its template and value types)."""

    keys: dict[tuple[str, int], str] = field(default_factory=dict)
    aggregates: dict[tuple[str, tuple[str, ...], int], str] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)  # aggregate slot -> its call over value slots
    values: dict[str, str] = field(default_factory=dict)  # value slot -> its type

    def key(self, kind: str, n: int) -> str:
        return self.keys.setdefault((kind, n), f"__k{len(self.keys)}")

    def aggregate(self, agg: Aggregate, types: tuple[str, ...], n: int) -> str:
        name = self.aggregates.get((agg.template, types, n))
        if name is None:
            name = self.aggregates.setdefault((agg.template, types, n), f"__a{len(self.aggregates)}")
            call = sqlglot.parse_one(agg.template, read="spark")
            renames = {f"__v{i}": f"{name}_v{i}" for i in range(len(types))}
            call = _replace(
                call,
                lambda c: (
                    exp.column(renames[c.name])
                    if isinstance(c, exp.Column) and c.name in renames and not c.table
                    else None
                ),
            )
            self.templates[name] = render(call)
            self.values.update({f"{name}_v{i}": t for i, t in enumerate(types)})
        return name


def _nth(kinds: Sequence[object]) -> list[int]:
    """Return for each item how many equal items come before it."""
    count: dict[object, int] = {}
    out = []
    for kind in kinds:
        out.append(count.get(kind, 0))
        count[kind] = out[-1] + 1
    return out


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _where(shape: Shape) -> str:
    """The member's WHERE as Spark SQL (``true`` when it has none)."""
    return render(shape.where) if shape.where is not None else "true"


def _json(names: Sequence[str], outputs: Sequence[exp.Expr], time_format: str) -> str:
    fields = ", ".join(f"{_string(n)}, {render(o)}" for n, o in zip(names, outputs, strict=True))
    return f"to_json(named_struct({fields}), map('timestampFormat', {_string(time_format)}))"


def merged_sql(
    members: Sequence[Member],
    time_format: str,
    written_ms: int | None = None,
    member_column: str = "__member",
    row_column: str = "__row",
    from_ms: int | None = None,
    written_by: Mapping[str, int] | None = None,
) -> str:
    """Return the one query of ``members`` (all stateful with the same window, or all pass-throughs, and all
    reading the same source): a row (``member_column``: the member's key, ``row_column``: its output row as
    JSON with timestamps in ``time_format``) for each output row of each member; members whose rows are the
    same (the same query but for its sinks) share a row, whose ``member_column`` has their keys, separated
    by ``MEMBER_SEP``. With ``written_ms``, windows that ended by then (an earlier generation wrote them)
    are left out; with ``from_ms``, windows that start before then (a new generation read events from
    before then only for a join's sake); with ``written_by`` (member key -> ms), a member's windows that
    ended by then (its earlier query wrote them) are left out of its rows only. Raises ValueError when a
    key has ``MEMBER_SEP``, the members read different sources, or pass-throughs have ``written_by``."""
    if not members or len({m.shape.source for m in members}) != 1:
        raise ValueError("members must read one source")
    if any(MEMBER_SEP in m.key for m in members):
        raise ValueError(f"a member key has {MEMBER_SEP!r}")
    table = members[0].shape.source
    if not members[0].shape.stateful:
        if written_by:
            raise ValueError("pass-throughs have no windows to leave out")
        # members with the same WHERE and output (the same query with other sinks) are one row an event
        same: dict[tuple[str, str], list[str]] = {}
        for m in members:
            same.setdefault((_where(m.shape), _json(m.names, m.shape.outputs, time_format)), []).append(m.key)
        events = [
            f"IF({where}, named_struct('{MEMBER_INDEX}', {c}, '{row_column}', {row}), NULL)"
            for c, (where, row) in enumerate(same)
        ]
        labels = ", ".join(_string(MEMBER_SEP.join(keys)) for keys in same.values())
        return (
            f"SELECT element_at(array({labels}), {EVENT}.{MEMBER_INDEX} + 1)"
            f" AS {member_column}, {EVENT}.{row_column} AS {row_column} FROM (SELECT explode(array("
            f"{', '.join(events)})) AS {EVENT} FROM {table}) WHERE {EVENT} IS NOT NULL"
        )
    slots = _Slots()
    renames: list[dict[str, str]] = []
    for m in members:
        names: dict[str, str] = {}
        for i, (kind, n) in enumerate(zip(m.key_types, _nth(m.key_types), strict=True)):
            names[f"__K{i}"] = slots.key(kind, n)
        kinds = [(a.template, t) for a, t in zip(m.shape.aggregates, m.value_types, strict=True)]
        for j, (agg, types, n) in enumerate(zip(m.shape.aggregates, m.value_types, _nth(kinds), strict=True)):
            names[f"__A{j}"] = slots.aggregate(agg, types, n)
        renames.append(names)
    key_types = {name: kind for (kind, _), name in slots.keys.items()}
    # members that read the same rows into the same slots (the same SQL but for its output: the same
    # query with other sinks, say) are one *class*: one row an event, one group a window
    classes: dict[str, list[int]] = {}
    for i, (m, names) in enumerate(zip(members, renames, strict=True)):
        filled: dict[str, str] = {}
        for j, key in enumerate(m.shape.keys):
            filled[names[f"__K{j}"]] = render(key)
        for j, agg in enumerate(m.shape.aggregates):
            for v, value in enumerate(agg.values):
                filled[f"{names[f'__A{j}']}_v{v}"] = render(value)
        parts = [
            f"'{slot}', {filled.get(slot, f'CAST(NULL AS {kind})')}"
            for slot, kind in (*key_types.items(), *slots.values.items())
        ]
        classes.setdefault(f"{_where(m.shape)}\n{', '.join(parts)}", []).append(i)
    events = []
    for c, body in enumerate(classes):
        where, fields = body.split("\n", 1)
        events.append(
            f"IF({where}, named_struct('{MEMBER_INDEX}', {c}{', ' if fields else ''}{fields}), NULL)"
        )
    window = members[0].shape.window
    assert window is not None
    time = window.expressions[0]
    if isinstance(time, exp.Column) and time.table:  # a join's: a column of the rows the join gives
        inner, time_column = f"{render(time)} AS __t", "__t"
        window = window.copy()
        window.set("expressions", [exp.column("__t"), *window.expressions[1:]])
    else:
        inner = time_column = render(time)
    exploded = (
        f"SELECT {time_column}, {EVENT}.* FROM (SELECT {inner}, explode(array({', '.join(events)}))"
        f" AS {EVENT} FROM {table}) WHERE {EVENT} IS NOT NULL"
    )
    groups = ", ".join([MEMBER_INDEX, *key_types, render(window)])
    aggregates = ", ".join(f"{call} AS {name}" for name, call in slots.templates.items())
    windows = (
        f"SELECT {MEMBER_INDEX}, {', '.join([*key_types, 'window'])}"
        f"{', ' + aggregates if aggregates else ''} FROM ({exploded}) GROUP BY {groups}"
    )
    cases = []
    for c, indexes in enumerate(classes.values()):
        rows: dict[str, list[str]] = {}  # a row's SQL -> the members whose row it is
        for i in indexes:
            m = members[i]

            def local(node: exp.Expr, names: Mapping[str, str] = renames[i]) -> exp.Expr | None:
                if isinstance(node, exp.Column) and not node.table and node.name in names:
                    return exp.column(names[node.name])
                return None

            outputs = [_replace(o.copy(), local) for o in m.shape.outputs]
            row = _json(m.names, outputs, time_format)
            if m.shape.having is not None:
                row = f"IF({render(_replace(m.shape.having.copy(), local))}, {row}, NULL)"
            floor = (written_by or {}).get(m.key)
            if floor is not None and (written_ms is None or floor > written_ms):
                row = f"IF(window.end > timestamp_millis({int(floor)}), {row}, NULL)"
            rows.setdefault(row, []).append(m.key)
        structs = [
            f"named_struct('k', {_string(MEMBER_SEP.join(keys))}, 'r', {row})" for row, keys in rows.items()
        ]
        cases.append(f"WHEN {c} THEN array({', '.join(structs)})")
    kept = ([f"window.end > timestamp_millis({int(written_ms)})"] if written_ms is not None else []) + (
        [f"window.start >= timestamp_millis({int(from_ms)})"] if from_ms is not None else []
    )
    written = f" WHERE {' AND '.join(kept)}" if kept else ""
    projected = f"SELECT explode(CASE {MEMBER_INDEX} {' '.join(cases)} END) AS __o FROM ({windows}){written}"
    return (
        f"SELECT __o.k AS {member_column}, __o.r AS {row_column} FROM ({projected}) WHERE __o.r IS NOT NULL"
    )


def drop_outputs(shape: Shape, drop: Sequence[bool]) -> Shape:
    """Return ``shape`` without the outputs marked in ``drop`` (columns internal to the engine)."""
    return replace(shape, outputs=tuple(o for o, d in zip(shape.outputs, drop, strict=True) if not d))
