"""Flink/Calcite constructs → Spark SQL, each a small pure function from AST to AST.

Where Flink and Spark differ, the rewrite keeps Flink's meaning (see docs/sql.md):

* ``FROM t, UNNEST(t.xs) AS u (a, b)`` (or ``CROSS JOIN UNNEST``) → ``LATERAL VIEW``: ``explode`` of a
  map (key, value) or an array of scalars, ``inline`` of an array of messages (one column per
  field); ``LEFT JOIN UNNEST(...) ON TRUE`` → ``LATERAL VIEW OUTER``;
* ``CAST`` → ``TRY_CAST``: Flink 1.14 (the original platform's) gave NULL for a value that does not
  convert, where Spark's ANSI mode stops the query; ``TIMESTAMP(p)`` with p ≤ 3 truncates to p
  digits of second as Flink does; ``TIME`` has no Spark type and is refused;
* ``x[i]`` → ``try_element_at(x, i)``: Flink's arrays count from 1 and a missing element or map key
  is NULL (Spark's ``x[i]`` counts from 0);
* ``DATE_FORMAT``, ``FROM_UNIXTIME``, ``UNIX_TIMESTAMP`` keep the Java pattern, checked against what
  Spark's formatter takes; ``UNIX_TIMESTAMP(s, fmt)`` of a string that does not parse is
  ``-9223372036854775808`` (Long.MIN_VALUE) as in Flink, not NULL or an error;
* ``FLOOR(ts TO unit)`` / ``CEIL(ts TO unit)`` → ``date_trunc``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sqlglot import exp

from job.sql.calls import build, fail, string_literal
from job.sql.infer import infer, is_string
from job.sql.library import bottom_up
from job.sql.scope import TIME_COLUMN, UNNEST_KIND

# Java datetime pattern letters that Spark's formatter refuses (week-based fields) or reads otherwise
_REFUSED_LETTERS = {
    "Y": "week-based year",
    "w": "week of year",
    "W": "week of month",
    "u": "day number of week",
    "e": "localized day of week",
    "c": "localized day of week",
    "F": "day of week in month",
    "A": "milli of day",
    "n": "nano of second",
    "N": "nano of day",
}
# DATE_FORMAT's pattern is a java.time.DateTimeFormatter's on Flink: 'u' is the year (as 'y'), S's any count of
# digits of second; a zone letter stops Flink's job (a TIMESTAMP has no zone)
_ZONE_LETTERS = "ZzXxOVv"
_TRUNC_UNITS = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND", "MILLISECOND"}
_TIMESTAMP_PRECISION = {0: "SECOND", 1: None, 2: None, 3: "MILLISECOND"}


def _selects(tree: exp.Expr) -> list[exp.Select]:
    return list(tree.find_all(exp.Select))


def rewrite_unnest(tree: exp.Expr) -> exp.Expr:
    """``FROM t, UNNEST(t.m) AS u (k, v)`` → ``FROM t LATERAL VIEW explode(t.m) u AS k, v``;
    ``UNNEST(t.items) AS i (id, qty)`` over messages → ``LATERAL VIEW inline(t.items) i AS id, qty``.

    The kind comes from :func:`job.sql.scope.resolve` (the column's type); without one, several
    names mean an array of messages and one name an array.
    """
    tree = tree.copy()
    for select in _selects(tree):
        joins = list(select.args.get("joins") or [])
        keep, laterals = [], list(select.args.get("laterals") or [])
        for join in joins:
            unnest = join.this
            if not isinstance(unnest, exp.Unnest):
                keep.append(join)
                continue
            if unnest.args.get("offset"):
                raise fail(
                    "UNNEST ... WITH ORDINALITY is not supported",
                    unnest,
                    hint="posexplode is not offered; number the elements in the producer",
                )
            alias = unnest.args.get("alias")
            names = list(alias.columns) if alias is not None and alias.columns else []
            name = (
                alias.this
                if alias is not None and alias.this
                else exp.to_identifier(f"__dagger_u{len(laterals)}")
            )
            kind = unnest.meta.get(UNNEST_KIND) or ("array" if len(names) <= 1 else "rows")
            if kind == "array" and not names:
                names = [name.copy()]
            generator = "inline" if kind == "rows" else "explode"
            outer = bool(join.side) and str(join.side).upper() == "LEFT"
            gen = exp.Anonymous(this=generator, expressions=[unnest.expressions[0].copy()])
            laterals.append(
                exp.Lateral(
                    this=gen, view=True, outer=outer, alias=exp.TableAlias(this=name, columns=names or None)
                )
            )
        if len(keep) != len(joins):
            select.set("joins", keep or None)
            select.set("laterals", laterals)
    return tree


def rewrite_casts(tree: exp.Expr) -> exp.Expr:
    """``CAST(x AS T)`` → ``TRY_CAST(x AS T)``; ``CAST(x AS TIMESTAMP(3))`` → ``date_trunc('MILLISECOND',
    TRY_CAST(x AS TIMESTAMP))``. Raises SqlError for ``TIME``, which Spark has no type for."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.TryCast) or node.args.get("safe"):
            return node  # every CAST the dialect reads is a TryCast; a plain Cast was built by a rewrite
        to = node.args["to"]
        if to.this in (exp.DataType.Type.TIME, exp.DataType.Type.TIMETZ):
            raise fail(
                "CAST to TIME is not supported: Spark has no time-of-day type",
                node,
                hint="use DATE_FORMAT(ts, 'HH:mm:ss') for the text or HOUR(ts)/MINUTE(ts) for numbers",
            )
        precision = None
        if (
            to.this
            in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
            and to.expressions
        ):
            param = to.expressions[0]
            value = param.this if isinstance(param, exp.DataTypeParam) else param
            precision = int(value.name) if isinstance(value, exp.Literal) and value.name.isdigit() else None
            to = exp.DataType.build("TIMESTAMP")
        cast = exp.TryCast(this=node.this, to=to, safe=True)
        unit = _TIMESTAMP_PRECISION.get(precision) if precision is not None else None
        if precision is not None and precision < 3 and unit is None:
            raise fail(f"TIMESTAMP({precision}) is not supported; use TIMESTAMP(0) or TIMESTAMP(3)", node)
        if unit is not None:
            return exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string(unit), cast])
        return cast

    return bottom_up(tree, visit)


