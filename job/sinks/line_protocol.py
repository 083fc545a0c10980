"""Result rows → InfluxDB line protocol, following the original platform's conventions.

* ``window_timestamp`` is the point's time;
* a ``tag_*`` column is a tag that keeps its prefix (``tag_s2id``);
* a ``label_*`` column is a tag without the prefix (``label_city`` → ``city``);
* every other column is a field; NULLs are left out, and a row with no field left is skipped.

The precision is the coarsest of s/ms/us that holds every timestamp of the batch exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TIME_COLUMN = "window_timestamp"


def _escape_key(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _escape_measurement(text: str) -> str:
    return text.replace("\\", "\\\\").replace(",", "\\,").replace(" ", "\\ ")


@dataclass(frozen=True)
class Encoded:
    """The lines of one batch (an Arrow string array, one line per point, each ending in a newline), the
    precision they use, and how many rows were left out."""

    text: pa.LargeStringArray
    precision: str
    skipped: int

    def __len__(self) -> int:
        return len(self.text)

    @property
    def lines(self) -> list[str]:
        """The lines as Python strings, without their newlines."""
        return [line[:-1] for line in self.text.to_pylist()]

    def bodies(self, size: int) -> Iterator[bytes]:
        """Yield request bodies of at most ``size`` lines each, in order (sliced out of one buffer: no
        per-line Python)."""
        if len(self.text) == 0:
            return
        offsets = np.frombuffer(self.text.buffers()[1], np.int64)[
            self.text.offset : self.text.offset + len(self.text) + 1
        ]
        data = self.text.buffers()[2]
        assert data is not None
        for start in range(0, len(self.text), max(size, 1)):
            stop = min(start + size, len(self.text))
            yield data[int(offsets[start]) : int(offsets[stop])].to_pybytes()


_NULL = pa.scalar(None, pa.large_string())


def _strings(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Return ``col`` as one large-string array (chunks combined)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col.cast(pa.large_string())


def _large(part: pa.Array | str) -> pa.Array | pa.Scalar:
    return pa.scalar(part, pa.large_string()) if isinstance(part, str) else part


def _join(parts: list[pa.Array | str], sep: str) -> pa.Array:
    """Join strings element-wise with ``sep``; a null part makes a null."""
    return pc.binary_join_element_wise(*map(_large, parts), _large(sep))


def _present(parts: list[pa.Array]) -> pa.Array:
    """Concatenate the parts that are not null, element-wise ("" where all are). (Arrow 26's
    ``null_handling="skip"`` drops the rows where every part is null, so it is not used.)"""
    return _join([pc.fill_null(p, _large("")) for p in parts], "")


def _concat(*parts: pa.Array | str) -> pa.Array:
    """Concatenate strings element-wise; a null part makes a null."""
    return _join(list(parts), "")


def _escaped(values: pa.Array, pairs: tuple[tuple[str, str], ...]) -> pa.Array:
    for old, new in pairs:
        values = pc.replace_substring(values, old, new)
    return values


_KEY_ESCAPES = (("\\", "\\\\"), (",", "\\,"), ("=", "\\="), (" ", "\\ "))
_STRING_ESCAPES = (("\\", "\\\\"), ('"', '\\"'))


def _tag_values(col: pa.ChunkedArray) -> pa.Array:
    """Escaped tag values; an empty or null value is null (the tag is left out)."""
    values = _strings(col)
    values = pc.if_else(pc.equal(values, _large("")), _NULL, values)
    return _escaped(values, _KEY_ESCAPES)


def _field_values(col: pa.ChunkedArray) -> pa.Array:
    """Field values as line protocol writes them; null where the field is left out."""
    t = col.type
    if pa.types.is_boolean(t):
        return pc.if_else(col, _large("true"), _large("false"))
    if pa.types.is_integer(t):
        return _concat(_strings(col), "i")
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        floats = col.cast(pa.float64())
        text = _strings(pc.if_else(pc.is_finite(floats), floats, pa.scalar(None, pa.float64())))
        whole = pc.match_substring_regex(
            text, r"^-?[0-9]+$"
        )  # Arrow writes 7.0 as "7"; keep it a float's text
        return pc.if_else(whole, _concat(text, ".0"), text)
    if pa.types.is_timestamp(t):
        micros = col.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64())
        valid = pc.is_valid(micros).to_numpy(zero_copy_only=False)
        millis = pa.array(np.floor_divide(micros.fill_null(0).to_numpy(), 1000), mask=~valid)
        return _concat(_strings(millis), "i")
    return _concat('"', _escaped(_strings(col), _STRING_ESCAPES), '"')


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
    """Return the line protocol of ``table``'s rows, one line per row that has a field (vectorised: Arrow
    string kernels, no per-row Python)."""
    names = table.column_names
    n = table.num_rows
    tag_cols = [c for c in names if c.startswith(("tag_", "label_"))]
    field_cols = [c for c in names if c != TIME_COLUMN and c not in tag_cols]
    has_time_col = TIME_COLUMN in names
    if has_time_col:
        times, valid, precision = _times(table[TIME_COLUMN])
    else:
        times, valid, precision = np.zeros(n, np.int64), np.ones(n, bool), "s"
    if n == 0 or not field_cols:
        return Encoded(pa.array([], pa.large_string()), precision, n)
    parts = [_concat(f",{_escape_key(c)}=", _field_values(table[c])) for c in field_cols]
    fields = pc.utf8_slice_codeunits(_present(parts), 1)  # without the first comma
    keep = valid & pc.not_equal(fields, _large("")).fill_null(False).to_numpy(zero_copy_only=False)
    head = _escape_measurement(measurement)
    ordered = sorted(tag_cols, key=lambda c: c.removeprefix("label_") if c.startswith("label_") else c)
    tags = [
        _concat(
            f",{_escape_key(c.removeprefix('label_') if c.startswith('label_') else c)}=",
            _tag_values(table[c]),
        )
        for c in ordered
    ]
    tag_text = _present(tags) if tags else ""
    line = (
        _concat(head, tag_text, " ", fields, " ", _strings(pa.array(times)), "\n")
        if has_time_col
        else _concat(head, tag_text, " ", fields, "\n")
    )
    kept = pc.filter(line, pa.array(keep)) if not keep.all() else line
    if isinstance(kept, pa.ChunkedArray):
        kept = kept.combine_chunks()
    return Encoded(kept, precision, int(n - keep.sum()))
