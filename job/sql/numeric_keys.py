"""Move a GROUP BY's numeric key out of Spark and into the Kafka source.

A key such as ``CAST(FLOOR(lat * 100) AS BIGINT)`` (a grid of lat/long bins) is, in Spark, an expression over
every row: Flink's values need ``FLOOR`` of a DOUBLE to stay a DOUBLE and ``CAST`` to BIGINT to saturate and
read NaN as 0 (:mod:`job.sql.values`, :mod:`job.sql.flink_numbers`), a dozen operations per row and key. The
source computes it instead while it decodes each Arrow batch (vectorised, :mod:`job.sources.numeric_key`) and
the query groups by a column; the source can then aggregate first (:mod:`job.sql.partial`), as it does for
``S2Id`` keys (:mod:`job.sql.pushdown`).

A key moved is a GROUP BY item of a SELECT that reads one stream directly, of the form ``CAST(d AS BIGINT)``,
where ``d`` is built from the stream's DOUBLE columns and number literals with ``+ - * /``, unary minus, ``FLOOR``
and ``CEIL``, and every operation has a DOUBLE operand (so it computes in DOUBLE on both engines, exactly, as
IEEE 754 does). Every use of the same expression in that SELECT reads the column. Anything else (FLOAT or
integer columns, other functions, a key without the CAST) stays in Spark. Pure functions over the AST.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from job.sql.infer import dtype, infer

KEY_PREFIX = "__dagger_key_"
#: The source's function of a column it computes this way (job.sources.config.SourceConfig.add_derived).
FUNCTION = "bigint_of"
_OPS: dict[type[exp.Expr], str] = {exp.Add: "add", exp.Sub: "sub", exp.Mul: "mul", exp.Div: "div"}
_NUMBER = re.compile(r"\d+(\.\d*)?|\.\d+")
_DOUBLE = dtype("DOUBLE")


@dataclass(frozen=True)
class NumericKey:
    """A BIGINT key the source computes: ``name`` = ``program`` over the stream's columns ``inputs``.

    ``program`` is a nested list: ``["col", name]``, ``["num", text]``, ``[op, a, b]`` (op: add, sub, mul,
    div), ``["neg", a]``, ``["floor", a]``, ``["ceil", a]`` (DOUBLEs), and at its root ``["bigint", a]``
    (toward zero, saturated at BIGINT's bounds, NaN as 0: Java's cast, as Flink casts). ``spark`` is the
    expression's Spark SQL, for rows that did not come through the source."""

    name: str
    program: Any
    inputs: tuple[str, ...]
    spark: str

    def spark_expr(self) -> str:
        """Return the Spark SQL expression (over the stream's columns) that computes this column."""
        return self.spark

    def to_json(self) -> list[object]:
        """Return the JSON form carried in the source's options."""
        return [self.name, FUNCTION, self.program]


def _program(node: exp.Expr, qualifiers: Collection[str], inputs: list[str]) -> Any | None:
    """The program of a DOUBLE expression ``node``, or None when it is not one this module moves."""
    if isinstance(node, exp.Paren):
        return _program(node.this, qualifiers, inputs)
    if isinstance(node, exp.Column):
        if (node.table and node.table not in qualifiers) or infer(node) != _DOUBLE:
            return None
        inputs.append(node.name)
        return ["col", node.name]
    if isinstance(node, exp.Neg):
        inner = _program(node.this, qualifiers, inputs)
        return None if inner is None or infer(node.this) != _DOUBLE else ["neg", inner]
    if isinstance(node, exp.Floor | exp.Ceil):
        if node.args.get("decimals") is not None or node.args.get("to") is not None:
            return None
        inner = _program(node.this, qualifiers, inputs)
        name = "floor" if isinstance(node, exp.Floor) else "ceil"
        return None if inner is None or infer(node.this) != _DOUBLE else [name, inner]
    op = _OPS.get(type(node))
    if op is None:
        return None
    sides = (node.this, node.expression)
    if _DOUBLE not in (infer(s) for s in sides):
        return None  # computed in another type
    programs = [_literal(s) if _literal(s) is not None else _program(s, qualifiers, inputs) for s in sides]
    if any(p is None for p in programs):
        return None
    return [op, *programs]


def _literal(node: exp.Expr) -> list[str] | None:
    """``["num", text]`` of a number literal (an integer or a decimal, no exponent) that a DOUBLE operation
    reads exactly as both engines do: at most 15 digits, so its DOUBLE is the nearest to its text."""
    if isinstance(node, exp.Paren):
        return _literal(node.this)
    negative = isinstance(node, exp.Neg)
    lit = node.this if negative else node
    if not isinstance(lit, exp.Literal) or lit.is_string or not _NUMBER.fullmatch(lit.name):
        return None
    if len(lit.name.replace(".", "").lstrip("0")) > 15:
        return None
    return ["num", f"-{lit.name}" if negative else lit.name]


def key_program(node: exp.Expr, qualifiers: Collection[str]) -> tuple[Any, tuple[str, ...]] | None:
    """Return (program, input columns) of a key ``node`` the source can compute, else None."""
    if not isinstance(node, exp.Cast) or node.args.get("to") is None:
        return None
    if not node.to.is_type(exp.DataType.Type.BIGINT) or infer(node.this) != _DOUBLE:
        return None
    inputs: list[str] = []
    inner = _program(node.this, qualifiers, inputs)
    if inner is None or not inputs:
        return None
    return ["bigint", inner], tuple(dict.fromkeys(inputs))


def push_down_numeric_keys(
    tree: exp.Expr, streams: set[str], spark_of: Any
) -> tuple[exp.Expr, dict[str, list[NumericKey]]]:
    """Replace each numeric GROUP BY key (see the module docstring) of a SELECT reading one stream directly,
    and every use of the same expression in that SELECT, by a column its source computes.

    ``spark_of`` renders a key's Dagger SQL expression as Spark SQL (:attr:`NumericKey.spark`). Returns the
    new tree (the input is not changed) and, per stream table, the columns its source must add."""
    from job.sql.pushdown import source_table

    tree = tree.copy()
    keys: dict[str, dict[str, NumericKey]] = {}
    for select in list(tree.find_all(exp.Select)):
        found = source_table(select, streams)
        group = select.args.get("group")
        if found is None or group is None:
            continue
        table, qualifiers = found
        for item in list(group.expressions):
            program = key_program(item, qualifiers)
            if program is None:
                continue
            same = [
                n for n in select.find_all(type(item)) if n == item and n.find_ancestor(exp.Select) is select
            ]
            digest = hashlib.sha1(json.dumps(program[0]).encode(), usedforsecurity=False).hexdigest()[:12]
            name = f"{KEY_PREFIX}{digest}"
            key = NumericKey(name, program[0], program[1], spark_of(item.copy()))
            for node in same:
                node.replace(exp.column(name))
            keys.setdefault(table, {})[name] = key
    return tree, {t: list(cols.values()) for t, cols in keys.items()}
