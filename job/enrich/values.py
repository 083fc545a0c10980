"""From a lookup's response to a new column's value: a path's value, made the column's type.

Runs once per distinct key of a micro-batch (never once per row): the rows get their values by index
(:func:`job.enrich.keys.spread`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from typing import Any

import pyarrow as pa

#: The Arrow type of each output type (job.spec.OutputColumn.type).
ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "json": pa.string(),
}


class BadValue(ValueError):
    """A response value that is not of its column's type."""


def extract(document: Any, steps: tuple[str | int, ...]) -> Any:
    """Return the value at ``steps`` in ``document`` (dicts by name, lists by index); None where a step is
    missing."""
    value = document
    for step in steps:
        if isinstance(step, int) and isinstance(value, list):
            value = value[step] if -len(value) <= step < len(value) else None
        elif isinstance(value, dict):
            value = value.get(step)
        else:
            return None
        if value is None:
            return None
    return value


def _json_text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=_plain)


def _plain(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def convert(value: Any, kind: str) -> Any:
    """Return ``value`` as a value of output type ``kind`` (None stays None).

    string: text as it is, an object or list as its JSON text, other scalars as text (true/false for a
    boolean); json: the JSON text of any value; long, double, boolean: the number or truth it is or says.
    Raises BadValue when ``value`` is not of the type (a text that is no number, a fraction for a long)."""
    if value is None:
        return None
    if kind == "json":
        return _json_text(value)
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool | dict | list):
            return _json_text(value)
        if isinstance(value, dt.datetime | dt.date | dt.time):
            return value.isoformat()
        return str(value)
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise BadValue(f"{value!r} is not a boolean")
    if isinstance(value, bool):
        raise BadValue(f"{value!r} is not a number")
    if kind == "long":
        if isinstance(value, int):
            return value
        try:
            number = (
                decimal.Decimal(str(value).strip())
                if isinstance(value, str | float | decimal.Decimal)
                else None
            )
        except decimal.InvalidOperation:
            number = None
        if number is None or not number.is_finite() or number != number.to_integral_value():
            raise BadValue(f"{value!r} is not a whole number")
        return int(number)
    if kind == "double":
        if isinstance(value, int | float | decimal.Decimal):
            return float(value)
        if isinstance(value, str):
            try:
                parsed = float(value)
            except ValueError:
                raise BadValue(f"{value!r} is not a number") from None
            if math.isfinite(parsed):
                return parsed
        raise BadValue(f"{value!r} is not a number")
    raise ValueError(f"unknown output type {kind!r}")


#: The Python types a value of each output type already has (a boolean is not a long).
_ALREADY: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "long": (int,),
    "double": (float,),
    "boolean": (bool,),
    "json": (),
}


def column_values(documents: list[Any], steps: tuple[str | int, ...], kind: str) -> tuple[list[Any], int]:
    """Return the values of one output column for ``documents`` (one per distinct key) and how many were not of
    type ``kind`` (made NULL). Values that are all of the type already are taken as they are (no conversion per
    value)."""
    if len(steps) == 1 and isinstance(steps[0], str):
        step = steps[0]
        raw = [d.get(step) if type(d) is dict else None for d in documents]
    else:
        raw = [extract(d, steps) for d in documents]
    already = _ALREADY[kind]
    if already and all(v is None or type(v) in already for v in raw):
        return raw, 0
    out, bad = [], 0
    for value in raw:
        try:
            out.append(convert(value, kind))
        except BadValue:
            out.append(None)
            bad += 1
    return out, bad
