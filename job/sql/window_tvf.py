"""Flink's window table-valued functions → Dagger SQL's group windows, each step a pure function of the AST.

``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL '1' MINUTES))`` (HOP with slide and size, CUMULATE
with step and size; positional or named arguments, ``DATA => TABLE t, TIMECOL => ..., SIZE => ...``) gives t's
rows with ``window_start``, ``window_end`` and ``window_time`` (``window_end`` - 1 ms), as Flink does:

* with ``GROUP BY window_start, window_end[, keys]`` (a window aggregation), the SELECT becomes ``FROM t GROUP BY
  TUMBLE(rowtime, size), keys`` with ``TUMBLE_START``/``TUMBLE_END`` for the window's columns (``HOP`` alike);
  ``window_time`` is ``window_end - 1 ms``, or, as a column of a subquery, the window's event time
  (``TUMBLE_ROWTIME``) that an outer window can group by (Flink's cascading windows);
* a CUMULATE window aggregation groups by ``HOP(rowtime, step, size)`` and keeps, of the hopping windows a row
  falls in, those whose end is within the row's ``size`` period: each is a cumulating window (same end, so it
  closes when Flink's does), whose start is the start of that period (:func:`cumulate_windows` adds the filter
  after translation);
* a SESSION window aggregation, partitioned by the keys it groups by, is ``GROUP BY SESSION(rowtime, gap), keys``
  (a session per key, as Spark's);
* without aggregation, each row comes with each window it falls in: a TUMBLE's computed from its time, a HOP's
  and a CUMULATE's by an UNNEST of the windows' numbers; ``SELECT DISTINCT`` over a TVF that outputs
  ``window_start`` and ``window_end`` is a window aggregation.

What cannot run is refused at its line and column, saying what to write instead: OFFSET, a window TVF joined
with another table (a window join), SESSION without aggregation or not partitioned by its GROUP BY keys, a
time column other than a stream's ``rowtime``, GROUP BY without both window_start and window_end.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from job.sql.calls import build, fail
from job.sql.rewrite import interval_ms, interval_text

KINDS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
TIME_COLUMN = "rowtime"  # a stream's event time (job.sql.scope.TIME_COLUMN)
#: Each TVF's parameters in Flink's order (OFFSET is optional).
PARAMETERS = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"),
    "SESSION": ("DATA", "TIMECOL", "GAP"),
}
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
#: Meta key on a SELECT grouped by a CUMULATE window: the window's size in microseconds.
CUMULATE_META = "dagger_cumulate_us"
_LEGACY = {"TUMBLE": "TUMBLE", "HOP": "HOP", "CUMULATE": "HOP", "SESSION": "SESSION"}
_GROUP_HINT = (
    "SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), "
    "INTERVAL '1' MINUTES)) GROUP BY window_start, window_end, k"
)


@dataclass(frozen=True)
class WindowTvf:
    """One window TVF call: its kind, the table it reads, its time column and its intervals (Flink's names)."""

    kind: str
    table: exp.Table
    timecol: exp.Column
    intervals: dict[str, exp.Interval]
    call: exp.Anonymous
    partition: list[exp.Expr]  # SESSION's PARTITION BY keys

    def legacy(self, suffix: str = "") -> exp.Anonymous:
        """The group window call (``suffix`` '') or one of its properties (``_START``, ``_END``, ``_ROWTIME``)."""
        if self.kind in ("TUMBLE", "SESSION"):
            args = [self.intervals["GAP" if self.kind == "SESSION" else "SIZE"]]
        else:
            args = [self.intervals["SLIDE" if self.kind == "HOP" else "STEP"], self.intervals["SIZE"]]
        call = exp.Anonymous(
            this=f"{_LEGACY[self.kind]}{suffix}", expressions=[self.timecol.copy(), *(a.copy() for a in args)]
        )
        call.meta.update(self.call.meta)
        return call

    def size_us(self) -> int:
        return interval_ms(interval_text(self.intervals["SIZE"])) * 1000


def tvf_call(source: exp.Expr | None) -> exp.Anonymous | None:
    """Return the TUMBLE/HOP/CUMULATE/SESSION call of ``FROM TABLE(TUMBLE(...))`` or of ``FROM TUMBLE(...)``
    (Flink's pages write both), or None for another source."""
    if not isinstance(source, exp.Table) or not isinstance(source.this, exp.Anonymous):
        return None
    if source.this.name.upper() in KINDS:
        return source.this
    if source.this.name.upper() != "TABLE" or len(source.this.expressions) != 1:
        return None
    call = source.this.expressions[0]
    return call if isinstance(call, exp.Anonymous) and call.name.upper() in KINDS else None


def read_tvf(call: exp.Anonymous) -> WindowTvf:
    """Return the arguments of a window TVF call, positional or named. Raises SqlError at a wrong argument."""
    kind = call.name.upper()
    names = PARAMETERS[kind]
    sizes = ", ".join(f"INTERVAL {n.lower()}" for n in names[2:] if n != "OFFSET")
    usage = f"{kind}(TABLE t{' PARTITION BY k' if kind == 'SESSION' else ''}, DESCRIPTOR(rowtime), {sizes})"
    args: dict[str, exp.Expr] = {}
    for i, arg in enumerate(call.expressions):
        if isinstance(arg, exp.Kwarg):
            name = arg.this.name.upper()
            if name not in names:
                raise fail(
                    f"{kind} has no parameter {name}; its parameters: {', '.join(names)}", arg, hint=usage
                )
            args[name], arg = arg.expression, arg.expression
        elif i < len(names):
            args[names[i]] = arg
        else:
            raise fail(f"{kind} takes at most {len(names)} arguments", arg, hint=usage)
    missing = [n for n in names if n not in args and n != "OFFSET"]
    if missing:
        raise fail(f"{kind} needs {', '.join(missing)}", call, hint=usage)
    data, timecol = args["DATA"], args["TIMECOL"]
    if not (
        isinstance(data, exp.Anonymous)
        and data.name.upper() == "TABLE"
        and data.expressions
        and isinstance(data.expressions[0], exp.Table)
    ):
        raise fail(f"the first argument of {kind} is the table it windows: TABLE t", data, hint=usage)
    if not (
        isinstance(timecol, exp.Anonymous)
        and timecol.name.upper() == "DESCRIPTOR"
        and len(timecol.expressions) == 1
        and isinstance(timecol.expressions[0], exp.Column)
    ):
        raise fail(
            f"the time column of {kind} is DESCRIPTOR(column), the table's event time", timecol, hint=usage
        )
    if "OFFSET" in args:
        raise fail(
            f"the OFFSET of a {kind} window is not supported: windows start at whole multiples of their "
            "size (UTC)",
            args["OFFSET"],
            hint="leave out the offset",
        )
    intervals = {n: a for n, a in args.items() if n not in ("DATA", "TIMECOL")}
    for arg in intervals.values():
        interval_text(arg)  # a positive whole interval, or SqlError at it
    partition = list(data.expressions[1].expressions) if len(data.expressions) > 1 else []
    # the checks above made them a Table, a Column and Intervals
    tvf = WindowTvf(
        kind,
        data.expressions[0],
        timecol.expressions[0],
        intervals,  # type: ignore[arg-type]
        call,
        partition,
    )
    if kind in ("HOP", "CUMULATE"):
        step = "SLIDE" if kind == "HOP" else "STEP"
        size, every = (
            interval_ms(interval_text(intervals["SIZE"])),
            interval_ms(interval_text(intervals[step])),
        )
        if size % every:
            raise fail(
                f"the SIZE of a {kind} window must be a whole multiple of its {step}",
                intervals["SIZE"],
                hint=usage,
            )
    return tvf


def _window_column(node: exp.Expr, alias: str | None) -> str | None:
    """``window_start``/``window_end``/``window_time`` (lower case) when ``node`` is that column (of the TVF)."""
    if (
        isinstance(node, exp.Column)
        and node.name.lower() in WINDOW_COLUMNS
        and not node.args.get("db")
        and (not node.table or node.table == alias)
    ):
        return node.name.lower()
    return None


def _group_keys(select: exp.Select) -> list[exp.Expr]:
    group = select.args.get("group")
    return list(group.expressions) if group is not None else []


def _window_end_minus_1ms(end: exp.Expr) -> exp.Expr:
    return exp.Sub(
        this=end, expression=exp.Interval(this=exp.Literal.string("0.001"), unit=exp.var("SECOND"))
    )


def _cumulate_start(tvf: WindowTvf) -> exp.Expr:
    """The start of a cumulating window: the start of the ``size`` period its end (exclusive) closes."""
    return build(
        f"timestamp_micros(unix_micros(__a0) - 1 - pmod(unix_micros(__a0) - 1, {tvf.size_us()}))",
        [tvf.legacy("_END")],
    )


def _aggregation(select: exp.Select, tvf: WindowTvf, alias: str | None, nested: bool) -> exp.Select:
    """A window aggregation over ``tvf``: GROUP BY window_start, window_end, keys → GROUP BY the group window."""
    keys = _group_keys(select)
    named = {_window_column(k, alias) for k in keys}
    if not {"window_start", "window_end"} <= named:
        raise fail(
            "a window aggregation over a window table-valued function groups by window_start and window_end",
            select.args["group"],
            hint=_GROUP_HINT,
        )
    where = select.args.get("where")
    used = next((c for c in where.find_all(exp.Column) if _window_column(c, alias)), None) if where else None
    if used is not None:
        raise fail(f"{used.name} is known only after the rows are grouped: filter on it in HAVING", used)
    kept = [k for k in keys if _window_column(k, alias) is None]
    if tvf.kind == "SESSION":
        _check_session_keys(tvf, kept, select)
    select.set("group", exp.Group(expressions=[tvf.legacy(), *kept]))

    def column(name: str, item: bool) -> exp.Expr:
        if name == "window_start":
            return _cumulate_start(tvf) if tvf.kind == "CUMULATE" else tvf.legacy("_START")
        if name == "window_end":
            return tvf.legacy("_END")
        if nested and item and tvf.kind != "SESSION":
            return tvf.legacy(
                "_ROWTIME"
            )  # an event time an outer window can group by (Flink's cascading windows)
        return _window_end_minus_1ms(tvf.legacy("_END"))

    def prop(node: exp.Expr) -> exp.Expr:
        name = _window_column(node, alias)
        if name is None:
            return node
        new = column(name, False)
        new.meta.update(node.meta)
        return new

    items: list[exp.Expr] = []
    for item in select.expressions:
        target = item.this if isinstance(item, exp.Alias) else item
        name = _window_column(target, alias)
        if name is None:
            items.append(item.transform(prop))
            continue
        new = column(name, True)
        new.meta.update(target.meta)
        items.append(exp.alias_(new, item.alias if isinstance(item, exp.Alias) else name))
    select.set("expressions", items)
    for key in ("having", "qualify"):
        if select.args.get(key) is not None:
            select.set(key, select.args[key].transform(prop))
    if tvf.kind == "CUMULATE":
        select.meta[CUMULATE_META] = tvf.size_us()
    return select


def _check_session_keys(tvf: WindowTvf, keys: list[exp.Expr], select: exp.Select) -> None:
    """A SESSION aggregation runs when its sessions are per GROUP BY key: PARTITION BY the same keys."""

    def names(nodes: list[exp.Expr]) -> set[str]:
        return {n.name.lower() if isinstance(n, exp.Column) else n.sql() for n in nodes}

    if names(tvf.partition) != names(keys):
        keys_text = ", ".join(k.sql() for k in keys) or "(none)"
        raise fail(
            "a SESSION window aggregation is supported when its sessions are per GROUP BY key: PARTITION BY "
            f"the keys it groups by ({keys_text})",
            tvf.call,
            hint=f"SESSION(TABLE t PARTITION BY {', '.join(k.sql() for k in keys) or 'k'}, DESCRIPTOR(rowtime), "
            "INTERVAL gap) with GROUP BY window_start, window_end and the same keys",
        )


def _row_windows(tvf: WindowTvf, select: exp.Select, alias: str | None) -> dict[str, exp.Expr]:
    """Each row's windows, from its own time (no aggregation): a TUMBLE's one; a HOP's size/slide windows and a
    CUMULATE's windows that still include the row, one row each (an UNNEST of their numbers joined to ``select``)."""
    time, size = tvf.timecol, tvf.size_us()
    if tvf.kind == "TUMBLE":
        start = build(f"timestamp_micros(unix_micros(__a0) - pmod(unix_micros(__a0), {size}))", [time])
        end = build(f"timestamp_micros(unix_micros(__a0) - pmod(unix_micros(__a0), {size}) + {size})", [time])
        return {"window_start": start, "window_end": end, "window_time": _window_end_minus_1ms(end.copy())}
    every = interval_ms(interval_text(tvf.intervals["SLIDE" if tvf.kind == "HOP" else "STEP"])) * 1000
    if tvf.kind == "HOP":
        numbers = f"sequence(0, {size // every - 1})"
        start_text = f"unix_micros(__a0) - pmod(unix_micros(__a0), {every}) - __dagger_w.__dagger_k * {every}"
        end_text = f"{start_text} + {size}"
    else:
        numbers = f"sequence(pmod(unix_micros(__a0), {size}) DIV {every} + 1, {size // every})"
        start_text = f"unix_micros(__a0) - pmod(unix_micros(__a0), {size})"
        end_text = f"{start_text} + __dagger_w.__dagger_k * {every}"
    unnest = build(f"SELECT 1 FROM t CROSS JOIN UNNEST({numbers}) AS __dagger_w (__dagger_k)", [time])
    select.set("joins", list(unnest.args["joins"]))
    start, end = (
        build(f"timestamp_micros({start_text})", [time]),
        build(f"timestamp_micros({end_text})", [time]),
    )
    return {"window_start": start, "window_end": end, "window_time": _window_end_minus_1ms(end.copy())}


def _projection(select: exp.Select, tvf: WindowTvf, alias: str | None) -> exp.Select:
    """A window TVF without aggregation: each row with its window's columns (a row per window)."""
    if tvf.kind == "SESSION":
        raise fail(
            "SESSION without aggregation is not supported: a row's session is known only when it closes",
            tvf.call,
            hint="aggregate per session: GROUP BY window_start, window_end and the PARTITION BY keys",
        )
    columns = _row_windows(tvf, select, alias)
    table = alias or tvf.table.name

    def prop(node: exp.Expr) -> exp.Expr:
        name = _window_column(node, alias)
        if name is None:
            return node
        new = columns[name].copy()
        new.meta.update(node.meta)
        return new

    items: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star) and item.table == alias
        ):
            items += [
                exp.Column(this=exp.Star(), table=exp.to_identifier(table)),
                *(exp.alias_(columns[n].copy(), n) for n in WINDOW_COLUMNS),
            ]
            continue
        target = item.this if isinstance(item, exp.Alias) else item
        name = _window_column(target, alias)
        items.append(
            exp.alias_(prop(target), item.alias if isinstance(item, exp.Alias) else name)
            if name
            else item.transform(prop)
        )
    select.set("expressions", items)
    for key in ("where", "qualify"):
        if select.args.get(key) is not None:
            select.set(key, select.args[key].transform(prop))
    return select


