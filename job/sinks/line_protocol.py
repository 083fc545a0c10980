"""Result rows → InfluxDB line protocol, following the original platform's conventions.

* ``window_timestamp`` is the point's time;
* a ``tag_*`` column is a tag that keeps its prefix (``tag_s2id``);
* a ``label_*`` column is a tag without the prefix (``label_city`` → ``city``);
* every other column is a field; NULLs are left out, and a row with no field left is skipped.

The precision is the coarsest of s/ms/us that holds every timestamp of the batch exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TIME_COLUMN = "window_timestamp"


def _escape_key(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _escape_measurement(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace(" ", "\\ ")


def _escape_string_field(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Encoded:
    """Lines for one batch, the precision they use, and how many rows were left out."""

    lines: list[str]
    precision: str
    skipped: int


def _tag_values(col: pa.ChunkedArray) -> list[str | None]:
    values = col.cast(pa.string()) if not pa.types.is_string(col.type) else col
    return [None if v is None or v == "" else _escape_key(v) for v in values.to_pylist()]


def _field_values(col: pa.ChunkedArray) -> list[str | None]:
    t = col.type
    if pa.types.is_boolean(t):
        return [None if v is None else ("true" if v else "false") for v in col.to_pylist()]
    if pa.types.is_integer(t):
        return [None if v is None else f"{v}i" for v in col.to_pylist()]
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return [None if v is None or v != v or v in (float("inf"), float("-inf")) else repr(float(v))
                for v in col.to_pylist()]
    if pa.types.is_timestamp(t):
        micros = col.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64())
        return [None if v is None else f"{v // 1000}i" for v in micros.to_pylist()]
    values = col.cast(pa.string()) if not pa.types.is_string(t) else col
    return [None if v is None else _escape_string_field(v) for v in values.to_pylist()]


def _times(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, str]:
    micros = col.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    valid = pc.is_valid(micros).to_numpy(zero_copy_only=False)
    values = micros.fill_null(0).to_numpy()
    if not valid.any() or (values[valid] % 1_000_000 == 0).all():
        return values // 1_000_000, valid, "s"
    if (values[valid] % 1000 == 0).all():
        return values // 1000, valid, "ms"
    return values, valid, "u"


def encode(table: pa.Table, measurement: str) -> Encoded:
    """Return the line protocol of ``table``'s rows, one line per row that has a field."""
    names = table.column_names
    tag_cols = [n for n in names if n.startswith(("tag_", "label_"))]
    field_cols = [n for n in names if n != TIME_COLUMN and n not in tag_cols]
    tags = [(_escape_key(n.removeprefix("label_") if n.startswith("label_") else n), _tag_values(table[n]))
            for n in sorted(tag_cols, key=lambda n: n.removeprefix("label_") if n.startswith("label_") else n)]
    fields = [(_escape_key(n), _field_values(table[n])) for n in field_cols]
    if TIME_COLUMN in names:
        times, valid, precision = _times(table[TIME_COLUMN])
    else:
        times, valid, precision = np.zeros(table.num_rows, np.int64), np.zeros(table.num_rows, bool), "s"
    head = _escape_measurement(measurement)
    lines: list[str] = []
    skipped = 0
    has_time_col = TIME_COLUMN in names
    for i in range(table.num_rows):
        if has_time_col and not valid[i]:
            skipped += 1
            continue
        fs = ",".join(f"{k}={vals[i]}" for k, vals in fields if vals[i] is not None)
        if not fs:
            skipped += 1
            continue
        ts = "".join(f",{k}={vals[i]}" for k, vals in tags if vals[i] is not None)
        lines.append(f"{head}{ts} {fs} {times[i]}" if has_time_col else f"{head}{ts} {fs}")
    return Encoded(lines, precision, skipped)
