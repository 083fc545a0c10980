"""Checks that run before Spark starts, each raising SqlError with a line and column."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Mapping

from sqlglot import exp

from job.common.names import IDENTIFIER_RE
from job.errors import SqlError
from job.sql.calls import call_name
from job.sql.catalog import (
    DAGGER_FUNCTIONS,
    DENIED_SPARK_FUNCTIONS,
    DaggerFunction,
    dagger_kind,
    is_known,
    lookup,
    spark_functions,
)
from job.sql.library import check_call
from job.sql.parse import position
from job.sql.rewrite import (
    ROWTIME_PROPERTIES,
    WINDOW_FUNCS,
    WINDOW_PROPERTIES,
    fname,
    window_args,
    window_family,
)
from job.sql.scope import TIME_COLUMN, resolve

__all__ = [
    "TIME_COLUMN",
    "check_columns",
    "check_unique_output",
    "output_columns",
    "check_functions",
    "check_set_operations",
    "check_spark_functions",
    "check_tables",
    "check_windows",
]


def _fail(message: str, node: exp.Expr | None, hint: str | None = None) -> SqlError:
    line, col = position(node)
    return SqlError(message, line=line, col=col, hint=hint)


def _in_lateral_table(node: exp.Expr) -> bool:
    """Return whether ``node`` is the ``TABLE(...)`` of a LATERAL TABLE or the call inside it."""
    parent = node.parent
    if isinstance(node, exp.Anonymous) and str(node.name).upper() == "TABLE":
        return isinstance(parent, exp.Lateral)
    return (
        isinstance(parent, exp.Anonymous)
        and str(parent.name).upper() == "TABLE"
        and isinstance(parent.parent, exp.Lateral)
    )


def similar_functions(name: str, user: Mapping[str, DaggerFunction] | None = None) -> list[str]:
    """Return the known functions (Spark built-ins, Dagger functions, the dagger's own) whose name is close to
    ``name``, as they are spelled in the docs (Dagger functions in their own case, Spark's in lower case):
    the closest by spelling (``coutn`` -> ``count``; only the best when one is clearly closer) first, then Dagger functions that start alike."""
    spelled = {fn.name.lower(): fn.name for fn in [*DAGGER_FUNCTIONS.values(), *(user or {}).values()]}
    for builtin in spark_functions():
        spelled.setdefault(builtin, builtin)
    low = name.lower()
    scored = sorted(((difflib.SequenceMatcher(None, low, n).ratio(), n) for n in spelled), reverse=True)
    best = scored[0][0] if scored else 0.0
    near = [spelled[n] for score, n in scored[:3] if score >= 0.75 and score > best - 0.04]
    near += [
        spelled[n]
        for n in sorted(spelled)
        if n[:3] == low[:3]
        and spelled[n] not in near
        and n in {d.lower() for d in (fn.name for fn in DAGGER_FUNCTIONS.values())}
    ]
    return near[:5]


def check_functions(tree: exp.Expr, user: Mapping[str, DaggerFunction] | None = None) -> None:
    """Every called function must be a Spark built-in, a Dagger function or one of the dagger's own
    (``user``); each Dagger call must have the right argument count and literal arguments.

    Raises SqlError at the call or the argument.
    """
    for node in tree.walk():
        if (
            isinstance(node, exp.Func)
            and not isinstance(node, exp.Anonymous)
            and node.sql_name().lower() in DENIED_SPARK_FUNCTIONS
        ):
            raise _fail(
                f"{node.sql_name()} is not available in Dagger SQL: it reaches outside the query's rows "
                "(the JVM, files or the process)",
                node,
            )
        if not isinstance(node, exp.Anonymous | exp.RegexpSplit):
            continue
        name = node.name if isinstance(node, exp.Anonymous) else "Split"
        if isinstance(node, exp.Anonymous) and str(name).upper() == "TABLE" and _in_lateral_table(node):
            continue
        if str(name).lower() in DENIED_SPARK_FUNCTIONS and lookup(str(name), user) is None:
            raise _fail(
                f"{name} is not available in Dagger SQL: it reaches outside the query's rows (the JVM, "
                "files or the process)",
                node,
            )
        if not is_known(name, user):
            near = similar_functions(str(name), user)
            raise _fail(
                f"unknown function {name}", node, hint=f"did you mean {', '.join(near)}?" if near else None
            )
        fn = lookup(call_name(node) or name, user)
        if fn is None or fn.kind in ("window", "window_property", "rowtime"):
            continue  # Spark built-ins; windows are checked by check_windows
        if isinstance(node, exp.RegexpSplit) and node.args.get("limit") is not None:
            continue  # Spark's own split(text, regex, limit)
        if fn.kind == "table" and not _in_lateral_table(node):
            raise _fail(
                f"{fn.name} is a table function: call it as LATERAL TABLE({fn.name}(...)) in FROM",
                node,
                hint=fn.signature,
            )
        check_call(fn, node)
    for count in tree.find_all(exp.Count):
        if isinstance(count.this, exp.Distinct):
            raise _fail("COUNT(DISTINCT ...) is not available on streams", count, hint="use DistinctCount(x)")


_CALL_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(")
#: calls Spark SQL writes that SHOW FUNCTIONS does not list
_SPARK_SYNTAX = frozenset({"try_cast", "struct", "timestampdiff", "timestampadd"})


def check_spark_functions(tree: exp.Expr) -> None:
    """Every built-in the translated query calls must be one Spark knows (a construct sqlglot reads but Spark has
    no function for would otherwise fail when the dagger starts, at a position in the Spark SQL).

    Raises SqlError at the user's call. Calls by name (Dagger, user and Spark functions) were checked by
    :func:`check_functions`."""
    known = spark_functions() | DENIED_SPARK_FUNCTIONS | _SPARK_SYNTAX
    for node in tree.walk():
        if not isinstance(node, exp.Func) or isinstance(node, exp.Anonymous | exp.Binary):
            continue  # a call by name, or an operator (AND is a Func to sqlglot)
        text = node.sql(dialect="spark", normalize_functions=False)
        match = _CALL_RE.match(text)
        first = node.args.get("this")
        if isinstance(first, exp.Expression) and text.startswith(
            first.sql(dialect="spark", normalize_functions=False)
        ):
            continue  # the text starts with an argument's, not with the call's name
        if match and match.group(1).lower() not in known:
            raise _fail(
                f"{match.group(1).upper()} is not a function Spark SQL has",
                node,
                hint="see docs/sql.md for the functions Dagger SQL offers",
            )


def cte_and_subquery_names(tree: exp.Expr) -> set[str]:
    """Return the names that CTEs and aliased subqueries define."""
    names = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    names |= {sq.alias_or_name for sq in tree.find_all(exp.Subquery) if sq.alias_or_name}
    return names


_PLAIN_NAME_RE = IDENTIFIER_RE


def check_tables(tree: exp.Expr, tables: Collection[str]) -> None:
    """Every table read must be one of the dagger's streams (or a CTE/subquery of the query), named by a
    plain name: ``text.`/etc/passwd``` (Spark reads a file for a qualified name it does not know, even
    beside a CTE named after the path) is refused, and so is a CTE or alias that is not a plain name."""
    local = cte_and_subquery_names(tree)
    for name in local:
        if not _PLAIN_NAME_RE.match(name):
            node = next((n for n in tree.find_all(exp.CTE, exp.Subquery) if n.alias_or_name == name), None)
            raise _fail(f"{name!r} is not a plain name (letters, digits, _)", node)
    for table in tree.find_all(exp.Table):
        if (
            table.args.get("db") is not None
            or table.args.get("catalog") is not None
            or not _PLAIN_NAME_RE.match(table.name)
        ):
            raise _fail(
                f"{table.sql(dialect='spark')} is not one of this dagger's streams "
                f"({', '.join(sorted(tables))}): a query reads only its streams, by their plain names",
                table,
            )
        if table.name not in tables and table.name not in local:
            raise _fail(
                f"unknown table {table.name}; this dagger's streams are {', '.join(sorted(tables))}", table
            )


def output_columns(
    tree: exp.Expr, tables: Mapping[str, Iterable[str] | Mapping[str, str | None]]
) -> list[str] | None:
    """Return the names of the query's output columns, in order; None when they cannot be told before Spark
    runs (see :class:`job.sql.scope.Resolution`). Call after :func:`check_columns`."""
    from sqlglot.errors import OptimizeError

    try:
        return resolve(tree, tables).output
    except (OptimizeError, SqlError):
        return None


def check_unique_output(
    tree: exp.Expr, tables: Mapping[str, Iterable[str] | Mapping[str, str | None]]
) -> None:
    """Every output column has its own name (Spark's names are case-insensitive): a sink's row holds one
    value a name, so a second ``x`` would silently replace the first. Raises SqlError at the second one."""
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return
    seen: set[str] = set()
    for node in select.expressions:
        for name in _projection_names(node, select, tables):
            if name.lower() in seen:
                raise _fail(
                    f"two output columns are named {name}; a row can hold only one value a name",
                    node,
                    hint=f"give one of them a name of its own: … AS {name}_2",
                )
            seen.add(name.lower())


def _projection_names(
    node: exp.Expr, select: exp.Select, tables: Mapping[str, Iterable[str] | Mapping[str, str | None]]
) -> list[str]:
    """Return the output names one projection gives: its alias or column name, or the columns a ``*`` or
    ``t.*`` over stream tables brings (nothing for a star over a subquery: its names are checked inside)."""
    star_table = node.table if isinstance(node, exp.Column) and isinstance(node.this, exp.Star) else None
    if not isinstance(node, exp.Star) and star_table is None:
        return [node.alias_or_name] if node.alias_or_name else []
    sources = [select.args.get("from_") or select.args.get("from"), *(select.args.get("joins") or [])]
    names: list[str] = []
    for source in sources:
        table = source.this if source is not None else None
        if not isinstance(table, exp.Table) or table.name not in tables:
            continue
        if star_table and star_table != (table.alias or table.name):
            continue
        names += [c for c in tables[table.name] if c != TIME_COLUMN]
    return names


def check_columns(
    tree: exp.Expr, tables: Mapping[str, Iterable[str] | Mapping[str, str | None]]
) -> dict[str, set[str]]:
    """Every column must exist in a source of its own SELECT (see :mod:`job.sql.scope`).

    ``tables``: stream table -> column names, or -> column -> Spark type text. Returns the columns
    used per stream table. Raises SqlError at the first unknown or ambiguous name, or at an operand of
    UNION, INTERSECT or EXCEPT that is not a query.
    """
    from sqlglot.errors import OptimizeError

    check_set_operations(tree)
    try:
        return resolve(tree, tables).used
    except OptimizeError as exc:  # a shape sqlglot's scopes cannot take that the checks above let through
        raise _fail(f"the query's parts cannot be told apart: {exc}", tree) from None


def check_set_operations(tree: exp.Expr) -> None:
    """Each side of a UNION, INTERSECT or EXCEPT must be a query (a SELECT, or another of them)."""
    for node in tree.find_all(exp.SetOperation):
        for side in (node.this, node.expression):
            inner = side.unnest() if isinstance(side, exp.Paren) else side
            inner = inner.this if isinstance(inner, exp.Subquery) and not inner.alias else inner
            if not isinstance(inner, exp.Query):
                kind = node.key.upper()
                raise _fail(
                    f"each side of {kind} must be a query; found {side.sql()!r}",
                    side,
                    hint=f"write SELECT … FROM … on both sides of {kind}",
                )


def has_aggregate(select: exp.Select) -> bool:
    """Return whether a SELECT aggregates (GROUP BY, or an aggregate or Dagger aggregate function in its list)."""
    if select.args.get("group"):
        return True
    for node in select.expressions:
        for sub in node.walk():
            if isinstance(sub, exp.AggFunc) or (
                isinstance(sub, exp.Anonymous) and dagger_kind(sub.name) == "aggregate"
            ):
                return True
    return False


def group_window(select: exp.Select) -> exp.Anonymous | None:
    """Return the TUMBLE/HOP/SESSION call in a SELECT's GROUP BY, if any."""
    group = select.args.get("group")
    if not group:
        return None
    for item in group.expressions:
        if isinstance(item, exp.Anonymous) and fname(item) in WINDOW_FUNCS:
            return item
    return None


def check_windows(tree: exp.Expr) -> None:
    """A streaming aggregation needs a window; window properties must match the GROUP BY window."""
    for select in tree.find_all(exp.Select):
        props = [
            n
            for n in select.expressions
            for n in n.walk()
            if isinstance(n, exp.Anonymous) and fname(n) in {*WINDOW_PROPERTIES, *ROWTIME_PROPERTIES}
        ]
        window = group_window(select)
        if has_aggregate(select) and window is None:
            group = select.args.get("group")
            target = group.expressions[0] if group and group.expressions else select
            raise _fail(
                "an aggregation over a stream needs a window in GROUP BY",
                target,
                hint="add TUMBLE(rowtime, INTERVAL '60' SECOND) to the GROUP BY",
            )
        if props and window is None:
            raise _fail(f"{fname(props[0])} needs a {window_family(props[0])} window in GROUP BY", props[0])
        for prop in props:
            family = window_family(prop)
            if window is not None and (
                fname(window) != family or window_args(prop)[1:] != window_args(window)[1:]
            ):
                raise _fail(
                    f"{fname(prop)} must name the same window as the GROUP BY "
                    f"({window.sql(dialect='spark')})",
                    prop,
                )
