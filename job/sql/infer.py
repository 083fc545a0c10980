"""The SQL type of an expression, as far as the rewrites that keep Flink's values need it.

Column references carry their type in ``meta`` (:data:`TYPE_META`, set by :func:`job.sql.scope.resolve`
from the protobuf schema's Spark types); literals, arithmetic, ``CAST`` and the common functions are
typed from their arguments as Flink types them. :func:`infer` returns None for anything it cannot
tell, and a rewrite leaves an expression whose type is not known as it is.
"""

from __future__ import annotations

from functools import cache
from typing import TypeGuard

from sqlglot import exp

TYPE_META = "dagger_type"  # meta key on a column reference (Column or Dot): its exp.DataType

T = exp.DataType.Type
#: Integer types from narrow to wide (Flink widens INT op BIGINT to BIGINT, and so on)
INTEGERS = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT)
FLOATS = (T.FLOAT, T.DOUBLE)
TIMESTAMPS = (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPLTZ, T.TIMESTAMPNTZ)
STRINGS = (T.TEXT, T.VARCHAR, T.CHAR, T.NVARCHAR, T.NCHAR)
_INT_MAX = 2**31 - 1

# functions whose type is their (first) argument's
_SAME_AS_ARG = (
    exp.Abs,
    exp.Max,
    exp.Min,
    exp.Sign,
    exp.Floor,
    exp.Ceil,
    exp.Trunc,
    exp.Round,
    exp.AnyValue,
    exp.First,
    exp.Last,
)
_BIGINT_FUNCS = (
    exp.Count,
    exp.Extract,
    exp.Hour,
    exp.Minute,
    exp.Second,
    exp.Year,
    exp.Month,
    exp.Quarter,
    exp.Week,
    exp.WeekOfYear,
    exp.DayOfMonth,
    exp.DayOfWeek,
    exp.DayOfYear,
)
_STRING_FUNCS = (
    exp.Upper,
    exp.Lower,
    exp.Concat,
    exp.Substring,
    exp.Trim,
    exp.Replace,
    exp.DPipe,
    exp.Initcap,
    exp.TimeToStr,
    exp.Pad,
)
_BOOLEAN = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)
_WINDOW_TIMES = {
    "TUMBLE_START",
    "TUMBLE_END",
    "HOP_START",
    "HOP_END",
    "SESSION_START",
    "SESSION_END",
    "TUMBLE_ROWTIME",
    "HOP_ROWTIME",
    "SESSION_ROWTIME",
}


@cache
def dtype(text: str) -> exp.DataType:
    """Return the DataType of Spark type text (``'BIGINT'``); callers copy it before putting it in a tree."""
    return exp.DataType.build(text, dialect="spark")


def is_integer(kind: exp.DataType | None) -> TypeGuard[exp.DataType]:
    return kind is not None and kind.this in INTEGERS


def is_float(kind: exp.DataType | None) -> TypeGuard[exp.DataType]:
    return kind is not None and kind.this in FLOATS


def is_decimal(kind: exp.DataType | None) -> bool:
    return kind is not None and kind.this == T.DECIMAL


def is_timestamp(kind: exp.DataType | None) -> bool:
    return kind is not None and kind.this in TIMESTAMPS


def is_string(kind: exp.DataType | None) -> bool:
    return kind is not None and kind.this in STRINGS


def is_boolean(kind: exp.DataType | None) -> bool:
    return kind is not None and kind.this == T.BOOLEAN


def wider_integer(a: exp.DataType, b: exp.DataType) -> exp.DataType:
    """Return the wider of two integer types."""
    return a if INTEGERS.index(a.this) >= INTEGERS.index(b.this) else b


def precision(kind: exp.DataType) -> int | None:
    """Return the precision parameter of a type (``TIMESTAMP(3)`` → 3), or None."""
    if not kind.expressions:
        return None
    param = kind.expressions[0]
    value = param.this if isinstance(param, exp.DataTypeParam) else param
    return int(value.name) if isinstance(value, exp.Literal) and value.name.isdigit() else None


def _literal(node: exp.Literal) -> exp.DataType | None:
    if node.is_string:
        return dtype("STRING")
    text = node.name.lower()
    if "e" in text:
        return dtype("DOUBLE")
    if "." in text:
        whole, _, frac = text.partition(".")
        digits = len(whole.lstrip("-")) + len(frac)
        return dtype(f"DECIMAL({max(digits, 1)}, {len(frac)})")
    try:
        return dtype("INT") if abs(int(text)) <= _INT_MAX else dtype("BIGINT")
    except ValueError:
        return None


