"""InfluxQL reads for the Atlas: which measurements hold S2 cells, which windows have data, and the
aggregates of every cell in one window.

A dagger's Influx sink writes one point per window and group: the point's time is the window's
end (``window_timestamp``), ``tag_*`` columns are tags (``tag_s2id`` holds the *signed* decimal S2
cell id, as ``S2Id`` returns it) and the other columns are fields. The Atlas reads such a
measurement through InfluxDB 1.x's ``/query`` API with ``epoch=ms``.

Windows are left-open and right-closed, ``(end - size, end]``, so a window of 5 minutes ending at
08:05 holds the points of the one-minute windows that end at 08:01 … 08:05, and window ends are
multiples of the size since the Unix epoch (UTC).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

import numpy as np
import pandas as pd
import requests

from job.functions.s2 import from_decimal_strings
from web_atlas.errors import AtlasError
from web_atlas.settings import AtlasSettings

Aggregate = Literal["auto", "sum", "mean", "max", "min", "last"]
AGGREGATES: Final[tuple[Aggregate, ...]] = ("auto", "sum", "mean", "max", "min", "last")
"""How a cell's points in a window are combined; ``auto`` sums integer fields (counts) and averages
float fields (averages, ratios), which is what each kind of dagger column usually means."""

#: Tag keys taken as the S2 cell id, best first; after these, any tag whose name contains "s2".
S2_TAG_NAMES: Final = ("tag_s2id", "s2id", "tag_s2_id", "s2_id", "tag_s2", "s2")
NUMERIC_FIELD_TYPES: Final = frozenset({"float", "integer", "unsigned"})
MAX_TAG_VALUES: Final = 1000

_DECIMAL_ID = re.compile(r"^-?\d{1,20}$")


def quote_ident(name: str) -> str:
    """Return ``name`` as a double-quoted InfluxQL identifier (backslashes and quotes escaped)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def quote_literal(value: str) -> str:
    """Return ``value`` as a single-quoted InfluxQL string literal (backslashes and quotes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def pick_s2_tag(tag_keys: Iterable[str]) -> str | None:
    """Return the tag key that holds S2 cell ids (see :data:`S2_TAG_NAMES`), or None when there is none."""
    keys = list(tag_keys)
    lowered = {k.lower(): k for k in keys}
    for name in S2_TAG_NAMES:
        if name in lowered:
            return lowered[name]
    return next((k for k in keys if "s2" in k.lower()), None)


def window_end_ms(time_ms: int, size_s: int) -> int:
    """Return the end of the ``size_s`` window that holds a point at ``time_ms`` (``(end - size, end]``)."""
    size_ms = size_s * 1000
    return math.ceil(time_ms / size_ms) * size_ms


@dataclass(frozen=True)
class MeasurementInfo:
    """A measurement the Atlas can draw: its S2 tag, its other tags and its numeric fields (integer
    fields first, then float fields, each in InfluxDB's order); ``float_fields`` are the float ones."""

    name: str
    s2_tag: str
    tags: tuple[str, ...]
    fields: tuple[str, ...]
    float_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellQuery:
    """The aggregates of each cell over the points with ``start_ms < time <= end_ms``.

    ``filters`` keeps only points whose tag equals the value; every other tag is combined with
    ``aggregate`` (so with no filter on ``tag_vehicle_type`` the cell's bookings are summed over
    vehicle types, and over the one-minute windows inside a longer window). With ``"auto"`` the
    ``mean_fields`` are averaged and the other fields summed.
    """

    measurement: str
    s2_tag: str
    fields: tuple[str, ...]
    start_ms: int
    end_ms: int
    aggregate: Aggregate = "auto"
    filters: tuple[tuple[str, str], ...] = field(default=())
    mean_fields: tuple[str, ...] = field(default=())

    def aggregate_of(self, name: str) -> str:
        """Return the InfluxQL function that combines field ``name`` (``sum``, ``mean``, ...)."""
        if self.aggregate == "auto":
            return "mean" if name in self.mean_fields else "sum"
        return self.aggregate

    def influxql(self) -> str:
        """Return the InfluxQL statement.

        Raises:
            AtlasError: no field is asked for, the aggregate is unknown or the range is empty.
        """
        if not self.fields:
            raise AtlasError(f"no field of {self.measurement!r} to read")
        if self.aggregate not in AGGREGATES:
            raise AtlasError(f"aggregate {self.aggregate!r} is not one of {', '.join(AGGREGATES)}")
        if self.end_ms <= self.start_ms:
            raise AtlasError(f"empty time range: end {self.end_ms} is not after start {self.start_ms}")
        select = ", ".join(
            f"{self.aggregate_of(f)}({quote_ident(f)}) AS {quote_ident(f)}" for f in self.fields
        )
        where = [f"time > {self.start_ms}ms", f"time <= {self.end_ms}ms"]
        where += [f"{quote_ident(tag)} = {quote_literal(value)}" for tag, value in self.filters]
        return (
            f"SELECT {select} FROM {quote_ident(self.measurement)} WHERE {' AND '.join(where)} "
            f"GROUP BY {quote_ident(self.s2_tag)}"
        )

    def shifted(self, seconds: int) -> CellQuery:
        """Return the same query ``seconds`` earlier (a positive number goes back in time)."""
        return replace(self, start_ms=self.start_ms - seconds * 1000, end_ms=self.end_ms - seconds * 1000)


class InfluxReader:
    """Reads a dagger's output from InfluxDB 1.x with InfluxQL (``GET /query``, ``epoch=ms``)."""

    def __init__(self, settings: AtlasSettings, session: requests.Session | None = None) -> None:
        self.settings = settings
        self.session = session or requests.Session()
        if settings.username is not None:
            password = settings.password.get_secret_value() if settings.password is not None else ""
            self.session.auth = (settings.username, password)

    # -- raw queries -----------------------------------------------------------------------------

    def query(self, q: str) -> list[dict[str, Any]]:
        """Run InfluxQL ``q`` on the database; return the series of every result (``[]`` when none).

        Raises:
            AtlasError: InfluxDB cannot be reached, refuses the credentials, or reports an error
                for the statement (the message quotes the statement and InfluxDB's reason).
        """
        url = f"{self.settings.influx_url}/query"
        params = {"db": self.settings.database, "q": q, "epoch": "ms"}
        try:
            resp = self.session.get(url, params=params, timeout=self.settings.timeout_s)
        except requests.RequestException as exc:
            raise AtlasError(
                f"InfluxDB at {self.settings.influx_url} cannot be reached: {type(exc).__name__}",
                hint="start it with `daggers up`, or pass --influx URL to daggers atlas",
            ) from None
        if resp.status_code in (401, 403):
            raise AtlasError(
                f"InfluxDB at {self.settings.influx_url} refused the credentials (HTTP {resp.status_code})",
                hint="set DAGGERS_INFLUX_USERNAME and DAGGERS_INFLUX_PASSWORD",
            )
        try:
            body: dict[str, Any] = resp.json()
        except ValueError:
            body = {}
        errors = [body.get("error")] + [r.get("error") for r in body.get("results", [])]
        reasons = [e for e in errors if e]
        if resp.status_code >= 400 or reasons:
            reason = "; ".join(reasons) or f"HTTP {resp.status_code}"
            hint = (
                f"is {self.settings.database!r} the database the dagger writes to? (--db)"
                if "database not found" in reason
                else None
            )
            raise AtlasError(f"InfluxDB rejected {q!r}: {reason}", hint=hint)
        return [s for r in body.get("results", []) for s in r.get("series", []) or []]

    # -- schema ----------------------------------------------------------------------------------

    def measurements(self) -> list[str]:
        """Return the names of the measurements in the database, sorted."""
        return sorted(v[0] for s in self.query("SHOW MEASUREMENTS") for v in s.get("values", []))

    def describe(self, measurement: str) -> MeasurementInfo | None:
        """Return the S2 tag, other tags and numeric fields of ``measurement``; None without an S2 tag
        or without a numeric field."""
        m = quote_ident(measurement)
        tag_keys = [v[0] for s in self.query(f"SHOW TAG KEYS FROM {m}") for v in s.get("values", [])]
        s2_tag = pick_s2_tag(tag_keys)
        typed = [
            (v[0], v[1])
            for s in self.query(f"SHOW FIELD KEYS FROM {m}")
            for v in s.get("values", [])
            if v[1] in NUMERIC_FIELD_TYPES
        ]
        # Counts (integers) first: they are what a city head looks at first (bookings, drivers).
        fields = [name for name, kind in typed if kind != "float"] + [
            name for name, kind in typed if kind == "float"
        ]
        if s2_tag is None or not fields:
            return None
        return MeasurementInfo(
            measurement,
            s2_tag,
            tuple(k for k in tag_keys if k != s2_tag),
            tuple(dict.fromkeys(fields)),
            tuple(dict.fromkeys(name for name, kind in typed if kind == "float")),
        )

    def databases(self) -> list[str]:
        """Return the names of the databases on the server, sorted."""
        return sorted(v[0] for s in self.query("SHOW DATABASES") for v in s.get("values", []))

    def s2_measurements(self) -> list[MeasurementInfo]:
        """Return every measurement of the database that has an S2 tag and a numeric field.

        Raises:
            AtlasError: the database does not exist (the message lists those that do), or as :meth:`query`.
        """
        known = self.databases()
        if self.settings.database not in known:
            shown = ", ".join(d for d in known if not d.startswith("_")) or "none"
            raise AtlasError(
                f"database not found: {self.settings.database} (databases at "
                f"{self.settings.influx_url}: {shown})",
                hint="pass the database the dagger's sink writes to with --db",
            )
        infos = (self.describe(name) for name in self.measurements())
        return [info for info in infos if info is not None]

    def tag_values(self, measurement: str, tag: str, limit: int = MAX_TAG_VALUES) -> list[str]:
        """Return up to ``limit`` values of ``tag`` in ``measurement``, sorted."""
        q = f"SHOW TAG VALUES FROM {quote_ident(measurement)} WITH KEY = {quote_ident(tag)} LIMIT {int(limit)}"
        return sorted({str(v[1]) for s in self.query(q) for v in s.get("values", [])})

    # -- time ------------------------------------------------------------------------------------

    def last_time_ms(self, measurement: str, field_name: str) -> int | None:
        """Return the time (epoch ms) of the newest point of ``measurement``, or None when it is empty."""
        series = self.query(f"SELECT last({quote_ident(field_name)}) FROM {quote_ident(measurement)}")
        values = [v for s in series for v in s.get("values", [])]
        return int(values[0][0]) if values else None

    def windows(self, measurement: str, field_name: str, size_s: int, span_s: int, end_ms: int) -> list[int]:
        """Return the ends (epoch ms, ascending) of the ``size_s`` windows in ``(end_ms - span_s, end_ms]``
        that hold at least one point.

        ``end_ms`` should be a window end (see :func:`window_end_ms`).
        """
        if size_s <= 0 or span_s <= 0:
            raise AtlasError(f"window size {size_s} s and span {span_s} s must be positive")
        start_ms = end_ms - span_s * 1000
        # Buckets start 1 ns after a multiple of the size: (k*size, (k+1)*size] in our terms.
        q = (
            f"SELECT count({quote_ident(field_name)}) FROM {quote_ident(measurement)} "
            f"WHERE time > {start_ms}ms AND time <= {end_ms}ms GROUP BY time({int(size_s)}s, 1ns) fill(none)"
        )
        size_ms = size_s * 1000
        ends = {
            (int(v[0]) // size_ms) * size_ms + size_ms for s in self.query(q) for v in s.get("values", [])
        }
        return sorted(e for e in ends if start_ms < e <= end_ms)

    # -- cells -----------------------------------------------------------------------------------

    def cells(self, query: CellQuery) -> pd.DataFrame:
        """Return one row per cell: ``cell`` (signed decimal id, as in InfluxDB), ``id`` (uint64) and
        one float column per field (NaN where a cell has no value).

        Tag values that are not a decimal 64-bit integer are left out. Rows are sorted by ``id``.

        Raises:
            AtlasError: as :meth:`query`.
        """
        return cells_frame(self.query(query.influxql()), query.s2_tag, query.fields)


def cells_frame(series: Sequence[dict[str, Any]], s2_tag: str, fields: Sequence[str]) -> pd.DataFrame:
    """Return the per-cell frame of :meth:`InfluxReader.cells` from InfluxDB's ``series`` (GROUP BY s2 tag)."""
    cells: list[str] = []
    rows: list[list[Any]] = []
    for s in series:
        cell = str((s.get("tags") or {}).get(s2_tag, "")).strip()
        values = s.get("values") or []
        if not values or not _DECIMAL_ID.match(cell):
            continue
        columns = s.get("columns", [])
        row = dict(zip(columns, values[0], strict=False))
        cells.append(cell)
        rows.append([row.get(f) for f in fields])
    data = (
        np.array(rows, dtype=np.float64).reshape(len(rows), len(fields))
        if rows
        else np.empty((0, len(fields)), dtype=np.float64)
    )
    try:
        ids = from_decimal_strings(np.array(cells, dtype=str)) if cells else np.empty(0, np.uint64)
    except ValueError:  # a 20-digit number above 2**64: drop the rows that do not parse one by one
        keep = [i for i, c in enumerate(cells) if -(1 << 63) <= int(c) < (1 << 64)]
        cells, data = [cells[i] for i in keep], data[keep]
        ids = from_decimal_strings(np.array(cells, dtype=str)) if cells else np.empty(0, np.uint64)
    frame = pd.DataFrame({"cell": pd.Series(cells, dtype=object), "id": ids})
    for k, f in enumerate(fields):
        frame[f] = data[:, k]
    frame = frame[frame["id"] != 0]
    return frame.sort_values("id", kind="stable").reset_index(drop=True)


__all__ = [
    "AGGREGATES",
    "S2_TAG_NAMES",
    "Aggregate",
    "CellQuery",
    "InfluxReader",
    "MeasurementInfo",
    "cells_frame",
    "pick_s2_tag",
    "quote_ident",
    "quote_literal",
    "window_end_ms",
]
