"""One line for one pydantic error, in the product's words: what was given and what the field takes.

pydantic's own messages ("Input should be a valid integer", "Field required", "Extra inputs are not
permitted") never say what was given; every reader of a user's input (a spec, an alert file, a request body,
an environment variable) words its errors here so that the same mistake reads the same wherever it is made.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any, get_args

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from job.spec.numbers import number_problem, shown

#: pydantic's error type -> what a value of that type is, in words ("… is not text").
_KINDS = {
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping of names to values",
    "model_type": "a mapping of names to values",
    "model_attributes_type": "a mapping of names to values",
}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def models_at(keys: tuple[Any, ...], root: type[BaseModel]) -> list[type[BaseModel]]:
    """Return the models that may stand at ``keys`` (an error's location) below ``root``."""
    models: list[type[BaseModel]] = [root]
    for key in keys:
        if isinstance(key, int):
            continue
        tagged = [
            m for m in models if key in get_args(getattr(m.model_fields.get("type"), "annotation", None))
        ]
        if tagged:
            models = tagged
            continue
        inner = [
            sub for m in models if key in m.model_fields for sub in _models_in(m.model_fields[key].annotation)
        ]
        if inner or any(key in m.model_fields for m in models):
            models = inner
        # else a union member's or a validator's name (function-after[...]): the same models
    return models


def field_at(loc: tuple[Any, ...], root: type[BaseModel]) -> FieldInfo | None:
    """Return the field an error's location ends at below ``root`` (None when the location ends inside a
    field's value, or is unknown)."""
    if not loc or not isinstance(loc[-1], str):
        return None
    return next(
        (m.model_fields[loc[-1]] for m in models_at(loc[:-1], root) if loc[-1] in m.model_fields), None
    )


def written_as(node: yaml.Node | None) -> str | None:
    """Return a YAML scalar's text as the file wrote it (with its quotes), or None."""
    if not isinstance(node, yaml.ScalarNode):
        return None
    if node.style in ("'", '"'):
        return f"{node.style}{node.value}{node.style}"
    return None if node.style else str(node.value)


def unknown_field(name: str, known: Iterable[str]) -> str:
    """Return the message of a field no model here has: "unknown field; did you mean deploy?" when a
    ``known`` name is close to ``name``."""
    near = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    return "unknown field" + (f"; did you mean {' or '.join(near)}?" if near else "")


def problem(
    error: ErrorDetails,
    field: FieldInfo | None = None,
    written: str | None = None,
    known: Iterable[str] = (),
) -> str:
    """Return the message of one pydantic error, without its location.

    A bad number names the value and the range (``-3 is not a whole number from 1 to 1024``); a missing field
    "is required"; an extra one is an "unknown field"; a value of the wrong type names itself and the type
    (``5 is not text``); a string too long or too short gives the limit; anything else keeps pydantic's words
    (a validator's own message loses its "Value error, " prefix). ``field`` and ``written`` (the value as the
    user wrote it) sharpen a number's message when known; ``known`` (the names the model at an unknown field
    accepts) adds "did you mean …?".
    """
    kind = error["type"]
    number = number_problem(error, field, written)
    if number is not None:
        return number
    ctx: dict[str, Any] = dict(error.get("ctx") or {})
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return unknown_field(str(error["loc"][-1]) if error["loc"] else "", known)
    if kind in _KINDS:
        return f"{shown(error['input'], written)} is not {_KINDS[kind]}"
    if kind == "string_too_long":
        return f"is longer than {ctx.get('max_length')} characters"
    if kind == "string_too_short":
        least = ctx.get("min_length")
        return "must not be empty" if least == 1 else f"is shorter than {least} characters"
    if kind == "too_long":
        return f"has more than {ctx.get('max_length')} items"
    return str(error["msg"]).removeprefix("Value error, ")


__all__ = ["field_at", "models_at", "problem", "unknown_field", "written_as"]
