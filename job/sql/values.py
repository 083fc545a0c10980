"""Flink's values and types where Spark's differ, each a small pure rewrite from AST to AST.

They run first (before :mod:`job.sql.flink`'s rewrites), on the query as the user wrote it, and read the
types :mod:`job.sql.infer` gives (columns typed from the protobuf schema); an expression whose type is
not known is left as it is. Checked against Flink 2.3 (tests/job/sql/test_flink_values.py):

* ``INT / INT`` divides integers, truncating toward zero (``fare / 1000`` is 15, not 15.5) → ``DIV``;
  ``%`` has its divisor's type;
* ``SIGN`` of an integer or DECIMAL has its argument's type (Spark's is DOUBLE);
* ``AVG`` of an integer column is an integer of its type, truncated toward zero (``SUM DIV COUNT``);
* ``GREATEST``/``LEAST`` are NULL when an argument is NULL (Spark skips NULLs);
* ``EXTRACT`` and ``HOUR``/``MINUTE``/``SECOND``/``YEAR``/… are BIGINT, ``TIMESTAMPDIFF`` an INT (``EXTRACT(SECOND ...)`` the whole
  seconds, where Spark gives a DECIMAL with the fraction); ``EXTRACT(MILLISECOND ...)`` is the
  millisecond of the second; ``WEEK(ts)`` is the ISO week (``weekofyear``);
* ``CAST(timestamp AS VARCHAR)`` always shows the type's digits of second (``10:00:05.000`` for
  TIMESTAMP(3)); ``CAST(boolean AS VARCHAR)`` is ``TRUE``/``FALSE``;
* ``FLOOR``/``CEIL`` of a DOUBLE or FLOAT keep the type (Spark's are BIGINT, and overflow above 2^63);
* ``+ - * /`` of a FLOAT with a FLOAT or an integer are FLOAT; ``SUM``/``AVG`` of a FLOAT are FLOAT;
* ``TRUNCATE(x[, n])`` (no Spark function) → ``FLOOR``/``CEIL(x, n)`` by the sign, in x's type;
* ``SPLIT_INDEX(s, sep, i)`` → the i-th (from 0) part of s split at the separator, NULL out of range;
* ``MAX``/``MIN(DISTINCT x)`` are ``MAX``/``MIN(x)``; ``SUM``/``AVG(DISTINCT x)`` sum the group's
  ``collect_set`` (exact for integers and DECIMAL; refused for FLOAT/DOUBLE, whose sum
  depends on the order).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from job.sql.calls import build as _build_any
from job.sql.calls import fail, number_literal, string_literal
from job.sql.flink_aggregates import rewrite_filter_clauses, rewrite_integer_sum, rewrite_variance
from job.sql.flink_builtins import rewrite_flink_builtins
from job.sql.infer import (
    dtype,
    infer,
    is_boolean,
    is_decimal,
    is_float,
    is_integer,
    is_string,
    is_timestamp,
    precision,
    wider_integer,
)
from job.sql.library import bottom_up

_BIGINT = "BIGINT"
# 2^52: every DOUBLE at or above it is a whole number (NaN and the infinities compare above it in Spark)
_WHOLE_DOUBLE = "4.503599627370496E15"
# Flink's EXTRACT units → Spark's (None: computed otherwise below)
_EXTRACT_UNITS = {
    "YEAR": "YEAR",
    "QUARTER": "QUARTER",
    "MONTH": "MONTH",
    "WEEK": "WEEK",
    "DAY": "DAY",
    "DOY": "DOY",
    "DOW": "DOW",
    "ISODOW": "DAYOFWEEK_ISO",
    "ISOYEAR": "YEAROFWEEK",
    "HOUR": "HOUR",
    "MINUTE": "MINUTE",
    "SECOND": "SECOND",
    "MILLISECOND": None,
    "MICROSECOND": None,
}
_PART_FUNCS = (
    exp.Hour,
    exp.Minute,
    exp.Second,
    exp.Year,
    exp.Month,
    exp.Quarter,
    exp.DayOfMonth,
    exp.DayOfWeek,
    exp.DayOfYear,
    exp.WeekOfYear,
)
_DISTINCT_AGGS = (exp.Max, exp.Min, exp.Sum, exp.Avg)  # COUNT(DISTINCT) is refused: job.sql.validate
_REGEX_SPECIAL = set("\\^$.|?*+()[]{}")


def build(template: str, args: list[exp.Expr]) -> exp.Expr:
    """:func:`job.sql.calls.build`, the template's CASTs kept as CASTs (these rewrites run before rewrite_casts)."""
    return _build_any(template, args, plain_casts=True)


