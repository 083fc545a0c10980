"""What no request may carry, whatever its field: checked on the parsed JSON before a body's own fields.

A NUL character (PostgreSQL cannot store one, and no name, comment or spec needs it), a number that is not
finite (``NaN``, ``Infinity``, or ``1e400``, which JSON parsers read as infinity), an integer beyond 64 bits
(no registry column holds it) and nesting deeper than :data:`MAX_DEPTH` are refused with a message naming
the field, so they get a 422 instead of reaching the registry (where they were 5xx).
"""

from __future__ import annotations

import math
from typing import Any, get_args

from fastapi import Request
from pydantic_core import PydanticCustomError

from job.control.errors import ControlError

#: The deepest nesting of objects and lists a body may have (a controller's report has 4 levels).
MAX_DEPTH = 32
#: The largest magnitude of an integer (a signed 64-bit one).
MAX_INT = 2**63 - 1
#: The pydantic error type of these refusals (job.server.errors shows its message as it is).
PLAIN_VALUE = "plain_value"


def refusal(value: Any, depth: int) -> str | None:
    """Return why ``value`` (JSON data ``depth`` levels deep) may not be in a request, or None."""
    if isinstance(value, str):
        return "a NUL character is not allowed" if "\x00" in value else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number (NaN, Infinity, or too large)"
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"{str(value)[:30]}{'...' if len(str(value)) > 30 else ''} is out of range (at most {MAX_INT})"
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    return None


def first_refusal(data: Any) -> tuple[str, str] | None:
    """Return (field path, why) of the first value in ``data`` no request may carry, or None."""
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        where, value, depth = stack.pop()
        why = refusal(value, depth)
        if why is not None:
            return where or "body", why
        if isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                name = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and "\x00" in key:
                    return where or "body", f"the key {key!r} has a NUL character, which is not allowed"
                stack.append((name, item, depth + 1))
        elif isinstance(value, list):
            stack.extend(
                (f"{where}.{i}" if where else str(i), item, depth + 1)
                for i, item in reversed(list(enumerate(value)))
            )
    return None


def check_plain(data: Any) -> Any:
    """Return ``data`` (a parsed request body); raise a pydantic error naming the first value no request may
    carry (see the module docstring)."""
    found = first_refusal(data)
    if found is not None:
        where, why = found
        raise PydanticCustomError(PLAIN_VALUE, "{where}: {why}", {"where": where, "why": why})
    return data


class InvalidParameterError(ControlError):
    """A query or path parameter no request may carry (422)."""

    title = "Invalid request"


def check_params(request: Request) -> None:
    """Refuse a query or path parameter with a NUL character or an integer beyond 64 bits (every route's
    dependency): InvalidParameterError naming the parameter (422)."""
    params = [("query", k, v) for k, v in request.query_params.multi_items()]
    params += [("path", k, v) for k, v in request.path_params.items() if isinstance(v, str)]
    ints = _int_params(request)
    for where, key, value in params:
        if "\x00" in key or "\x00" in value:
            raise InvalidParameterError(f"{where} parameter {key[:40]!r}: a NUL character is not allowed")
        digits = value.strip().lstrip("+-")
        if (
            key in ints
            and digits.isdigit()
            and digits.isascii()
            and (len(digits) > 19 or int(digits) > MAX_INT)
        ):
            raise InvalidParameterError(
                f"{where} parameter {key[:40]!r}: {value[:30]} is out of range (at most {MAX_INT})"
            )


def _int_params(request: Request) -> set[str]:
    """Return the names of the route's integer query and path parameters."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None:
        return set()
    fields = [*dependant.query_params, *dependant.path_params]
    return {
        f.alias for f in fields if f.field_info.annotation is int or int in get_args(f.field_info.annotation)
    }