def _distinct_as_group(select: exp.Select, alias: str | None) -> None:
    """``SELECT DISTINCT window_start, window_end, k FROM TABLE(...)`` → ``GROUP BY`` its items (Flink plans it
    as a window aggregation); a DISTINCT without both window columns stays (refused later)."""
    if select.args.get("distinct") is None or select.args.get("group") is not None:
        return
    targets = [item.this if isinstance(item, exp.Alias) else item for item in select.expressions]
    if not {"window_start", "window_end"} <= {_window_column(t, alias) for t in targets}:
        return
    select.set("distinct", None)
    select.set("group", exp.Group(expressions=[t.copy() for t in targets]))


def rewrite_window_tvfs(tree: exp.Expr) -> exp.Expr:
    """Return ``tree`` with every SELECT over a window TVF in Dagger SQL's group-window form (see the module).

    Raises SqlError at a window TVF that cannot run, with what to write instead."""
    if not any(tvf_call(t) is not None for t in tree.find_all(exp.Table)):
        _refuse_stray(tree)
        return tree
    tree = tree.copy()
    event_times: set[str] = set()  # names of the windowed subqueries' window_time (event times)
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    for select in list(tree.find_all(exp.Select)):
        source = select.args.get("from_") or select.args.get("from")
        call = tvf_call(source.this) if source is not None else None
        if call is None or source is None:
            continue
        if select.args.get("joins"):
            raise fail(
                "a window table-valued function joined with another table (a window join) is not supported",
                select.args["joins"][0].this,
                hint="join the streams on an interval of event time, then group by a window",
            )
        tvf = read_tvf(call)
        if tvf.table.name not in ctes and tvf.timecol.name != TIME_COLUMN:
            raise fail(
                f"the event time of stream {tvf.table.name} is {TIME_COLUMN}: a window over "
                f"{tvf.timecol.name} would never close",
                tvf.timecol,
                hint="DESCRIPTOR(rowtime)",
            )
        alias = source.this.alias or None
        table = exp.Table(this=tvf.table.this.copy())
        table.meta.update(tvf.table.meta)
        if alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
        source.set("this", table)
        _distinct_as_group(select, alias)
        nested = not _top_level(select)
        if select.args.get("group") is not None:
            _aggregation(select, tvf, alias, nested)
            if nested:
                event_times |= {
                    i.alias
                    for i in select.expressions
                    if isinstance(i.this, exp.Anonymous) and i.this.name.upper().endswith("_ROWTIME")
                }
        else:
            _projection(select, tvf, alias)
    _refuse_stray(tree)
    return _millisecond_outputs(tree, event_times)