def rewrite_subscripts(tree: exp.Expr) -> exp.Expr:
    """``xs[i]`` → ``try_element_at(xs, i)`` (Flink: from 1, NULL when out of range); ``m['k']`` →
    ``try_element_at(m, 'k')`` (NULL for a missing key)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            target = node.this
            if (
                isinstance(target, exp.Column)
                and not target.table
                and target.name.upper() == "MAP"
                and not target.this.quoted
            ):
                return node  # MAP['k', v] is a map constructor (rewrite_constructors)
            return exp.Anonymous(this="try_element_at", expressions=[target, node.expressions[0]])
        return node

    return bottom_up(tree, visit)


def rewrite_constructors(tree: exp.Expr) -> exp.Expr:
    """Flink's ``MAP['k1', v1, ...]`` → ``map('k1', v1, ...)``."""

    def visit(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Bracket)
            and isinstance(node.this, exp.Column)
            and not node.this.table
            and node.this.name.upper() == "MAP"
            and not node.this.this.quoted
        ):
            return exp.Anonymous(this="map", expressions=list(node.expressions))
        return node

    return bottom_up(tree, visit)


def _date_format_pattern(node: exp.TimeToStr) -> exp.Expr:
    """DATE_FORMAT(t, pattern): Flink's 'u' (the year) as 'y'; raise SqlError for a zone letter. DATE_FORMAT(s,
    pattern) of text: Flink reads its first 'yyyy-MM-dd HH:mm:ss' (NULL when that does not parse; Spark's ANSI cast
    fails) and formats it as java.text.SimpleDateFormat does (its 'u' is the day of the week: refused)."""
    value = (
        node.this.this if isinstance(node.this, exp.TimeStrToTime) else node.this
    )  # sqlglot's reading of text
    if is_string(infer(value)) or string_literal(value) is not None:
        out = node.copy()
        out.set("this", build("try_to_timestamp(substr(__a0, 1, 19), 'yyyy-MM-dd HH:mm:ss')", [value]))
        return out
    pattern = node.args.get("format")
    text = string_literal(pattern) if pattern is not None else None
    if text is None:
        return node
    parts = re.split(r"('[^']*')", text)  # quoted text is not pattern letters
    letters = "".join(parts[0::2])
    zone = next((c for c in letters if c in _ZONE_LETTERS), None)
    if zone is not None:
        raise fail(
            f"DATE_FORMAT pattern {text!r}: {zone!r} (a time zone) is not supported: a TIMESTAMP has no zone",
            node,
            hint="times are UTC: FormatTimeInZone(ts, 'UTC', pattern) formats a zone",
        )
    if "u" not in letters:
        return node
    out = node.copy()
    out.set(
        "format",
        exp.Literal.string("".join(p if i % 2 else p.replace("u", "y") for i, p in enumerate(parts))),
    )
    return out


