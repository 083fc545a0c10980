"""Flink's values at the edges of its number types, where Spark's ANSI mode stops the query or gives NULL.

Each a small pure rewrite from AST to AST, run after :mod:`job.sql.values` (integer division is already
``DIV`` then) and before :mod:`job.sql.flink`'s ``CAST`` → ``TRY_CAST``. Checked against Flink 2.3
(bench/flink_compat's ``fn-edges`` group):

* ``CAST`` (and ``TRY_CAST``) of an integer to a narrower integer keeps the low bits, as Java's cast does
  (``CAST(2500000000 AS INT)`` is -1794967296; Spark's ANSI cast fails, its TRY_CAST is NULL);
* ``CAST`` of a DOUBLE or FLOAT to an integer saturates at the type's bounds and is 0 for NaN (Java's
  ``(long) d``); to INT and BIGINT only, the narrower ones keep the low bits of the INT;
* ``CAST`` of a DECIMAL to INT keeps the low bits of its whole part; of a string with a fraction to an integer
  drops the fraction (``CAST('1.7' AS INT)`` is 1; Spark's is NULL);
* ``x / y`` with a DOUBLE or FLOAT operand is IEEE division: ±Infinity or NaN when y is 0 (Spark's ANSI
  division by zero stops the query). Integer and DECIMAL division by zero stop the query on both engines.

Not rewritten: ``+ - *`` of integers past their type's range wrap around on Flink and stop the dagger here
(docs/flink-compat.md says why).
"""

from __future__ import annotations

from sqlglot import exp

from job.sql.calls import build as _build_any
from job.sql.calls import number_literal, string_literal
from job.sql.infer import infer, is_decimal, is_float, is_integer, is_string
from job.sql.library import bottom_up

_BITS = {
    exp.DataType.Type.TINYINT: 8,
    exp.DataType.Type.SMALLINT: 16,
    exp.DataType.Type.INT: 32,
    exp.DataType.Type.BIGINT: 64,
}
_NAMES = {
    exp.DataType.Type.TINYINT: "TINYINT",
    exp.DataType.Type.SMALLINT: "SMALLINT",
    exp.DataType.Type.INT: "INT",
    exp.DataType.Type.BIGINT: "BIGINT",
}
# (bound as a DOUBLE literal that the comparison reads exactly, the bound as an integer literal)
_INT_BOUNDS = (("2.147483647E9", "2147483647"), ("-2.147483648E9", "-2147483648"))
_BIGINT_BOUNDS = (
    ("9.223372036854775807E18", "9223372036854775807"),
    ("-9.223372036854775808E18", "-9223372036854775807 - 1"),
)


def build(template: str, args: list[exp.Expr]) -> exp.Expr:
    return _build_any(template, args, plain_casts=True)


def _low_bits(x: exp.Expr, bits: int, target: str) -> exp.Expr:
    """``x`` (an integer) as a ``bits``-bit integer of type ``target``: its low bits, sign-extended (no overflow:
    shifts wrap as Java's do)."""
    shift = 64 - bits
    wide = (
        x if _same_type(x, "BIGINT") else build("CAST(__a0 AS BIGINT)", [x])
    )  # a template's nested CAST stays TRY_CAST
    return build(f"CAST(shiftright(shiftleft(__a0, {shift}), {shift}) AS {target})", [wide])


def _same_type(x: exp.Expr, name: str) -> bool:
    kind = infer(x)
    return kind is not None and kind.this == exp.DataType.build(name).this


def _saturated(x: exp.Expr, wide: str) -> exp.Expr:
    """``x`` (a DOUBLE or FLOAT) as an INT or BIGINT as Java casts it: toward zero, saturated, NaN as 0."""
    (high, high_int), (low, low_int) = _INT_BOUNDS if wide == "INT" else _BIGINT_BOUNDS
    return build(
        f"CASE WHEN isnan(__a0) THEN CAST(0 AS {wide}) WHEN __a0 >= {high} THEN CAST({high_int} AS {wide}) "
        f"WHEN __a0 <= {low} THEN CAST(({low_int}) AS {wide}) ELSE CAST(__a0 AS {wide}) END",
        [x],
    )


_DOUBLE_FUNCS = (exp.Pow, exp.Sqrt, exp.Exp, exp.Ln)


