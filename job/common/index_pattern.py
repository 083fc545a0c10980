"""Elasticsearch index names that may carry a window's date: ``bookings-{window:%Y.%m.%d}``.

The pattern is a Python format string whose only field is ``window`` (a UTC datetime, formatted with
strftime codes). It is checked when the spec is, by rendering it for a sample time and checking the
result against Elasticsearch's rules for index names.
"""

from __future__ import annotations

import re
import string
from datetime import UTC, datetime

#: Characters Elasticsearch does not allow in an index name.
_FORBIDDEN = set('\\/*?"<>| ,#:')
_SAMPLE = datetime(2026, 12, 31, 23, 59, 58, tzinfo=UTC)
_RULES = (
    'lower case, no spaces nor any of \\ / * ? " < > | , # :, not starting with - _ or +, at most 255 bytes'
)


def _fields(pattern: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        return list(string.Formatter().parse(pattern))
    except ValueError as exc:
        raise ValueError(
            f"index {pattern!r} is not a valid pattern ({exc}); write braces as "
            "{window:%Y.%m.%d}, or {{ and }} for literal ones"
        ) from None


def check_index_pattern(pattern: str) -> None:
    """Check an index name pattern.

    Raises ValueError naming what is wrong: a field other than ``{window:FORMAT}``, a conversion
    (``!r``), or a name (rendered for a sample time) that Elasticsearch would refuse.
    """
    for _literal, field, spec, conversion in _fields(pattern):
        if field is None:
            continue
        if field != "window":
            raise ValueError(
                f"index {pattern!r} uses {{{field}}}: the only field an index name may carry is "
                "{window:FORMAT} (e.g. bookings-{window:%Y.%m.%d})"
            )
        if conversion:
            raise ValueError(
                f"index {pattern!r}: {{window!{conversion}}} is not allowed; write {{window:FORMAT}}"
            )
        if not spec:
            raise ValueError(
                f"index {pattern!r}: {{window}} needs a strftime format, e.g. {{window:%Y.%m.%d}}"
            )
    name = render_index(pattern, _SAMPLE)
    bad = sorted(_FORBIDDEN & set(name))
    if (
        not name
        or name != name.lower()
        or bad
        or name[0] in "-_+"
        or name in (".", "..")
        or len(name.encode()) > 255
    ):
        why = f" (it has {' '.join(repr(c) for c in bad)})" if bad else ""
        raise ValueError(
            f"index {pattern!r} gives names like {name!r} that Elasticsearch refuses{why}: "
            f"an index name is {_RULES}"
        )


def has_window(pattern: str) -> bool:
    """Return True when ``pattern`` carries the window's date (one index per period)."""
    return any(field == "window" for _l, field, _s, _c in _fields(pattern))


def render_index(pattern: str, window: datetime | None) -> str:
    """Return the index name of ``pattern`` for a window ending at ``window`` (made UTC; naive = UTC).

    Raises ValueError when the pattern carries the window and ``window`` is None.
    """
    if window is None:
        if has_window(pattern):
            raise ValueError(f"index {pattern!r} needs the row's window_timestamp")
        return pattern.format()
    when = window.replace(tzinfo=UTC) if window.tzinfo is None else window.astimezone(UTC)
    return pattern.format(window=when)


def search_pattern(pattern: str) -> str:
    """Return an index expression that matches every index ``pattern`` may give (``bookings-*``)."""
    out = []
    for literal, field, _spec, _conv in _fields(pattern):
        out.append(literal)
        if field is not None:
            out.append("*")
    return re.sub(r"\*+", "*", "".join(out))
