"""Rows of both engines in one comparable form (standard library only: the Flink runner imports it too).

A value becomes JSON: a timestamp the text ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC (Flink's TIMESTAMP(3)
has no zone and is UTC here; Daggers' is zone-aware), a DECIMAL its text, a ROW or an array a list,
other values as they are. Rows compare as multisets: sorted by their JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def value(v: Any) -> Any:
    """Return ``v`` in the comparable JSON form."""
    if isinstance(v, datetime):
        return (v.astimezone(UTC) if v.tzinfo else v).strftime(TIME_FORMAT)
    if isinstance(v, date):
        return v.isoformat()
    if isinstance(v, bytes | bytearray):
        return "x'" + bytes(v).hex() + "'"
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, list | tuple):
        return [value(x) for x in v]
    if isinstance(v, dict):
        return {k: value(x) for k, x in v.items()}
    return v


def row(values: Sequence[Any]) -> list[Any]:
    """Return a row (a sequence of values) in the comparable form."""
    return [value(v) for v in values]


def type_name(text: str | None) -> str | None:
    """Return a column's type as both engines are compared on it: Flink's type text without NOT NULL or a time
    attribute's marker; every string type STRING, every timestamp TIMESTAMP (Spark's are all microseconds),
    a DECIMAL by its scale only (``DECIMAL(*, 2)``: the precision only bounds it, and the engines size it
    differently), BINARY/VARBINARY BYTES."""
    if text is None:
        return None
    t = text.replace(" NOT NULL", "").replace(" *ROWTIME*", "").replace(" *PROCTIME*", "").strip()
    head = t.split("(")[0].strip()
    if head in ("STRING", "VARCHAR", "CHAR"):
        return "STRING"
    if head.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    if head in ("BINARY", "VARBINARY", "BYTES"):
        return "BYTES"
    if head == "DECIMAL":
        scale = t[t.index("(") + 1 : t.rindex(")")].split(",")[1].strip() if "," in t else "0"
        return f"DECIMAL(*, {scale})"
    return t


def canonical(rows: Iterable[Sequence[Any]]) -> list[list[Any]]:
    """Return ``rows`` (already in the comparable form) sorted, so two multisets of rows compare with ``==``."""
    return sorted((list(r) for r in rows), key=lambda r: json.dumps(r, sort_keys=True))


def closed(rows: Iterable[Sequence[Any]], cut: str, marker: str) -> list[list[Any]]:
    """Return the rows that carry neither the closer ``marker`` (as a value) nor a time at or after ``cut``
    (a time in the comparable form): the rows both engines must have given."""

    def keep(r: Sequence[Any]) -> bool:
        for v in r:
            if v == marker:
                return False
            if isinstance(v, str) and len(v) == len(cut) and v[4:5] == "-" and v[10:11] == " " and v >= cut:
                return False
        return True

    return canonical(r for r in rows if keep(r))