def _cast(node: exp.Expr, kind: exp.DataType | str) -> exp.Cast:
    to = dtype(kind) if isinstance(kind, str) else kind
    return exp.Cast(this=node.copy(), to=to.copy())  # a copy: bottom_up replaces the node it visits


def _same(a: exp.DataType | None, b: str) -> bool:
    return a is not None and a == dtype(b)


def rewrite_integer_division(tree: exp.Expr) -> exp.Expr:
    """``a / b`` of two integers → ``CAST(a DIV b AS <the wider type>)`` (truncates toward zero, as Flink and
    Java do); ``a % b`` of two integers → ``CAST(a % b AS <b's type>)`` (Flink types MOD by its divisor)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Div | exp.Mod):
            left, right = infer(node.this), infer(node.expression)
            if not (is_integer(left) and is_integer(right)):
                return node
            assert left is not None and right is not None
            if isinstance(node, exp.Mod):
                return node if wider_integer(left, right) == right else _cast(node, right)
            div = exp.IntDiv(this=node.this, expression=node.expression)
            wider = wider_integer(left, right)
            return div if _same(wider, _BIGINT) else _cast(div, wider)
        return node

    return bottom_up(tree, visit)


def rewrite_float_arithmetic(tree: exp.Expr) -> exp.Expr:
    """``x op y`` of a FLOAT with a FLOAT, a DOUBLE (cast to FLOAT) or an integer → ``CAST(x op y AS FLOAT)`` (Flink computes in FLOAT;
    Spark in DOUBLE: a DOUBLE result rounded to FLOAT is the FLOAT result, for + - * /); ``SUM``/``AVG`` of
    a FLOAT → ``CAST(... AS FLOAT)``."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
            left, right = infer(node.this), infer(node.expression)
            floats = [k for k in (left, right) if _same(k, "FLOAT")]
            if floats and all(is_float(k) or is_integer(k) for k in (left, right)):
                out = node.copy()
                for side, kind in (("this", left), ("expression", right)):
                    if _same(
                        kind, "DOUBLE"
                    ):  # Flink: FLOAT op DOUBLE is a FLOAT, the DOUBLE cast to FLOAT first
                        out.set(side, _cast(out.args[side], "FLOAT"))
                return _cast(out, "FLOAT")
        if (
            isinstance(node, exp.Sum | exp.Avg)
            and not isinstance(node.this, exp.Distinct)
            and _same(infer(node.this), "FLOAT")
        ):
            return _cast(node, "FLOAT")
        return node

    return bottom_up(tree, visit)


def rewrite_sign(tree: exp.Expr) -> exp.Expr:
    """``SIGN(x)`` of an integer or DECIMAL → ``CAST(SIGN(x) AS <x's type>)`` (Spark's SIGN is DOUBLE)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Sign):
            kind = infer(node.this)
            if is_integer(kind) or is_decimal(kind) or _same(kind, "FLOAT"):
                assert kind is not None
                return _cast(node, kind)
        return node

    return bottom_up(tree, visit)


def rewrite_integer_avg(tree: exp.Expr) -> exp.Expr:
    """``AVG(x)`` of an integer → ``CAST(SUM(x) DIV COUNT(x) AS <x's type>)``: Flink's AVG of an integer
    is of its type, truncated toward zero (NULL for a group of NULLs: SUM is NULL)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Avg) and not isinstance(node.this, exp.Distinct):
            kind = infer(node.this)
            if is_integer(kind):
                assert kind is not None
                div = exp.IntDiv(
                    this=exp.Sum(this=node.this.copy()), expression=exp.Count(this=node.this.copy())
                )
                return div if _same(kind, _BIGINT) else _cast(div, kind)
        return node

    return bottom_up(tree, visit)