def check_pattern(pattern: exp.Expr | None, call: exp.Expr) -> None:
    """Raise SqlError at ``call`` when its Java datetime pattern is one Spark's formatter would refuse or
    read otherwise."""
    text = string_literal(pattern) if pattern is not None else None
    if text is None:
        return
    letters = re.sub(r"'[^']*'", "", text)  # quoted text is not pattern letters
    formats = isinstance(call, exp.TimeToStr)  # DATE_FORMAT: formats any count of S (a fraction, truncated)
    for letter, what in _REFUSED_LETTERS.items():
        if letter in letters:
            raise fail(
                f"datetime pattern {text!r}: {letter!r} ({what}) is not supported",
                call,
                hint="Spark formats no week-based fields; use DAYOFWEEK(ts) or WEEKOFYEAR(ts)",
            )
    for run in re.findall(r"S+", letters):
        if len(run) != 3 and not (formats and len(run) <= 9):
            raise fail(f"datetime pattern {text!r}: use SSS for milliseconds, found {run}", call)


def rewrite_datetime(tree: exp.Expr) -> exp.Expr:
    """Check the Java patterns of ``DATE_FORMAT`` / ``FROM_UNIXTIME`` / ``UNIX_TIMESTAMP``;
    ``UNIX_TIMESTAMP(s, fmt)`` → Long.MIN_VALUE for text that does not parse (Flink); ``FLOOR/CEIL(ts TO
    unit)`` → ``date_trunc``."""

    def visit(node: exp.Expr) -> exp.Expr:
        written = node  # errors point at the call as the query has it
        if isinstance(node, exp.TimeToStr):
            node = _date_format_pattern(node)
        if isinstance(node, exp.TimeToStr | exp.UnixToStr | exp.StrToUnix):
            check_pattern(node.args.get("format"), written)
        if isinstance(node, exp.StrToUnix) and not isinstance(node.this, exp.CurrentTimestamp):
            fmt = node.args.get("format") or exp.Literal.string("yyyy-MM-dd HH:mm:ss")
            return build(
                "CASE WHEN __a0 IS NULL THEN CAST(NULL AS BIGINT) ELSE coalesce(unix_timestamp("
                "try_to_timestamp(__a0, __a1)), -9223372036854775807L - 1L) END",
                [node.this, fmt],
            )
        if isinstance(node, exp.Floor | exp.Ceil) and node.args.get("to") is not None:
            unit = node.args["to"].name.upper()
            if unit not in _TRUNC_UNITS:
                raise fail(
                    f"{type(node).__name__.upper()}(... TO {unit}) is not supported; units: "
                    f"{', '.join(sorted(_TRUNC_UNITS))}",
                    node,
                )
            return _floor_ceil_to(node, unit)
        return node

    return bottom_up(tree, visit)


def _floor_ceil_to(node: exp.Floor | exp.Ceil, unit: str) -> exp.Expr:
    """``FLOOR``/``CEIL(t TO unit)`` → ``date_trunc``: weeks start on Sunday (Flink's; Spark's on Monday), a quarter
    is 3 months, and a DATE stays a DATE."""
    if unit == "WEEK":
        floor = build("date_trunc('WEEK', __a0 + INTERVAL 1 DAY) - INTERVAL 1 DAY", [node.this])
    else:
        floor = exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string(unit), node.this])
    step = {"WEEK": "7 DAY", "QUARTER": "3 MONTH"}.get(unit, f"1 {unit}")
    out = (
        floor
        if isinstance(node, exp.Floor)
        else build(f"IF(__a0 = __a1, __a1, __a0 + INTERVAL {step})", [floor, node.this])
    )
    kind = infer(node.this)
    return (
        build("CAST(__a0 AS DATE)", [out])
        if kind is not None and kind.this == exp.DataType.Type.DATE
        else out
    )


