"""CondEq, Filters and SelectFields (the original's LongbowPlus functions) as AST rewrites.

``CondEq(field, value)`` becomes its predicate as JSON text; ``Filters(list, class, CondEq...)``
and ``SelectFields(list, class, path)`` become the Arrow UDFs ``dagger_filters`` and
``dagger_select_fields`` (:mod:`job.functions.proto_fields`), which read the dagger's schema.
``SelectFields(Filters(list, class, ...), path)`` takes the class from its Filters.
"""

from __future__ import annotations

import re

from sqlglot import exp

from job.functions.proto_fields import FILTERS_UDF, SELECT_FIELDS_UDF
from job.sql.calls import build, call_name, fail, string_literal

_FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _check_path(fn: str, node: exp.Expr, what: str) -> None:
    text = string_literal(node)
    if text is not None and not _FIELD_PATH.match(text):
        raise fail(
            f"{fn}: {what} must be field names joined by dots such as 'driver.status', found {text!r}", node
        )


def check_cond_eq(fn: str, args: list[exp.Expr]) -> None:
    _check_path(fn, args[0], "the field")


def check_filters(fn: str, args: list[exp.Expr]) -> None:
    for arg in args[2:]:
        if call_name(arg) != "condeq":
            raise fail(
                f"{fn}: a predicate must be CondEq(field, value), found {arg.sql(dialect='spark')}",
                arg,
                hint="Filters(list, 'package.Message', CondEq('status', 'COMPLETED'), ...)",
            )


def check_select_fields(fn: str, args: list[exp.Expr]) -> None:
    _check_path(fn, args[-1], "the field path")
    if len(args) == 2 and call_name(args[0]) != "filters":
        raise fail(
            f"{fn}: the two-argument form reads the result of Filters(...), found "
            f"{args[0].sql(dialect='spark')}",
            args[0],
            hint="name the class: SelectFields(list, 'package.Message', 'field')",
        )


def cond_eq(args: list[exp.Expr]) -> exp.Expr:
    return build("to_json(named_struct('field', __a0, 'value', __a1))", args)


def filters(args: list[exp.Expr]) -> exp.Expr:
    predicates = ", ".join(f"__a{i}" for i in range(2, len(args)))
    array = f"array({predicates})" if predicates else "CAST(array() AS ARRAY<STRING>)"
    return build(f"{FILTERS_UDF}(__a0, __a1, {array})", args)


def select_fields(args: list[exp.Expr]) -> exp.Expr:
    if len(args) == 2:  # SelectFields(Filters(list, class, ...), path): already rewritten, inside out
        inner = args[0]
        if not (isinstance(inner, exp.Anonymous) and str(inner.name).lower() == FILTERS_UDF):
            raise fail("SelectFields: the two-argument form reads the result of Filters(...)", inner)
        return build(f"{SELECT_FIELDS_UDF}(__a0, __a1, __a2)", [inner, inner.expressions[1], args[1]])
    return build(f"{SELECT_FIELDS_UDF}(__a0, __a1, __a2)", args)