def _kind(x: exp.Expr) -> exp.DataType | None:
    """:func:`infer`, and DOUBLE for POWER/SQRT/EXP/LN, DECIMAL for arithmetic of a DECIMAL with a DECIMAL or an
    integer (its precision does not matter here)."""
    kind = infer(x)
    if kind is not None:
        return kind
    if isinstance(x, _DOUBLE_FUNCS):
        return exp.DataType.build("DOUBLE")
    if isinstance(x, exp.Paren):
        return _kind(x.this)
    if isinstance(x, exp.Add | exp.Sub | exp.Mul):
        sides = [_kind(x.this), _kind(x.expression)]
        if any(is_decimal(k) for k in sides) and all(is_decimal(k) or is_integer(k) for k in sides):
            return exp.DataType.build("DECIMAL(38, 0)")
    return None


def _narrowing(node: exp.Cast) -> exp.Expr | None:
    """The Flink value of ``CAST(x AS <integer>)`` when Spark's would differ (x a wider integer, a DOUBLE or a
    FLOAT), or None."""
    to = node.args.get("to")
    if not isinstance(to, exp.DataType) or to.this not in _BITS:
        return None
    kind = _kind(node.this)
    bits, target = _BITS[to.this], _NAMES[to.this]
    if is_integer(kind):
        assert kind is not None
        return _low_bits(node.this, bits, target) if _BITS[kind.this] > bits else None
    if is_decimal(kind):  # Flink keeps the low bits of the whole part (BigDecimal.intValue)
        whole = build("CAST(__a0 AS BIGINT)", [node.this]) if bits < 64 else None
        return _low_bits(whole, bits, target) if whole is not None else None
    if is_string(kind) or string_literal(node.this) is not None:
        return _string_to_integer(node, target)
    if is_float(kind):
        if bits == 64:
            return _saturated(node.this, "BIGINT")
        whole = _saturated(node.this, "INT")
        return whole if bits == 32 else _low_bits(whole, bits, target)
    return None


#: a number with a fraction, as Flink's CAST of a string to an integer reads it (the fraction dropped)
_FRACTION = "'^ *[+-]?([0-9]+[.][0-9]*|[.][0-9]+) *$'"


def _string_to_integer(node: exp.Cast, target: str) -> exp.Expr:
    """CAST(s AS <integer>): Flink reads '1.7' as 1 and '-.5' as 0 (Spark as NULL); other text as Spark does."""
    cast = type(node)(this=node.this.copy(), to=node.args["to"].copy(), safe=node.args.get("safe"))
    whole = build(
        f"TRY_CAST(concat(regexp_extract(__a0, '^ *([+-]?)', 1), '0', "
        f"regexp_extract(__a0, '([0-9]*)[.]', 1)) AS {target})",
        [node.this],
    )
    return build(f"CASE WHEN __a0 RLIKE {_FRACTION} THEN __a1 ELSE __a2 END", [node.this, whole, cast])


def rewrite_narrowing_casts(tree: exp.Expr) -> exp.Expr:
    """``CAST(x AS INT)`` of a BIGINT → its low 32 bits; of a DOUBLE/FLOAT → saturated, NaN as 0 (Java's casts,
    as Flink's; Spark's ANSI cast fails and TRY_CAST gives NULL); likewise to BIGINT, SMALLINT, TINYINT."""

    def visit(node: exp.Expr) -> exp.Expr:
        # the user's CAST and TRY_CAST (the dialect reads both as TryCast; a plain Cast was built by a rewrite that
        # knows its value fits): of a number, they never fail on Flink
        if isinstance(node, exp.TryCast):
            out = _narrowing(node)
            if out is not None:
                return out
        return node

    return bottom_up(tree, visit)


def _numeric(kind: exp.DataType | None) -> bool:
    return is_float(kind) or is_integer(kind) or is_decimal(kind)


def rewrite_float_division(tree: exp.Expr) -> exp.Expr:
    """``x / y`` with a DOUBLE or FLOAT operand → ``IF(y = 0, x * power(y, -1), x / y)``: IEEE division as
    Flink's (±Infinity, NaN for 0 / 0; ``power(-0.0, -1)`` is -Infinity), where Spark's ANSI division by zero
    stops the query. A divisor that is a number literal other than 0 is left as it is."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Div):
            return node
        left, right = infer(node.this), infer(node.expression)
        if not (is_float(left) or is_float(right)) or not (_numeric(left) and _numeric(right)):
            return node
        divisor = number_literal(node.expression)
        if divisor is not None and divisor != 0:
            return node
        return build("IF(__a1 = 0, __a0 * power(__a1, -1), __a0 / __a1)", [node.this, node.expression])

    return bottom_up(tree, visit)


NUMBER_REWRITES = [rewrite_narrowing_casts, rewrite_float_division]