_DEDUP_HINT = (
    "to keep each key's first row in event time: SELECT ... FROM (SELECT *, ROW_NUMBER() OVER (PARTITION "
    "BY k ORDER BY rowtime ASC) AS rn FROM t) WHERE rn = 1; for the top N per window, GROUP BY the "
    "window and the key"
)
_RANKING = (exp.RowNumber,)
_SOURCE_PARENTS = (exp.From, exp.Join, exp.SetOperation, exp.Lateral)


def _subquery_expression(node: exp.Expr) -> bool:
    """Whether ``node`` is a subquery used as a value or a condition (not as a source in FROM or a JOIN)."""
    if isinstance(node, exp.In) and node.args.get("query") is not None:
        return True
    if isinstance(node, exp.Exists | exp.Any | exp.All):
        return True
    return (
        isinstance(node, exp.Subquery)
        and node.parent is not None
        and not isinstance(node.parent, _SOURCE_PARENTS)
        and not isinstance(node.parent, exp.Subquery)
    )


_OUTER = {"LEFT", "RIGHT", "FULL"}


def _is_query(side: exp.Expr) -> bool:
    inner = side.unnest() if isinstance(side, exp.Paren) else side
    return isinstance(inner, exp.Query | exp.Subquery)


def _selects_rowtime(union: exp.Union) -> bool:
    """Whether the first SELECT of a UNION outputs ``rowtime`` (Spark then drops duplicates within the watermark)."""
    first = union.this
    while isinstance(first, exp.SetOperation | exp.Subquery | exp.Paren):
        first = first.this
    return isinstance(first, exp.Select) and any(
        isinstance(t, exp.Column) and t.name == TIME_COLUMN
        for item in first.expressions
        for t in [item.this if isinstance(item, exp.Alias) else item]
    )


def _check_stream_operators(node: exp.Expr) -> None:
    """Raise SqlError for an operator Spark runs on a batch but not on a stream in append mode: UNION
    without ALL (unless it outputs ``rowtime``), INTERSECT, EXCEPT, ORDER BY, an outer join with no interval
    on the event times."""
    if isinstance(node, exp.SetOperation) and not all(
        _is_query(side) for side in (node.this, node.expression)
    ):
        return  # job.sql.validate.check_set_operations says which side is not a query
    if isinstance(node, exp.Union) and node.args.get("distinct") and not _selects_rowtime(node):
        raise fail(
            "UNION (without ALL) is not supported on streams unless it outputs rowtime: it would hold "
            "every row to remove duplicates",
            node.expression,
            hint="write UNION ALL, or select rowtime too (duplicates are then dropped within the watermark)",
        )
    if isinstance(node, exp.Intersect | exp.Except):
        kind = "INTERSECT" if isinstance(node, exp.Intersect) else "EXCEPT"
        raise fail(
            f"{kind} is not supported on streams",
            node.expression,
            hint="join the streams on a key and an interval of event time",
        )
    if isinstance(node, exp.Order) and not isinstance(node.parent, exp.Window):
        raise fail(
            "ORDER BY is not supported on streams: rows are written as they come, windows as they close",
            node,
            hint="leave out the ORDER BY; the sink's reader can sort",
        )
    if (
        isinstance(node, exp.Join)
        and str(node.args.get("side") or "").upper() in _OUTER
        and isinstance(node.this, exp.Table | exp.Subquery)
    ):
        on = node.args.get("on")
        if on is None or on.find(exp.Between) is None:
            side = str(node.args["side"]).upper()
            raise fail(
                f"a {side} JOIN of streams needs an interval on their event times in its ON",
                node.this,
                hint="ON a.k = b.k AND b.rowtime BETWEEN a.rowtime AND a.rowtime + INTERVAL '5' MINUTE",
            )