def _may_be_null(node: exp.Expr) -> bool:
    return not (
        isinstance(node, exp.Literal | exp.Boolean)
        or (isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal))
    )


def rewrite_greatest_least(tree: exp.Expr) -> exp.Expr:
    """``GREATEST(a, b)`` → ``CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE GREATEST(a, b) END`` (Flink: NULL
    when an argument is NULL; Spark skips NULLs); likewise ``LEAST``. Literals are never NULL."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Greatest | exp.Least):
            args = [node.this, *node.expressions]
            nullable = [a for a in args if _may_be_null(a)]
            if not nullable:
                return node
            checks = [exp.Is(this=a.copy(), expression=exp.Null()) for a in nullable]
            cond: exp.Expr = checks[0]
            for check in checks[1:]:
                cond = exp.Or(this=cond, expression=check)
            return exp.Case(ifs=[exp.If(this=cond, true=exp.Null())], default=node.copy())
        return node

    return bottom_up(tree, visit)


def rewrite_extract(tree: exp.Expr) -> exp.Expr:
    """``EXTRACT(unit FROM t)`` → ``CAST(EXTRACT(unit FROM t) AS BIGINT)`` (Spark's SECOND is a DECIMAL with the
    fraction: the cast keeps the whole seconds, as Flink); MILLISECOND/MICROSECOND → of the second; ISODOW,
    ISOYEAR → Spark's DAYOFWEEK_ISO, YEAROFWEEK. ``HOUR(t)``, ``YEAR(t)``, … → ``CAST(... AS BIGINT)``;
    ``WEEK(t)`` → ``CAST(weekofyear(t) AS BIGINT)`` (ISO weeks, as Flink); ``TIMESTAMPDIFF`` → an INT."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Extract):
            unit = node.this.name.upper()
            if unit not in _EXTRACT_UNITS:
                raise fail(
                    f"EXTRACT({unit} FROM ...) is not supported; units: {', '.join(_EXTRACT_UNITS)}",
                    node,
                    hint="EPOCH: UNIX_TIMESTAMP(CAST(ts AS STRING)); DECADE, CENTURY: from EXTRACT(YEAR ...)",
                )
            spark_unit = _EXTRACT_UNITS[unit]
            if spark_unit is None:
                scale = 1000 if unit == "MILLISECOND" else 1_000_000
                return build(
                    f"CAST(EXTRACT(SECOND FROM __a0) * {scale} AS BIGINT) % {scale}", [node.expression]
                )
            extract = exp.Extract(this=exp.var(spark_unit), expression=node.expression)
            return _cast(extract, _BIGINT)
        if isinstance(node, exp.Week):
            if node.args.get("mode") is not None:
                raise fail("WEEK takes one argument (a date or timestamp): the ISO week of the year", node)
            return _cast(exp.Anonymous(this="weekofyear", expressions=[node.this]), _BIGINT)
        if isinstance(node, _PART_FUNCS) and not isinstance(node.parent, exp.Cast):
            return _cast(node, _BIGINT)
        if isinstance(node, exp.TimestampDiff) and not isinstance(node.parent, exp.Cast):
            return _cast(node, "INT")  # Flink's TIMESTAMPDIFF is an INT, Spark's a BIGINT
        return node

    return bottom_up(tree, visit)


def _timestamp_pattern(kind: exp.DataType) -> str:
    digits = precision(kind)
    digits = 3 if digits is None else min(digits, 6)  # a stream's time and a window's bounds are TIMESTAMP(3)
    return "yyyy-MM-dd HH:mm:ss" + ("." + "S" * digits if digits else "")