def _millisecond_outputs(tree: exp.Expr, event_times: set[str]) -> exp.Expr:
    """A column the query outputs as it is that is a subquery's ``window_time`` (an event time, the window's end
    - 1 µs for Spark) → that time to the millisecond: the window's end - 1 ms, as Flink gives it."""
    if not event_times:
        return tree
    for select in tree.find_all(exp.Select):
        if not _top_level(select) or select.args.get("group") is not None:
            continue
        items = []
        for item in select.expressions:
            target = item.this if isinstance(item, exp.Alias) else item
            if isinstance(target, exp.Column) and target.name in event_times:
                trunc = exp.Anonymous(
                    this="date_trunc", expressions=[exp.Literal.string("MILLISECOND"), target.copy()]
                )
                item = exp.alias_(trunc, item.alias_or_name)
            items.append(item)
        select.set("expressions", items)
    return tree


def _top_level(select: exp.Select) -> bool:
    """Whether ``select``'s rows are the query's own (the query, or a branch of its UNION ALL)."""
    node: exp.Expr | None = select.parent
    while isinstance(node, exp.SetOperation):
        node = node.parent
    return node is None


def _refuse_stray(tree: exp.Expr) -> None:
    """Raise SqlError at a window TVF, ``TABLE t`` or ``DESCRIPTOR(...)`` anywhere but ``FROM TABLE(TUMBLE(...))``."""
    for node in tree.find_all(exp.Anonymous):
        name = node.name.upper()
        if name == "DESCRIPTOR" or (
            name == "TABLE" and node.expressions and isinstance(node.expressions[0], exp.Table)
        ):
            raise fail(f"{name} belongs in a window table-valued function in FROM", node, hint=_GROUP_HINT)
        if name in ("CUMULATE",):
            raise fail(
                "CUMULATE is a window table-valued function: FROM TABLE(CUMULATE(TABLE t, "
                "DESCRIPTOR(rowtime), INTERVAL step, INTERVAL size))",
                node,
            )


