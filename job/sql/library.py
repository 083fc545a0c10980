"""The Dagger function library as AST rewrites to Spark built-ins (JVM code, no Python per row).

Each rewriter is a small pure function from the call's (already rewritten) argument nodes to a new
expression, written as a Spark SQL template whose ``__a0``, ``__a1``, … stand for the arguments.
Functions Spark has nothing for (S2, GeoHash, JSON edits, time-series maths) are Arrow UDFs
registered by :mod:`job.functions.spark_udfs` and are left as calls here.

:func:`check_call` holds the static checks of each function's arguments (count, literal types and
values), raising :class:`~job.errors.SqlError` at the offending argument.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlglot import exp

from job.sql.calls import (
    build,
    call_args,
    call_name,
    fail,
    need_int_range,
    need_number,
    need_string,
    number_literal,
    string_literal,
)
from job.sql.catalog import DaggerFunction
from job.sql.feature_rows import check_typed, features, features_with_type, single_feature_with_type
from job.sql.proto_fields import (
    check_cond_eq,
    check_filters,
    check_select_fields,
    cond_eq,
    filters,
    select_fields,
)

_FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_OFFSET_ZONE = re.compile(r"^(UTC|GMT|Z|[+-]\d{2}(:\d{2}){0,2}|(UTC|GMT)[+-]\d{1,2}(:\d{2})?)$")

INT_TYPES = {"int", "integer", "long", "bigint"}
FLOAT_TYPES = {"double", "float"}
ARRAY_TYPES = INT_TYPES | FLOAT_TYPES | {"other"}
AGG_OPS = {"average", "min", "max", "sum", "count", "findfirst", "findany"}
OTHER_OPS = {"count", "findfirst", "findany"}
PREFIXES = {"distinct", "sort"}
OPERATE_OPS = {"distinct", "sorted", "sort"}


def valid_zone(zone: str) -> bool:
    """Return whether Spark and Java accept ``zone`` (a region id such as Asia/Jakarta, or an offset)."""
    if _OFFSET_ZONE.match(zone):
        return True
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return "/" in zone or zone in ("UTC", "GMT")


def _check_zone(fn: str, arg: exp.Expr) -> None:
    zone = string_literal(arg)
    if zone is not None and not valid_zone(zone):
        raise fail(
            f"{fn}: unknown time zone {zone!r}",
            arg,
            hint="use a region id such as 'Asia/Jakarta' or an offset such as '+07:00'",
        )


def parse_array_operation(
    fn: str, op_node: exp.Expr, type_node: exp.Expr, aggregate: bool
) -> tuple[list[str], str, str]:
    """Return (prefix operations, final operation, element type) of ArrayAggregate/ArrayOperate.

    Raises SqlError at the argument for an unknown operation or type, or a maths operation on 'other'.
    """
    op_text = need_string(fn, op_node, "the operation")
    kind = need_string(fn, type_node, "the element type").lower()
    if kind not in ARRAY_TYPES:
        raise fail(
            f"{fn}: unknown element type {kind!r}; use one of {', '.join(sorted(ARRAY_TYPES))}", type_node
        )
    parts = [p.strip().lower() for p in op_text.split(".")]
    if not aggregate:
        bad = [p for p in parts if p not in OPERATE_OPS]
        if bad or not parts:
            raise fail(
                f"{fn}: unknown operation {op_text!r}; use distinct, sorted or both (distinct.sorted)",
                op_node,
            )
        return parts, "", kind
    *prefixes, final = parts
    bad_prefix = [p for p in prefixes if p not in PREFIXES]
    if bad_prefix:
        raise fail(
            f"{fn}: unknown prefix {bad_prefix[0]!r} in {op_text!r}; prefixes are distinct. and sort.",
            op_node,
        )
    if final not in AGG_OPS:
        raise fail(
            f"{fn}: unknown operation {final!r}; use one of average, min, max, sum, count, "
            "findFirst, findAny",
            op_node,
        )
    if kind == "other" and final not in OTHER_OPS:
        raise fail(f"{fn}: {final} needs numbers; for type 'other' use count, findFirst or findAny", op_node)
    return prefixes, final, kind


# ---- static checks -----------------------------------------------------------------------------


def _check_s2id(fn: str, args: list[exp.Expr]) -> None:
    need_number(fn, args[0], "the latitude")
    need_number(fn, args[1], "the longitude")
    need_int_range(fn, args[2], "the level", 0, 30)


def _check_geohash(fn: str, args: list[exp.Expr]) -> None:
    need_number(fn, args[0], "the latitude")
    need_number(fn, args[1], "the longitude")
    need_int_range(fn, args[2], "the length", 1, 12)


def _check_distance(fn: str, args: list[exp.Expr]) -> None:
    for arg, what in zip(args, ("lat1", "long1", "lat2", "long2"), strict=True):
        need_number(fn, arg, what)


def _check_element_at(fn: str, args: list[exp.Expr]) -> None:
    index = args[1] if len(args) == 2 else args[2]
    need_int_range(fn, index, "the index", -(2**31), 2**31 - 1)
    if len(args) >= 4:
        path = string_literal(args[3])
        if path is None or not _FIELD_PATH.match(path):
            raise fail(
                f"{fn}: the path must be a string literal of field names such as 'location.lat', "
                f"found {args[3].sql(dialect='spark')}",
                args[3],
            )


def _check_array(fn: str, args: list[exp.Expr], aggregate: bool) -> None:
    parse_array_operation(fn, args[1], args[2], aggregate)


def _check_zone_at(index: int) -> Callable[[str, list[exp.Expr]], None]:
    def check(fn: str, args: list[exp.Expr]) -> None:
        need_number(fn, args[0], "the epoch time")
        if len(args) > index:
            _check_zone(fn, args[index])

    return check


def _check_time_in_date(fn: str, args: list[exp.Expr]) -> None:
    need_number(fn, args[0], "the epoch seconds")
    need_int_range(fn, args[1], "the hour", 0, None)
    need_int_range(fn, args[2], "the minute", 0, None)
    if len(args) == 4:
        _check_zone(fn, args[3])


def _check_format_time(fn: str, args: list[exp.Expr]) -> None:
    _check_zone(fn, args[1])


def _check_json_path(fn: str, args: list[exp.Expr]) -> None:
    from job.functions.json_path import JsonPathError, parse_path

    text = string_literal(args[1])
    if text is None:
        return
    if fn == "JsonQuery":
        if not text.startswith("$"):
            raise fail(f"{fn}: a JSONPath starts with $, found {text!r}", args[1])
        return
    try:
        parse_path(text)
    except JsonPathError as exc:
        raise fail(f"{fn}: {exc}", args[1]) from None


def _check_percentile(fn: str, args: list[exp.Expr]) -> None:
    value = number_literal(args[0])
    if value is None or not 0 < value <= 100:
        raise fail(
            f"{fn}: the percentile must be a number literal in (0, 100], found "
            f"{args[0].sql(dialect='spark')}",
            args[0],
        )


def _check_histogram(fn: str, args: list[exp.Expr]) -> None:
    need_number(fn, args[0], "the value")
    text = string_literal(args[1])
    if text is None:
        return
    for part in text.split(","):
        try:
            float(part)
        except ValueError:
            raise fail(f"{fn}: bucket {part!r} in {text!r} is not a number", args[1]) from None


def _check_trend(fn: str, args: list[exp.Expr]) -> None:
    need_int_range(fn, args[3], "the window length in minutes", 1, None)
    if fn == "ExponentialMovingAverage":
        alpha = number_literal(args[4])
        need_number(fn, args[4], "alpha")
        if alpha is not None and not 0 <= alpha <= 1:
            raise fail(f"{fn}: alpha must be in 0..1, found {args[4].sql(dialect='spark')}", args[4])


def _check_outlier(fn: str, args: list[exp.Expr]) -> None:
    for i, what in (
        (3, "the window length in minutes"),
        (4, "the observation period in minutes"),
        (5, "the tolerance"),
        (6, "the outlier percentage"),
    ):
        need_int_range(fn, args[i], what, 0, None)


def _check_dart_get(fn: str, args: list[exp.Expr]) -> None:
    need_number(fn, args[2], "the refresh rate in hours")


def _check_dart_contains(fn: str, args: list[exp.Expr]) -> None:
    if len(args) == 4:
        if string_literal(args[2]) is None and number_literal(args[2]) is not None:
            raise fail(
                f"{fn}: the regex must be a string such as '^%s.*', found {args[2].sql(dialect='spark')}",
                args[2],
            )
        need_number(fn, args[3], "the refresh rate in hours")


CHECKS: dict[str, Callable[[str, list[exp.Expr]], None]] = {
    "s2id": _check_s2id,
    "geohash": _check_geohash,
    "distance": _check_distance,
    "elementat": _check_element_at,
    "arrayaggregate": lambda fn, args: _check_array(fn, args, True),
    "arrayoperate": lambda fn, args: _check_array(fn, args, False),
    "startofweek": _check_zone_at(1),
    "endofweek": _check_zone_at(1),
    "startofmonth": _check_zone_at(1),
    "endofmonth": _check_zone_at(1),
    "timeindate": _check_time_in_date,
    "formattimeinzone": _check_format_time,
    "jsonquery": _check_json_path,
    "jsonupdate": _check_json_path,
    "jsondelete": _check_json_path,
    "percentileaggregator": _check_percentile,
    "histogrambucket": _check_histogram,
    "lineartrend": _check_trend,
    "exponentialmovingaverage": _check_trend,
    "outliermad": _check_outlier,
    "dartget": _check_dart_get,
    "dartcontains": _check_dart_contains,
    "condeq": check_cond_eq,
    "filters": check_filters,
    "selectfields": check_select_fields,
    "featureswithtype": check_typed,
    "singlefeaturewithtype": check_typed,
}


def check_call(fn: DaggerFunction, node: exp.Expr) -> None:
    """Check a call of ``fn``: its argument count and every literal argument that can be judged now.

    Raises SqlError at the call (wrong count) or at the argument (wrong type or value).
    """
    args = call_args(node)
    if len(args) not in fn.arity:
        raise fail(f"{fn.name} takes {fn.arity_text()}, found {len(args)}", node, hint=fn.signature)
    check = CHECKS.get(fn.name.lower())
    if check is not None:
        check(fn.name, args)


# ---- templates ---------------------------------------------------------------------------------

_LOCAL = "from_utc_timestamp(timestamp_seconds(__a0), __a1)"


def _in_zone(expr: str) -> str:
    """``expr`` is a local wall-clock timestamp in zone __a1: return its epoch seconds."""
    return f"unix_timestamp(to_utc_timestamp({expr}, __a1))"


MILLIS_THRESHOLD = 100_000_000_000
"""StartOfWeek/EndOfWeek read an argument whose magnitude is at least this (1e11) as epoch
milliseconds, below it as epoch seconds: 1e11 s is the year 5138, 1e11 ms is 1973-03-03."""


def _seconds_or_millis(local: str, minus: int) -> str:
    """``local`` is a wall-clock timestamp in zone __a1 built from ``_LOCAL``: return its epoch seconds
    (minus ``minus``) for an argument in seconds, its epoch milliseconds (minus ``minus``) for one in
    milliseconds, as the original (whose code took milliseconds and whose docs said seconds)."""
    millis = local.replace("timestamp_seconds(__a0)", "timestamp_millis(__a0)")
    return (
        f"CASE WHEN abs(__a0) >= {MILLIS_THRESHOLD} THEN {_in_zone(millis)} * 1000 - {minus} "
        f"ELSE {_in_zone(local)} - {minus} END"
    )


def _element_at(args: list[exp.Expr]) -> exp.Expr:
    if len(args) == 2:
        return build("CAST(try_element_at(__a0, IF(__a1 >= 0, __a1 + 1, __a1)) AS STRING)", args)
    path = string_literal(args[3]) or ""
    return build(
        f"coalesce(CAST(try_element_at(__a0, IF(__a2 >= 0, __a2 + 1, __a2)).{path} AS STRING), '')", args
    )


def _split(args: list[exp.Expr]) -> exp.Expr:
    if len(args) == 3:  # Spark's own split(text, regex, limit)
        return exp.Anonymous(this="split", expressions=[a.copy() for a in args])
    return build(
        "CASE WHEN __a0 = '' THEN array('') ELSE slice(split(__a0, __a1), 1, "
        "array_max(transform(split(__a0, __a1), (__x, __i) -> IF(__x <> '', __i + 1, 0)))) END",
        args,
    )


def _array_aggregate(args: list[exp.Expr]) -> exp.Expr:
    prefixes, final, kind = parse_array_operation("ArrayAggregate", args[1], args[2], aggregate=True)
    number = "DOUBLE" if kind in FLOAT_TYPES else "BIGINT"
    arr = "filter(__a0, __x -> __x IS NOT NULL)"
    if kind != "other":  # numbers as numbers, also when they come as text (SelectFields): 9 < 10
        arr = f"transform({arr}, __x -> CAST(__x AS {number}))"
    for prefix in prefixes:
        arr = f"array_distinct({arr})" if prefix == "distinct" else f"array_sort({arr})"
    zero = "0D" if number == "DOUBLE" else "0L"
    templates = {
        "sum": f"aggregate({arr}, {zero}, (__acc, __x) -> __acc + CAST(__x AS {number}))",
        "average": f"IF(size({arr}) = 0, 0D, aggregate({arr}, 0D, (__acc, __x) -> __acc + CAST(__x AS DOUBLE)) "
        f"/ size({arr}))",
        "min": f"coalesce(CAST(array_min({arr}) AS {number}), {zero})",
        "max": f"coalesce(CAST(array_max({arr}) AS {number}), {zero})",
        "count": f"CAST(size({arr}) AS BIGINT)",
        "findfirst": f"try_element_at({arr}, 1)",
        "findany": f"try_element_at({arr}, 1)",
    }
    return build(templates[final], args)


def _array_operate(args: list[exp.Expr]) -> exp.Expr:
    ops, _, _ = parse_array_operation("ArrayOperate", args[1], args[2], aggregate=False)
    arr = "filter(__a0, __x -> __x IS NOT NULL)"
    for op in ops:
        arr = f"array_distinct({arr})" if op == "distinct" else f"array_sort({arr})"
    return build(arr, args)


def _time_in_date(args: list[exp.Expr]) -> exp.Expr:
    zone = args[3] if len(args) == 4 else exp.Literal.string("UTC")
    return build(
        "unix_timestamp(to_utc_timestamp(date_trunc('DAY', from_utc_timestamp(timestamp_seconds(__a0), __a3))"
        " + make_dt_interval(0, __a1, __a2, 0), __a3))",
        [*args[:3], zone],
    )


def _collect_array(args: list[exp.Expr]) -> exp.Expr:
    arg = args[0]
    if isinstance(arg, exp.Distinct):
        return exp.Anonymous(this="collect_set", expressions=[e.copy() for e in arg.expressions])
    return exp.Anonymous(this="collect_list", expressions=[arg.copy()])


# Apache Commons Math's Percentile (the original's estimator): pos = p (n + 1) / 100 over the sorted
# values, 1-based, interpolated. ``aggregate(array(sorted), ...)`` binds the sorted array to ``__s`` once.
_PERCENTILE = (
    "aggregate(array(array_sort(collect_list(CAST(__a1 AS DOUBLE)))), CAST(NULL AS DOUBLE), (__r, __s) -> "
    "CASE WHEN size(__s) = 0 THEN CAST(NULL AS DOUBLE) "
    "WHEN size(__s) = 1 OR __a0 * (size(__s) + 1) / 100 < 1 THEN __s[0] "
    "WHEN __a0 * (size(__s) + 1) / 100 >= size(__s) THEN __s[size(__s) - 1] "
    "ELSE __s[CAST(floor(__a0 * (size(__s) + 1) / 100) AS INT) - 1] "
    "+ (__a0 * (size(__s) + 1) / 100 - floor(__a0 * (size(__s) + 1) / 100)) "
    "* (__s[CAST(floor(__a0 * (size(__s) + 1) / 100) AS INT)] - __s[CAST(floor(__a0 * (size(__s) + 1) / 100) AS INT) - 1]) "
    "END)"
)

_DISTANCE_RAD = "((__a2 - __a0) * pi() / 180)", "((__a3 - __a1) * pi() / 180)"
_HAVERSINE_A = (
    f"(sin({_DISTANCE_RAD[0]} / 2) * sin({_DISTANCE_RAD[0]} / 2) + cos(__a0 * pi() / 180) * "
    f"cos(__a2 * pi() / 180) * sin({_DISTANCE_RAD[1]} / 2) * sin({_DISTANCE_RAD[1]} / 2))"
)

TEMPLATES: dict[str, str] = {
    "mapget": "try_element_at(__a0, __a1)",
    "listcontains": "coalesce(array_contains(__a0, __a1), FALSE)",
    "bytetostring": "CAST(__a0 AS STRING)",
    "timestampfromunix": "timestamp_seconds(__a0)",
    "formattimeinzone": "date_format(from_utc_timestamp(__a0, __a1), __a2)",
    "jsonquery": "get_json_object(__a0, __a1)",
    "startofweek": _seconds_or_millis(f"date_trunc('WEEK', {_LOCAL})", 0),
    "endofweek": _seconds_or_millis(f"date_trunc('WEEK', {_LOCAL}) + INTERVAL '7' DAY", 1),
    "startofmonth": _in_zone(f"date_trunc('MONTH', {_LOCAL})"),
    "endofmonth": _in_zone(f"date_trunc('MONTH', {_LOCAL}) + INTERVAL '1' MONTH") + " - 1",
    "distance": f"6371 * (2 * atan2(sqrt({_HAVERSINE_A}), sqrt(1 - {_HAVERSINE_A})))",
    "percentileaggregator": _PERCENTILE,
}

REWRITERS: dict[str, Callable[[list[exp.Expr]], exp.Expr]] = {
    **{name: partial(build, template) for name, template in TEMPLATES.items()},
    "elementat": _element_at,
    "split": _split,
    "arrayaggregate": _array_aggregate,
    "arrayoperate": _array_operate,
    "timeindate": _time_in_date,
    "collectarray": _collect_array,
    "condeq": cond_eq,
    "filters": filters,
    "selectfields": select_fields,
    "features": features,
    "featureswithtype": features_with_type,
    "singlefeaturewithtype": single_feature_with_type,
}


def bottom_up(tree: exp.Expr, fn: Callable[[exp.Expr], exp.Expr]) -> exp.Expr:
    """Return a copy of ``tree`` with ``fn`` applied to every node, children before their parent."""
    root = tree.copy()
    for node in reversed(list(root.walk())):
        new = fn(node)
        if new is node:
            continue
        if node is root:
            root = new
        else:
            node.replace(new)
    return root


def rewrite_library(tree: exp.Expr, user: Mapping[str, DaggerFunction] | None = None) -> exp.Expr:
    """Rewrite every call of a built-in-backed Dagger function into Spark built-ins (nested calls too)."""

    def visit(node: exp.Expr) -> exp.Expr:
        name = call_name(node)
        if name in REWRITERS and not (user and name in user):
            return REWRITERS[name](call_args(node))
        return node

    return bottom_up(tree, visit)