def rewrite_casts_to_string(tree: exp.Expr) -> exp.Expr:
    """``CAST(t AS VARCHAR)`` of a timestamp → ``date_format(t, 'yyyy-MM-dd HH:mm:ss.SSS')`` (as many digits of
    second as its type has: Spark drops trailing zeros); of a BOOLEAN → ``upper(CAST(b AS STRING))``
    (``TRUE``/``FALSE``)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Cast) and is_string(node.args.get("to")):
            kind = infer(node.this)
            if is_timestamp(kind):
                assert kind is not None
                return exp.Anonymous(
                    this="date_format", expressions=[node.this, exp.Literal.string(_timestamp_pattern(kind))]
                )
            if is_boolean(kind):
                return exp.Upper(this=node.copy())
        return node

    return bottom_up(tree, visit)


def rewrite_float_floor_ceil(tree: exp.Expr) -> exp.Expr:
    """``FLOOR(x)``/``CEIL(x)`` of a DOUBLE or FLOAT → a DOUBLE (FLOAT) again:
    ``IF(abs(x) >= 2^52, x, CAST(FLOOR(x) AS DOUBLE))`` (Spark's FLOOR of a DOUBLE is a BIGINT)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if (
            isinstance(node, exp.Floor | exp.Ceil)
            and node.args.get("to") is None
            and node.args.get("decimals") is None
        ):
            arg: exp.Expr = node.this
            kind = infer(arg)
            if is_integer(kind):
                return arg.copy()  # Flink: of the integer's own type (Spark's is a BIGINT)
            if is_float(kind):
                assert kind is not None
                name = "FLOOR" if isinstance(node, exp.Floor) else "CEIL"
                out = build(
                    f"IF(abs(__a0) >= {_WHOLE_DOUBLE}, __a0, CAST({name}(__a0) AS DOUBLE))", [node.this]
                )
                return out if _same(kind, "DOUBLE") else _cast(out, kind)
        return node

    return bottom_up(tree, visit)