def cumulate_windows(tree: exp.Expr) -> exp.Expr:
    """In the translated Spark SQL, keep of each row's hopping windows (``window(rowtime, size, step)``) the
    cumulating ones: those whose end is at most the end of the row's ``size`` period.

    ``SELECT items FROM t WHERE c GROUP BY window(rowtime, size, step), k`` becomes ``SELECT items FROM (SELECT
    *, window(rowtime, size, step) AS window FROM t WHERE c) AS t WHERE unix_micros(window.end) <= the period's
    end GROUP BY window, k``: the grouped window is a column computed by Spark's window(), so it stays an event
    time (closed by the watermark at its end)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Select) or CUMULATE_META not in node.meta:
            return node
        size = node.meta[CUMULATE_META]
        group = node.args["group"]
        window = next(
            k for k in group.expressions if isinstance(k, exp.Anonymous) and k.name.lower() == "window"
        )
        table = (node.args.get("from_") or node.args["from"]).this
        inner = exp.select(exp.Star(), exp.alias_(window.copy(), "window")).from_(table.copy())
        if node.args.get("where") is not None:
            inner.set("where", node.args["where"].copy())
        name = table.alias_or_name
        time = window.expressions[0].copy()
        time.set("table", None)
        keep = build(
            f"unix_micros(window.end) <= unix_micros(__a0) - pmod(unix_micros(__a0), {size}) + {size}",
            [time],
            plain_casts=True,
        )
        outer = node.copy()
        outer.set(
            "from_" if "from_" in node.args else "from",
            exp.From(this=exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier(name)))),
        )
        outer.set("where", exp.Where(this=keep))
        outer.set(
            "group",
            exp.Group(
                expressions=[  # the window last (job.sql.rewrite.put_window_keys_last)
                    *(k.copy() for k in group.expressions if k is not window),
                    exp.column("window"),
                ]
            ),
        )
        outer.meta.pop(CUMULATE_META, None)
        return outer

    return tree.transform(visit)