def check_unsupported(tree: exp.Expr) -> None:
    """Raise SqlError at a Flink construct Spark's streaming engine cannot run, saying what to write instead:
    a temporal join (``FOR SYSTEM_TIME AS OF``), ``OVER`` (aggregations and ``ROW_NUMBER`` for Top-N or
    deduplication), a subquery in an expression (``IN (SELECT ...)``, ``EXISTS``, a scalar subquery),
    ``SELECT DISTINCT``, ``UNION`` without ALL, ``INTERSECT``, ``EXCEPT``, ``ORDER BY`` and an outer join
    without an interval."""
    for table in tree.find_all(exp.Table):
        if table.args.get("version") is not None:
            raise fail(
                "a temporal join (FOR SYSTEM_TIME AS OF) is not supported: Spark has no versioned tables",
                table,
                hint="join two streams on an interval: b.rowtime BETWEEN a.rowtime AND "
                "a.rowtime + INTERVAL '5' MINUTE",
            )
    for node in tree.walk():
        if isinstance(node, exp.Window):
            if isinstance(node.this, _RANKING):
                raise fail(
                    "ROW_NUMBER() OVER (...) (Top-N, deduplication) is not supported on streams: it "
                    "retracts rows it has emitted",
                    node,
                    hint=_DEDUP_HINT,
                )
            raise fail(
                "OVER aggregations are not supported on streams; use a window in GROUP BY",
                node,
                hint="GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), key (or HOP(rowtime, slide, size) "
                "for a sliding window)",
            )
        if _subquery_expression(node):
            raise fail(
                "a subquery in an expression (IN (SELECT ...), EXISTS, a scalar subquery) is not supported: "
                "streaming subqueries are not supported",
                node,
                hint="join the streams instead: FROM a JOIN b ON a.k = b.k AND b.rowtime BETWEEN "
                "a.rowtime - INTERVAL '5' MINUTE AND a.rowtime",
            )
        _check_stream_operators(node)
        if isinstance(node, exp.Select) and node.args.get("distinct") is not None:
            raise fail(
                "SELECT DISTINCT is not supported on streams",
                node.expressions[0] if node.expressions else node,
                hint="GROUP BY the columns within a window: SELECT a, b ... GROUP BY TUMBLE(rowtime, "
                "INTERVAL '1' MINUTE), a, b gives each distinct row once per window",
            )


def _conjuncts(node: exp.Expr | None) -> list[exp.Expr]:
    if node is None:
        return []
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _qualifiers(node: exp.Expr) -> set[str]:
    return {col.table for col in node.find_all(exp.Column) if col.table}


def _comma_join(join: exp.Join) -> bool:
    """Whether ``join`` is ``FROM a, b`` (or ``CROSS JOIN b``) of a table or a subquery."""
    return (
        str(join.args.get("kind") or "").upper() == "CROSS"
        and join.args.get("on") is None
        and not join.args.get("using")
        and isinstance(join.this, exp.Table | exp.Subquery)
    )


def rewrite_comma_joins(tree: exp.Expr) -> exp.Expr:
    """Flink's ``FROM b, p WHERE b.k = p.k AND p.rowtime BETWEEN ... AND b.city = 1`` → ``FROM b JOIN p ON b.k =
    p.k AND p.rowtime BETWEEN ... WHERE b.city = 1``: each condition that names the joined table (and only
    tables before it) moves into its ON, so Spark plans an interval join (a cross join of streams cannot
    run). Raises SqlError for a comma join that no condition links to the tables before it."""
    if not any(_comma_join(j) for j in tree.find_all(exp.Join)):
        return tree
    tree = tree.copy()
    for select in list(tree.find_all(exp.Select)):
        joins = list(select.args.get("joins") or [])
        if not any(_comma_join(j) for j in joins):
            continue
        where = select.args.get("where")
        rest = _conjuncts(where.this if where is not None else None)
        source = select.args.get("from_") or select.args.get("from")
        seen = {source.this.alias_or_name} if source is not None else set()
        for join in joins:
            name = join.this.alias_or_name
            if _comma_join(join):
                mine = [c for c in rest if name in _qualifiers(c) and _qualifiers(c) <= seen | {name}]
                if not mine:
                    other = sorted(seen)[0] if seen else "a"
                    raise fail(
                        f"{name} is joined with no condition linking it to {', '.join(sorted(seen))}: a "
                        "cross join of streams is not supported",
                        join.this,
                        hint=f"name both tables in a condition: WHERE {other}.k = {name}.k AND {name}.rowtime "
                        f"BETWEEN {other}.rowtime AND {other}.rowtime + INTERVAL '5' MINUTE",
                    )
                join.set("kind", None)
                join.set("on", exp.and_(*(c.copy() for c in mine)))
                rest = [c for c in rest if all(c is not m for m in mine)]
            seen.add(name)
        select.set("where", exp.Where(this=exp.and_(*(c.copy() for c in rest))) if rest else None)
    return tree


FLINK_REWRITES: list[Callable[[exp.Expr], exp.Expr]] = [
    rewrite_unnest,
    rewrite_casts,
    rewrite_constructors,
    rewrite_subscripts,
    rewrite_datetime,
]
