"""A spec's validation errors as the new-dagger form's user sees them: each named by the form field it is
about ("Name: …", "Topics: pick at least one topic"), not by a line of the YAML the form writes and the
user never sees."""

from __future__ import annotations

import re

#: A problem line of :func:`job.spec.format_validation`: ``source:LINE: field.path: message``.
_PROBLEM = re.compile(r"^[^\s:]+:\d+(?::\d+)?: (?P<path>[A-Za-z_][\w.\[\]]*): (?P<message>.*)$")

#: The form field of a spec path, by the path's start (the first that matches wins).
FIELDS: tuple[tuple[str, str], ...] = (
    ("name", "Name"),
    ("streams[0].topics", "Topics"),
    ("streams[0].proto_class", "Proto class"),
    ("streams[0].table", "Table name in the SQL"),
    ("streams[0].group", "Consumer group"),
    ("streams[0].timestamp_field", "Timestamp field"),
    ("streams[0].start_from", "Start from"),
    ("streams", "Topics"),
    ("sql", "Dagger SQL"),
    ("watermark_delay_ms", "Watermark delay (ms)"),
    ("parallelism", "Parallelism"),
    ("sinks[0].measurement", "Measurement"),
    ("sinks[0].database", "Database"),
    ("sinks", "Sink"),
    ("sink", "Sink"),
    ("isolation", "Isolation"),
    ("light", "Light"),
)


def field_of(path: str) -> str | None:
    """Return the form field's label of spec path ``path`` (``streams[0].topics`` → "Topics"); None when
    the form has no such field."""
    for prefix, label in FIELDS:
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return label
    return None


def _reworded(path: str, message: str) -> str:
    """Return pydantic's wording in the form's terms where it reads oddly there."""
    if path.endswith("topics") and "at least 1 item" in message:
        return "pick at least one topic"
    if "database" in message and path.startswith("sinks"):
        return "give the database to write to"
    return message


def form_problems(message: str) -> list[str] | None:
    """Return each problem of a spec error ``message`` as ``Field: what is wrong``; None when a line of it
    is not a problem of a form field (say it as it is then)."""
    problems = []
    for line in message.splitlines():
        match = _PROBLEM.match(line.strip())
        label = field_of(match["path"]) if match else None
        if match is None or label is None:
            return None
        if match["path"].startswith("sinks") and "database" in match["message"]:
            label = "Database"
        problems.append(f"{label}: {_reworded(match['path'], match['message'])}")
    return problems or None
