"""Label matchers as in Alertmanager: ``name=value``, ``name!=value``, ``name=~regex``, ``name!~regex``.

An alert's labels are its rule (``alertname`` and ``rule``), ``team``, ``severity`` (``warn`` or
``crit``), the rule's extra labels and its group's tags. A regex must match the whole value. A label
the alert does not have reads as the empty string, so ``city!=Jakarta`` matches an alert without a
city and ``city=`` matches only those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

Op = Literal["=", "!=", "=~", "!~"]
_MATCHER_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Matcher:
    """One condition on one label."""

    name: str
    op: Op
    value: str
    _regex: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.op in ("=~", "!~"):
            object.__setattr__(self, "_regex", re.compile(self.value))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Return True when ``labels`` satisfy this matcher (a missing label is the empty string)."""
        got = labels.get(self.name, "")
        if self.op == "=":
            return got == self.value
        if self.op == "!=":
            return got != self.value
        assert self._regex is not None, "compiled for =~ and !~"
        found = self._regex.fullmatch(got) is not None
        return found if self.op == "=~" else not found

    def __str__(self) -> str:
        return f"{self.name}{self.op}{self.value}"


def parse_matcher(text: str) -> Matcher:
    """Return the matcher written as ``name=value`` (also ``!=``, ``=~``, ``!~``; the value may be quoted).

    Raises:
        ValueError: not of that form, or a regex that does not compile.
    """
    m = _MATCHER_RE.match(text)
    if not m:
        raise ValueError(
            f"{text!r} is not a matcher like team=bookings, severity!=warn or city=~Jakarta|Bandung"
        )
    name, op, value = m.group(1), m.group(2), m.group(3)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    if op in ("=~", "!~"):
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{text!r}: the regex does not compile: {exc}") from None
    return Matcher(name, cast(Op, op), value)  # the pattern admits only the four operators


def parse_matchers(items: Iterable[str] | Mapping[str, str]) -> tuple[Matcher, ...]:
    """Return matchers from a list of ``name=value`` strings or a ``{name: value}`` mapping (equality).

    Raises:
        ValueError: an item that is not a matcher.
    """
    if isinstance(items, Mapping):
        return tuple(Matcher(str(k), "=", str(v)) for k, v in items.items())
    return tuple(parse_matcher(str(item)) for item in items)


def all_match(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """Return True when every matcher matches ``labels`` (True for no matchers)."""
    return all(m.matches(labels) for m in matchers)