def _numeric(a: exp.DataType | None, b: exp.DataType | None) -> exp.DataType | None:
    """The type of ``a op b`` for + - * / (Flink: the wider integer; FLOAT for a FLOAT with a FLOAT or an
    integer; DOUBLE for a DOUBLE with a DOUBLE or an integer, and for a FLOAT or DOUBLE with a DECIMAL;
    None for the rest)."""
    if is_integer(a) and is_integer(b):
        return wider_integer(a, b)
    if (is_float(a) and is_decimal(b)) or (is_decimal(a) and is_float(b)):
        return dtype("DOUBLE")
    if (a == dtype("FLOAT") or b == dtype("FLOAT")) and all(is_float(k) or is_integer(k) for k in (a, b)):
        return dtype("FLOAT")  # Flink: a FLOAT with a DOUBLE is a FLOAT too
    for name in ("FLOAT", "DOUBLE"):
        kind = dtype(name)
        if (a == kind or b == kind) and all(k == kind or is_integer(k) for k in (a, b)):
            return kind
    return None


def _common(nodes: list[exp.Expr | None]) -> exp.DataType | None:
    """The type of a value that is one of ``nodes`` (CASE branches, COALESCE, GREATEST): None unless every
    one is known (a NULL is any type) and they are all integers, all FLOAT/DOUBLE, or all of one type."""
    kinds = [infer(n) for n in nodes if n is not None and not isinstance(n, exp.Null)]
    if not kinds or any(k is None for k in kinds):
        return None
    known: list[exp.DataType] = [k for k in kinds if k is not None]
    if all(is_integer(k) for k in known):
        widest = known[0]
        for k in known[1:]:
            widest = wider_integer(widest, k)
        return widest
    if all(is_float(k) or is_integer(k) for k in known):
        return dtype("DOUBLE")
    return known[0] if all(k == known[0] for k in known) else None


def infer(node: exp.Expr | None) -> exp.DataType | None:
    """Return the type of ``node``, or None when it is not known."""
    if node is None:
        return None
    known: exp.DataType | None = node.meta.get(TYPE_META) if node._meta else None
    if known is not None:
        return known
    if isinstance(node, exp.Paren | exp.Alias | exp.Neg):
        return infer(node.this)
    if isinstance(node, exp.Literal):
        return _literal(node)
    if isinstance(node, exp.Cast):  # TryCast too
        to = node.to
        return (
            dtype("TIMESTAMP(6)") if is_timestamp(to) and precision(to) is None else to
        )  # Flink's TIMESTAMP
    if isinstance(node, _BOOLEAN):
        return dtype("BOOLEAN")
    if isinstance(node, exp.Add | exp.Sub | exp.Mul):
        return _numeric(infer(node.this), infer(node.expression))
    if isinstance(node, exp.Div):
        return _numeric(infer(node.this), infer(node.expression))  # integers: job.sql.values makes it DIV
    if isinstance(node, exp.IntDiv):
        return dtype("BIGINT")
    if isinstance(node, exp.Mod):
        left, right = infer(node.this), infer(node.expression)
        return right if is_integer(left) and is_integer(right) else None
    if isinstance(node, _BIGINT_FUNCS):
        return dtype("BIGINT")
    if isinstance(node, exp.Length | exp.TimestampDiff):
        return dtype("INT")
    if isinstance(node, _STRING_FUNCS):
        return dtype("STRING")
    if isinstance(node, exp.Sum):
        kind = infer(node.this)
        return kind if is_integer(kind) or is_float(kind) else None  # Flink's SUM keeps an integer's type
    if isinstance(node, exp.Avg):
        kind = infer(node.this)
        return kind if is_integer(kind) or is_float(kind) else None
    if isinstance(node, _SAME_AS_ARG):
        return infer(node.this)
    if isinstance(node, exp.Nullif):
        return infer(node.this)
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return _common([node.this, *node.expressions])
    if isinstance(node, exp.Case):
        return _common([*(i.args.get("true") for i in node.args.get("ifs") or []), node.args.get("default")])
    if isinstance(node, exp.If):
        return _common([node.args.get("true"), node.args.get("false")])
    if isinstance(node, exp.CurrentTimestamp):
        return dtype("TIMESTAMP")
    if isinstance(node, exp.Anonymous) and node.name.upper() in _WINDOW_TIMES:
        return dtype("TIMESTAMP")
    return None
