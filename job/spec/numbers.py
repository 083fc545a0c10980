"""The line a bad number in a user's file gets: the field, the value given and what the field allows.

pydantic says "Input should be a valid integer" or "Input should be greater than or equal to 1" and never
what it was given; :func:`number_problem` says ``-3 is not a whole number from 1 to 1024``. The value is shown
as the file wrote it (the YAML scalar's text) when it is known, else as YAML would spell the parsed value.
A ``true`` or ``false`` is no number (:data:`BOOL_NOT_NUMBER`): pydantic would read it as 1 or 0.
"""

from __future__ import annotations

import json
import math
import types
from typing import Any, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError

#: The error of a ``true`` or ``false`` given for a number (:class:`job.spec.base.SpecModel` raises it).
BOOL_NOT_NUMBER = "bool_not_number"
BOOL_NOT_NUMBER_ERROR = PydanticCustomError(BOOL_NOT_NUMBER, "Input should be a number, not true or false")

#: pydantic's error types about a number: a value that is no number, not whole, not finite, or out of range.
NUMBER_ERRORS = frozenset(
    {
        "int_type",
        "int_parsing",
        "int_parsing_size",
        "int_from_float",
        "float_type",
        "float_parsing",
        "finite_number",
        "greater_than",
        "greater_than_equal",
        "less_than",
        "less_than_equal",
        BOOL_NOT_NUMBER,
    }
)

#: The longest value a message quotes; a longer one is cut with an ellipsis.
MAX_SHOWN = 40


def number_kind(annotation: Any) -> str | None:
    """Return "whole number" for an ``int`` field, "number" for a ``float`` one (either may be optional),
    None for any other (a ``bool``, a string, a union with a string...)."""
    args = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else (annotation,)
    kinds = {a for a in args if a is not type(None)}
    if kinds == {int}:
        return "whole number"
    if kinds <= {int, float} and kinds:
        return "number"
    return None


def _number(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _range(field: FieldInfo | None, ctx: dict[str, Any]) -> str:
    """Return the bounds of a field (or of an error's context, for a field not known) in words: " from 1 to
    1024", " over 0 and up to 300", " of at least 0", "" for none."""
    bounds = dict(ctx)
    for m in field.metadata if field is not None else ():
        for kind, key in ((Ge, "ge"), (Gt, "gt"), (Le, "le"), (Lt, "lt")):
            if isinstance(m, kind):
                bounds[key] = getattr(m, key)
    if "ge" in bounds and "le" in bounds:
        return f" from {_number(bounds['ge'])} to {_number(bounds['le'])}"
    low = next(
        (f"{w} {_number(bounds[k])}" for k, w in (("ge", "at least"), ("gt", "over")) if k in bounds), ""
    )
    high = next(
        (f"{w} {_number(bounds[k])}" for k, w in (("le", "up to"), ("lt", "under")) if k in bounds), ""
    )
    if low and high:
        return f" {low} and {high}"
    if low.startswith("at least"):
        return f" of {low}"
    return f" {low or high}" if low or high else ""


def allowed(field: FieldInfo | None, error: ErrorDetails) -> str:
    """Return what a number field allows: "a whole number from 1 to 1024", "a number over 0"."""
    kind = number_kind(field.annotation) if field is not None else None
    if kind is None:
        kind = "whole number" if error["type"].startswith("int") else "number"
    return f"a {kind}{_range(field, dict(error.get('ctx') or {}))}"


def shown(value: Any, written: str | None = None) -> str:
    """Return a value as a message quotes it: as the file wrote it (``written``, a YAML scalar's text with
    its quotes), else as YAML spells it (true, null, .nan, a string in quotes), cut at :data:`MAX_SHOWN`."""
    if written is not None:
        text = written
    elif isinstance(value, bool) or value is None:
        text = json.dumps(value)
    elif isinstance(value, float) and not math.isfinite(value):
        text = ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    elif isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, str):
        text = json.dumps(value)
    else:
        text = json.dumps(value, default=str)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def number_problem(error: ErrorDetails, field: FieldInfo | None, written: str | None = None) -> str | None:
    """Return the message of a bad number (``"fast" is not a number of at least 0``), or None when ``error``
    is not about a number (or ``field``, when known, is no number field)."""
    if error["type"] not in NUMBER_ERRORS:
        return None
    if field is not None and number_kind(field.annotation) is None:
        return None
    return f"{shown(error['input'], written)} is not {allowed(field, error)}"
