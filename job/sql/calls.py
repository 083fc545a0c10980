"""The parts of a function call in the SQL tree that rewrites and checks read: its name, its
arguments, its literal values, errors at an argument's position, and Spark SQL templates.

Used by the function library (:mod:`job.sql.library`) and the modules of its function groups.
"""

from __future__ import annotations

import re
from functools import cache

import sqlglot
from sqlglot import exp

from job.errors import SqlError
from job.sql.parse import READ_DIALECT, position

_PLACEHOLDER = re.compile(r"^__a(\d+)$")


def fail(message: str, node: exp.Expr | None, hint: str | None = None) -> SqlError:
    """Return a SqlError at ``node``'s line and column."""
    line, col = position(node)
    return SqlError(message, line=line, col=col, hint=hint)


def call_args(node: exp.Expr) -> list[exp.Expr]:
    """Return the argument nodes of a function call (sqlglot parses ``Split`` as RegexpSplit)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    if isinstance(node, exp.RegexpSplit):
        return [a for a in (node.this, node.expression, node.args.get("limit")) if a is not None]
    return []


def call_name(node: exp.Expr) -> str:
    """Return the lower-case name a call was written with ('' for other nodes)."""
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.RegexpSplit):
        return "split"
    return ""


def string_literal(node: exp.Expr) -> str | None:
    """Return the text of a string literal, or None for anything else."""
    return str(node.this) if isinstance(node, exp.Literal) and node.is_string else None


def number_literal(node: exp.Expr) -> float | None:
    """Return the value of a numeric literal (with an optional minus sign), or None."""
    sign = 1.0
    if isinstance(node, exp.Neg):
        node, sign = node.this, -1.0
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return sign * float(node.this)
        except ValueError:
            return None
    return None


def need_number(fn: str, arg: exp.Expr, what: str) -> None:
    if string_literal(arg) is not None:
        raise fail(f"{fn}: {what} must be a number, found the string {arg.sql(dialect='spark')}", arg)


def need_int_range(fn: str, arg: exp.Expr, what: str, low: int, high: int | None) -> None:
    need_number(fn, arg, what)
    value = number_literal(arg)
    if value is None:
        return
    top = "" if high is None else f"..{high}"
    if value != int(value) or value < low or (high is not None and value > high):
        raise fail(
            f"{fn}: {what} must be a whole number in {low}{top}, found {arg.sql(dialect='spark')}", arg
        )


def need_string(fn: str, arg: exp.Expr, what: str) -> str:
    text = string_literal(arg)
    if text is None:
        raise fail(
            f"{fn}: {what} must be a string literal such as 'sum', found {arg.sql(dialect='spark')}", arg
        )
    return text


@cache
def _parsed(template: str) -> exp.Expr:
    """The template's tree, without positions: they are the template's, not the user's query's (an error at a
    node built from it points at the user's arguments, else at the node the caller says)."""
    tree = sqlglot.parse_one(template, read=READ_DIALECT)
    for node in tree.walk():
        for key in ("line", "col", "start", "end"):
            node.meta.pop(key, None)
    return tree


def _atomic(node: exp.Expr) -> bool:
    return isinstance(
        node,
        exp.Column
        | exp.Literal
        | exp.Func
        | exp.Paren
        | exp.Dot
        | exp.Bracket
        | exp.Boolean
        | exp.Null
        | exp.Cast,
    ) or (isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal))


def _plain_cast(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.TryCast) and not node.args.get("safe"):
        return exp.Cast(this=node.this, to=node.args["to"])
    return node


def build(template: str, args: list[exp.Expr], *, plain_casts: bool = False) -> exp.Expr:
    """Return the expression of a Spark SQL ``template`` with ``__aN`` replaced by a copy of ``args[N]``.

    ``plain_casts``: the template's own CASTs stay CASTs (the dialect reads every CAST as a TryCast, which
    :func:`job.sql.flink.rewrite_casts` turns into TRY_CAST: for a template built before it runs)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table:
            match = _PLACEHOLDER.match(node.name)
            if match:
                arg = args[int(match.group(1))].copy()
                return arg if _atomic(arg) else exp.Paren(this=arg)
        return node

    shape = _parsed(template).copy()
    if plain_casts:
        shape = shape.transform(_plain_cast)
    return shape.transform(visit)


def called_functions(tree: exp.Expr) -> set[str]:
    """Return the lower-case names of the functions a query calls by name (Dagger and user functions)."""
    return {call_name(node) for node in tree.find_all(exp.Anonymous, exp.RegexpSplit)}
