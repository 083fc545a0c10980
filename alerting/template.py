"""Message templates: Python format fields over an alert's values, without attribute or index access.

A template such as ``"{rule}: {bookings:.0f} bookings in city {tag_city_id} ({condition})"`` may
use only plain names: the standard ones in :data:`STANDARD_FIELDS` and the group's tags by name.
``{value}`` is the rule's value; ``{tags}`` is all tags as ``k=v, …``. A value that is missing
renders as ``n/a`` (with any format spec); a field that is not known renders as ``?``.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from typing import Any

STANDARD_FIELDS: dict[str, str] = {
    "rule": "the rule's name",
    "team": "the rule's team",
    "level": "OK, WARN or CRIT",
    "previous_level": "the level notified before this one",
    "status": "firing or resolved",
    "value": "the value the rule computed (a number; n/a when there is none)",
    "past_value": "the value D-1 or D-7 earlier, for a change condition",
    "change_pct": "the change versus D-1 or D-7 in percent, for a change condition",
    "condition": "the condition that holds, e.g. 'above 200' (or 'ok')",
    "tags": "the group's tags as k=v, k=v",
    "since": "when the alert reached its level (UTC, ISO 8601)",
    "at": "the evaluation time (UTC, ISO 8601)",
    "dagger": "the dagger (platform alerts and no-data rules that name one)",
}
NUMERIC_FIELDS = frozenset({"value", "past_value", "change_pct"})
DEFAULT_MESSAGE = "{rule} is {level}: {tags} value {value:.6g} ({condition})"
DEFAULT_DEADMAN_MESSAGE = "{rule} is {level}: no data from {measurement} in {tags} ({condition})"


class _Formatter(string.Formatter):
    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        return self.get_value(field_name, args, kwargs), field_name

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        return kwargs.get(key, "?")

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            return "n/a"
        try:
            return format(value, format_spec)
        except (ValueError, TypeError):
            return str(value)


_FORMATTER = _Formatter()


def template_fields(template: str) -> list[tuple[str, str]]:
    """Return the (name, format spec) of each field of ``template``.

    Raises:
        ValueError: unbalanced braces, positional fields, attribute or index access (``{a.b}``, ``{a[0]}``),
            or a conversion (``!r``).
    """
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"the template does not parse: {exc}") from None
    out = []
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if not name or not name.isidentifier() or name.startswith("_"):
            raise ValueError(
                f"{{{name}}} is not a plain field name; use names such as {{value}}, {{rule}} "
                "or a tag name like {tag_city_id}"
            )
        if conversion:
            raise ValueError(f"{{{name}!{conversion}}}: conversions are not supported")
        if spec and "{" in spec:
            raise ValueError(f"{{{name}:{spec}}}: nested fields are not supported")
        out.append((name, spec or ""))
    return out


def check_template(template: str, known: Iterable[str] | None, numeric: Iterable[str] = ()) -> None:
    """Check ``template`` parses, uses only ``known`` and standard names (any name when ``known`` is None)
    and valid format specs (names in ``numeric`` and NUMERIC_FIELDS take number formats).

    Raises:
        ValueError: naming the field that is wrong and the names that can be used.
    """
    names = set(known) | set(numeric) if known is not None else None
    numbers = NUMERIC_FIELDS | set(numeric)
    for name, spec in template_fields(template):
        if names is not None and name not in names and name not in STANDARD_FIELDS:
            allowed = ", ".join(sorted(set(STANDARD_FIELDS) | names))
            raise ValueError(f"{{{name}}} is not a field this rule has; use one of: {allowed}")
        if not spec:
            continue
        samples: list[Any] = [1.5] if name in numbers else ["x"] if names is not None else [1.5, "x"]
        problems = []
        for sample in samples:
            try:
                format(sample, spec)
            except ValueError as exc:
                problems.append(str(exc))
        if len(problems) == len(samples):
            raise ValueError(f"{{{name}:{spec}}}: bad format spec: {problems[0]}")


def render(template: str, values: Mapping[str, Any]) -> str:
    """Return ``template`` filled from ``values`` (missing values render as ``n/a``, unknown names as ``?``)."""
    return _FORMATTER.vformat(template, (), dict(values))
