"""What a dagger's output chart asks for and gets: a query (field, time range, step, tag filter,
comparisons) and plain series of (time, value), one per period (now, D-1, D-7)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from job.errors import DaggerError

#: The comparisons a chart may overlay: the same time the day before and the week before.
COMPARES: dict[str, int] = {"D-1": 86_400, "D-7": 7 * 86_400}
#: Steps a default is picked from (seconds): the smallest that gives at most 30 points.
STEPS = (10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 86_400)
_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


class OutputError(DaggerError):
    """The dagger's output cannot be read (no sink to read from, an unknown field, a server down)."""

    title = "Cannot read the dagger's output"


def parse_duration(text: str, what: str = "--since") -> int:
    """Return the seconds of ``900s``, ``15m``, ``1h``, ``1d`` or ``2w`` (a bare number is seconds).

    Raises OutputError for anything else, or zero."""
    match = _DURATION.match(str(text))
    if not match or int(match.group(1)) <= 0:
        raise OutputError(f"{what} {text!r} is not a duration", hint="write e.g. 30s, 15m, 1h or 1d")
    return int(match.group(1)) * _UNIT_S[match.group(2)]


def parse_compare(text: str) -> list[str]:
    """Return the comparisons of ``D-1``, ``D-7`` or ``D-1,D-7`` (case-insensitive), in order, once each.

    Raises OutputError for another one."""
    out: list[str] = []
    for part in (p.strip().upper() for p in str(text).split(",") if p.strip()):
        if part not in COMPARES:
            raise OutputError(
                f"--compare {part!r} is not a comparison",
                hint="use D-1 (a day before) or D-7 (a week before)",
            )
        if part not in out:
            out.append(part)
    return out


def parse_tag(text: str | None) -> tuple[str, str] | None:
    """Return (key, value) of ``k=v``; None for None or "". Raises OutputError without ``=`` or a key."""
    if not text:
        return None
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise OutputError(f"--tag {text!r} is not key=value", hint="e.g. --tag tag_city_id=1")
    return key.strip(), value.strip()


def default_step(since_s: int) -> int:
    """Return the step of a chart over ``since_s`` seconds: 30 s for 15 minutes (the original page's
    ``GROUP BY time(30s)``), 2 minutes for an hour, an hour for a day."""
    return next((s for s in STEPS if since_s / s <= 30), STEPS[-1])


def step_text(seconds: int) -> str:
    """Return ``30s``, ``2m``, ``1h`` or ``1d`` for a step in seconds."""
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@dataclass(frozen=True)
class OutputQuery:
    """What to chart: the sum of ``field`` per ``step_s`` over the ``since_s`` seconds up to ``until``
    (default: now), on rows whose tag ``tag[0]`` is ``tag[1]``, with the ``compare`` periods overlaid."""

    field: str
    since_s: int = 900
    step_s: int | None = None
    until: datetime | None = None
    tag: tuple[str, str] | None = None
    compare: tuple[str, ...] = ()

    def end(self) -> datetime:
        """Return the end of the range (``until``, or now), in UTC, to the second."""
        when = self.until or datetime.now(UTC)
        when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
        return when.replace(microsecond=0)

    def step(self) -> int:
        """Return the step in seconds (given, or :func:`default_step`)."""
        return self.step_s or default_step(self.since_s)


@dataclass(frozen=True)
class Series:
    """One period's points: ``label`` ("now", "D-1", "D-7"), ``offset_s`` back from now, and (time, value)
    pairs, oldest first, one per step that has rows, with times moved onto the current period (a D-1
    point of 10:00 yesterday is at 10:00 today) so that the periods overlay."""

    label: str
    offset_s: int
    points: list[tuple[datetime, float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Return the series as JSON-able values (times in ISO 8601, UTC, with Z)."""
        return {
            "label": self.label,
            "offset_s": self.offset_s,
            "points": [[iso(t), v] for t, v in self.points],
        }


@dataclass(frozen=True)
class Output:
    """The series of a query: ``source`` says what they were read from (a measurement, table or index, for
    people) and ``server`` where (a URL, or host:port/database)."""

    dagger: str
    field: str
    step_s: int
    start: datetime
    end: datetime
    tag: tuple[str, str] | None
    source: str
    server: str
    series: list[Series]

    def to_dict(self) -> dict[str, Any]:
        """Return the output as JSON-able values."""
        return {
            "dagger": self.dagger,
            "field": self.field,
            "aggregate": "sum",
            "step_s": self.step_s,
            "start": iso(self.start),
            "end": iso(self.end),
            "tag": {"key": self.tag[0], "value": self.tag[1]} if self.tag else None,
            "source": self.source,
            "server": self.server,
            "series": [s.to_dict() for s in self.series],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Output:
        """Return the output that :meth:`to_dict` made (what the server sends a client)."""
        tag = d.get("tag")
        return cls(
            dagger=d["dagger"],
            field=d["field"],
            step_s=int(d["step_s"]),
            start=parse_iso(d["start"]),
            end=parse_iso(d["end"]),
            tag=(tag["key"], tag["value"]) if tag else None,
            source=d["source"],
            server=d["server"],
            series=[
                Series(s["label"], int(s["offset_s"]), [(parse_iso(t), float(v)) for t, v in s["points"]])
                for s in d["series"]
            ],
        )

    def rows(self) -> list[tuple[datetime, list[float | None]]]:
        """Return (time, [value of each series or None]) for every time that any series has, in order."""
        values = [dict(s.points) for s in self.series]
        times = sorted({t for s in self.series for t, _ in s.points})
        return [(t, [v.get(t) for v in values]) for t in times]


def iso(when: datetime) -> str:
    """Return a UTC ISO 8601 time with Z."""
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_iso(text: str, what: str = "until") -> datetime:
    """Return the UTC time of an ISO 8601 text that :func:`iso` wrote. Raises OutputError for a text that is
    not one, or a time before 1970 or after 9999 (``what`` names the field)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except (ValueError, OverflowError):
        when = None
    if when is None or not 1970 <= when.year < 9999:
        raise OutputError(
            f"{what} {text[:40]!r} is not an ISO 8601 time between 1970 and 9999",
            hint="e.g. 2026-01-31T10:00:00Z",
        )
    return when


def shift(points: list[tuple[datetime, float]], seconds: int) -> list[tuple[datetime, float]]:
    """Return ``points`` with each time moved ``seconds`` later."""
    return [(t + timedelta(seconds=seconds), v) for t, v in points]