def rewrite_truncate(tree: exp.Expr) -> exp.Expr:
    """``TRUNCATE(x, n)`` → ``IF(x < 0, CEIL(x, n), FLOOR(x, n))`` (toward zero at n decimals; n < 0 zeroes
    digits left of the point; ``TRUNCATE(x)`` is n = 0), cast back to x's type: exact for DECIMAL and
    integers; a DOUBLE's decimal digits are those Java prints (as Flink's BigDecimal.valueOf)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Trunc):
            return node
        x: exp.Expr = node.this
        digits = node.args.get("decimals")
        places = number_literal(digits) if digits is not None else 0.0
        if digits is not None and (
            string_literal(digits) is not None or (places is not None and places != int(places))
        ):
            raise fail("TRUNCATE(x, n): n must be a whole number of decimal places", digits)
        kind = infer(x)
        if is_integer(kind) and places is not None and places >= 0:
            return x  # an integer has no decimals to cut
        n = digits if digits is not None else exp.Literal.number(0)
        cut = build("IF(__a0 < 0, CEIL(__a0, __a1), FLOOR(__a0, __a1))", [x, n])
        if is_float(kind):
            assert kind is not None
            whole = f"abs(__a0) >= {_WHOLE_DOUBLE}" + (" AND __a1 >= 0" if places is None else "")
            if places is None or places >= 0:
                cut = build(f"IF({whole}, __a0, CAST(__a2 AS DOUBLE))", [x, n, cut])
            else:
                cut = _cast(cut, "DOUBLE")
            return cut if _same(kind, "DOUBLE") else _cast(cut, kind)
        if is_integer(kind):
            assert kind is not None
            return _cast(cut, kind)
        return cut

    return bottom_up(tree, visit)


def _java_regex_literal(text: str) -> str:
    """Return a Java regular expression that matches ``text`` literally."""
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)


def rewrite_split_index(tree: exp.Expr) -> exp.Expr:
    """``SPLIT_INDEX(s, sep, i)`` → ``CASE WHEN i < 0 OR s = '' THEN NULL ELSE try_element_at(split(s, '<sep as a
    regex>', -1), i + 1) END``: Flink's i-th part (from 0) of s at each separator (every part kept, empty
    ones too), NULL when i is out of range or s is empty. The separator must be a string literal."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not (isinstance(node, exp.Anonymous) and node.name.upper() == "SPLIT_INDEX"):
            return node
        args = list(node.expressions)
        if len(args) != 3:
            raise fail(f"SPLIT_INDEX takes 3 arguments (string, separator, index), found {len(args)}", node)
        sep = string_literal(args[1])
        if not sep:
            raise fail(
                "SPLIT_INDEX: the separator must be a string literal of one or more characters, such as ','",
                args[1],
            )
        if string_literal(args[2]) is not None:
            raise fail("SPLIT_INDEX: the index must be a whole number (from 0)", args[2])
        regex = exp.Literal.string(_java_regex_literal(sep))
        return build(
            "CASE WHEN __a2 < 0 OR __a0 = '' THEN NULL "
            "ELSE try_element_at(split(__a0, __a1, -1), __a2 + 1) END",
            [args[0], regex, args[2]],
        )

    return bottom_up(tree, visit)


def _distinct_arg(node: exp.Expr) -> exp.Expr | None:
    """Return x of ``AGG(DISTINCT x)`` (None for anything else, or several arguments)."""
    inner = node.this if isinstance(node, exp.AggFunc) else None
    if isinstance(inner, exp.Distinct) and len(inner.expressions) == 1:
        only: exp.Expr = inner.expressions[0]
        return only
    return None


def rewrite_distinct_aggregates(tree: exp.Expr) -> exp.Expr:
    """``MAX``/``MIN(DISTINCT x)`` → ``MAX``/``MIN(x)``; ``SUM(DISTINCT x)`` of an integer or DECIMAL → the sum of ``collect_set(x)`` (NULL when empty);
    ``AVG(DISTINCT x)`` of an integer → that sum DIV the set's size. Raises SqlError for the rest (a
    FLOAT/DOUBLE's sum depends on the order of the additions; several arguments)."""

    def visit(node: exp.Expr) -> exp.Expr:
        if not (isinstance(node, _DISTINCT_AGGS) and isinstance(node.this, exp.Distinct)):
            return node
        what = type(node).__name__.upper()
        x = _distinct_arg(node)
        if x is None:
            raise fail(
                f"{what}(DISTINCT ...) takes one argument here",
                node,
                hint="count distinct pairs with DistinctCount(CONCAT_WS('|', a, b))",
            )
        if isinstance(node, exp.Max | exp.Min):
            return type(node)(this=x.copy())
        kind = infer(x)
        if isinstance(node, exp.Sum) and (is_integer(kind) or is_decimal(kind)):
            total = "BIGINT" if is_integer(kind) else _sum_decimal(kind)
            return build(
                f"IF(size(collect_set(__a0)) = 0, NULL, aggregate(collect_set(__a0), CAST(0 AS {total}), "
                f"(__acc, __v) -> CAST(__acc + __v AS {total})))",
                [x],
            )
        if isinstance(node, exp.Avg) and is_integer(kind):
            assert kind is not None
            avg = build(
                "aggregate(collect_set(__a0), CAST(0 AS BIGINT), (__acc, __v) -> __acc + __v) "
                "DIV NULLIF(size(collect_set(__a0)), 0)",
                [x],
            )
            return avg if _same(kind, _BIGINT) else _cast(avg, kind)
        shown = kind.sql(dialect="spark") if kind is not None else "of a type not known here"
        raise fail(
            f"{what}(DISTINCT x) is supported for integers{' and DECIMAL' if what == 'SUM' else ''} "
            f"only; x is {shown}",
            node,
            hint=f"{what}(DISTINCT CAST(x AS DECIMAL(p, s))) is exact"
            if what == "SUM"
            else "compute SUM(DISTINCT x) / DistinctCount(x) with the types you want",
        )

    return bottom_up(tree, visit)


def _sum_decimal(kind: exp.DataType | None) -> str:
    """Spark's type of SUM over ``DECIMAL(p, s)``: ``DECIMAL(min(38, p + 10), s)``."""
    assert kind is not None
    params = [int(p.this.name) if isinstance(p, exp.DataTypeParam) else int(p.name) for p in kind.expressions]
    p, s = (params + [10, 0])[:2] if params else (10, 0)
    return f"DECIMAL({min(38, p + 10)}, {s})"


VALUE_REWRITES: list[Callable[[exp.Expr], exp.Expr]] = [
    rewrite_filter_clauses,
    rewrite_variance,
    rewrite_flink_builtins,
    rewrite_integer_sum,
    rewrite_distinct_aggregates,
    rewrite_split_index,
    rewrite_float_arithmetic,
    rewrite_integer_division,
    rewrite_integer_avg,
    rewrite_sign,
    rewrite_truncate,
    rewrite_float_floor_ceil,
    rewrite_greatest_least,
    rewrite_extract,
    rewrite_casts_to_string,
]
