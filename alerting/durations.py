"""Durations as people write them in YAML: ``90``, ``90s``, ``5m``, ``1h30m``, ``7d``, ``500ms``.

:data:`Duration` is a pydantic type that holds the value in seconds (a float).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any

from pydantic import BeforeValidator

_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_PARTS_RE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(value: Any) -> float:
    """Return ``value`` in seconds: a number (seconds) or text such as ``90s``, ``5m``, ``1h30m``, ``7d``.

    Raises:
        ValueError: negative, not finite, or text that is not a sequence of <number><unit> parts
            (units ms, s, m, h, d, w).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (e.g. 30s, 5m, 1h)")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if re.fullmatch(r"\d+(?:\.\d+)?", text):
            seconds = float(text)
        elif text and _PARTS_RE.fullmatch(text):
            seconds = sum(float(n) * _UNITS[u] for n, u in _PART_RE.findall(text))
        else:
            raise ValueError(f"{value!r} is not a duration (e.g. 30s, 5m, 1h30m, 7d)")
    else:
        raise ValueError(f"{value!r} is not a duration (e.g. 30s, 5m, 1h)")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} must be a non-negative, finite duration")
    return seconds


def format_duration(seconds: float) -> str:
    """Return ``seconds`` in the shortest exact form: ``90s`` → ``1m30s``, ``0.5`` → ``500ms``."""
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000)}ms"
    out, rest = [], round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            out.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(out) or "0s"


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""Seconds, written as a number or as text with units (``30s``, ``5m``, ``1h``)."""
