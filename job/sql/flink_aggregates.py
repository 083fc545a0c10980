"""Flink's aggregates where Spark's differ, each a small pure rewrite from AST to AST (before
:mod:`job.sql.values`' rewrites, which then type the arithmetic they build as Flink does):

* ``AGG(x) FILTER (WHERE c)`` → ``AGG(CASE WHEN c THEN x END)`` (``COUNT(*)``: of ``CASE WHEN c THEN 1 END``):
  the same rows, as the aggregates skip NULLs, and the other rewrites then see a plain aggregate;
* ``SUM`` of an INT (SMALLINT, TINYINT) is of its type on Flink (Spark's is a BIGINT);
* ``VAR_POP``/``VAR_SAMP``/``VARIANCE``/``STDDEV_POP``/``STDDEV_SAMP``/``STDDEV`` of an integer are of its type on
  Flink, truncated toward zero (Spark's are DOUBLE). Of a DOUBLE, the two engines' algorithms can differ in
  the last digits (docs/flink-compat.md).
"""

from __future__ import annotations

from sqlglot import exp

from job.sql.infer import dtype, infer, is_integer
from job.sql.library import bottom_up

#: aggregates that skip NULL values, so that ``AGG(x) FILTER (WHERE c)`` is ``AGG(CASE WHEN c THEN x END)``
_NULL_SKIPPING = (
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.Count,
    exp.Variance,
    exp.VariancePop,
    exp.Stddev,
    exp.StddevPop,
    exp.StddevSamp,
)
_VARIANCES = (exp.Variance, exp.VariancePop, exp.Stddev, exp.StddevPop, exp.StddevSamp)


def rewrite_filter_clauses(tree: exp.Expr) -> exp.Expr:
    """``AGG(x) FILTER (WHERE c)`` → ``AGG(CASE WHEN c THEN x END)`` for the aggregates that skip NULLs;
    ``COUNT(*) FILTER (WHERE c)`` → ``COUNT(CASE WHEN c THEN 1 END)``. Others (DISTINCT, the Dagger library's)
    keep their FILTER."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Filter) or not isinstance(node.this, _NULL_SKIPPING):
            return node
        agg, where = node.this, node.expression
        arg = agg.this
        if isinstance(arg, exp.Distinct) or where is None or agg.expressions:
            return node
        cond = where.this if isinstance(where, exp.Where) else where
        value = exp.Literal.number(1) if isinstance(arg, exp.Star) else arg
        guarded = exp.Case(ifs=[exp.If(this=cond.copy(), true=value.copy())])
        out = agg.copy()
        out.set("this", guarded)
        return out

    return bottom_up(tree, visit)


def rewrite_integer_sum(tree: exp.Expr) -> exp.Expr:
    """``SUM(x)`` of an INT, SMALLINT or TINYINT → ``CAST(SUM(x) AS <x's type>)`` (Flink's SUM keeps the type)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Sum)
            and not isinstance(node.this, exp.Distinct)
            and not isinstance(node.parent, exp.Cast)
        ):
            kind = infer(node.this)
            if is_integer(kind) and kind != dtype("BIGINT"):
                assert kind is not None
                return exp.Cast(this=node.copy(), to=kind.copy())
        return node

    return bottom_up(tree, visit)


def rewrite_variance(tree: exp.Expr) -> exp.Expr:
    """``VAR_POP``/``VAR_SAMP``/``STDDEV_*(x)`` of an integer → ``CAST(… AS <x's type>)`` (Flink's is of x's type,
    truncated toward zero; Spark's a DOUBLE)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, _VARIANCES) or isinstance(node.parent, exp.Cast):
            return node
        kind = infer(node.this)
        if not is_integer(kind):
            return node
        assert kind is not None
        return exp.Cast(this=node.copy(), to=kind.copy())

    return bottom_up(tree, visit)
