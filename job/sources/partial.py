"""The source's first step of a query's aggregation: a task's records, one row per window and key.

:mod:`job.sql.partial` says when a query lets its source aggregate first and what: per TUMBLE window and the
query's keys, the distinct values of string columns, each group's as one DistinctCount buffer (the values'
UTF-8 bytes, each after its length as a varint, sorted by length and then bytes as unsigned numbers, without
repeats: the layout of ``job/spark/jvm/DistinctCount.java``), and the group's latest event time. Grouping is
pyarrow's hash aggregation; the buffers are built by one compiled pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from job.sources.config import PARTIAL_RECORDS

_WINDOW = "__dagger_window"
#: The column of the rows handed over that holds how many records each row stands for (the query's frame
#: adds them up per micro-batch: job.query.runner.stream_frame).
RECORDS = PARTIAL_RECORDS


def schema(decoded: pa.Schema, keys: Sequence[str], time: str, distinct: dict[str, str]) -> pa.Schema:
    """The schema of the rows handed over: the keys and the event time as decoded, each buffer column, then
    the records each row stands for."""
    return pa.schema(
        [decoded.field(k) for k in keys]
        + [decoded.field(time)]
        + [pa.field(buffer, pa.binary()) for buffer in distinct.values()]
        + [pa.field(RECORDS, pa.int64())]
    )


def aggregate(
    batches: Sequence[pa.RecordBatch],
    keys: Sequence[str],
    time: str,
    window_ms: int,
    distinct: dict[str, str],
) -> pa.RecordBatch | None:
    """Return one row per TUMBLE window of ``window_ms`` and ``keys`` of ``batches`` (None for no rows): the keys,
    the latest ``time`` (a timestamp, or an integer of epoch ms), for each ``distinct`` column its buffer
    column, and the group's records (:data:`RECORDS`). A NULL key or time is a group of its own; NULL values
    are left out of the buffers."""
    rows = [b for b in batches if b.num_rows]
    if not rows:
        return None
    table = pa.Table.from_batches(rows).combine_chunks()
    stamps = table.column(time)
    ticks = pc.cast(stamps, pa.int64())
    per_window = window_ms  # an integer time is in epoch ms
    if pa.types.is_timestamp(stamps.type):
        if stamps.type.unit == "s":
            ticks = pc.multiply(ticks, 1_000)
        else:
            per_window = window_ms * {"ms": 1, "us": 1_000, "ns": 1_000_000}[stamps.type.unit]
    window = _floor_div(ticks, per_window)
    grouped = table.append_column(_WINDOW, window).group_by([*keys, _WINDOW], use_threads=False)
    everything = pc.CountOptions(mode="all")
    out = grouped.aggregate(
        [(time, "max"), (_WINDOW, "count", everything)] + [(c, "distinct") for c in distinct]
    )
    arrays = [out.column(k) for k in keys] + [out.column(f"{time}_max").cast(stamps.type)]
    arrays += [_buffers(out.column(f"{c}_distinct").combine_chunks()) for c in distinct]
    arrays.append(out.column(f"{_WINDOW}_count").cast(pa.int64()))
    names = [*keys, time, *distinct.values(), RECORDS]
    rows = pa.RecordBatch.from_arrays([_one_chunk(a) for a in arrays], names=names)
    # in key order: Spark's map-side aggregation sorts its rows by key, which sorted runs make cheap
    return rows.take(pc.sort_indices(rows, [(k, "ascending") for k in [*keys, time]]))


def _floor_div(values: pa.ChunkedArray | pa.Array, divisor: int) -> pa.Array:
    """``floor(values / divisor)`` of int64s, NULL for NULL (numpy's floor division rounds down)."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    nulls = array.is_null()
    raw = array.fill_null(0).to_numpy()
    return pa.array(raw // divisor, pa.int64(), mask=nulls.to_numpy(zero_copy_only=False))


def _one_chunk(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _buffers(lists: pa.Array) -> pa.Array:
    """Each list of distinct strings (or binaries) → its DistinctCount buffer; a NULL list (no value) → empty."""
    values = lists.values
    width: type[np.signedinteger[Any]]
    if pa.types.is_large_string(values.type) or pa.types.is_large_binary(values.type):
        values = values.cast(pa.large_binary())
        width = np.int64
    else:
        values = values.cast(pa.binary())
        width = np.int32
    list_offsets = lists.offsets.to_numpy().astype(np.int64)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    value_offsets = np.frombuffer(values.buffers()[1], dtype=width)[
        values.offset : values.offset + len(values) + 1
    ]
    data = values.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, dtype=np.uint8)
    ends = np.empty(len(lists) + 1, dtype=np.int64)
    out = _build(raw, value_offsets.astype(np.int64), valid, list_offsets, ends)
    return pa.Array.from_buffers(
        pa.binary(), len(lists), [None, pa.py_buffer(ends.astype(np.int32)), pa.py_buffer(out)]
    )


@njit(cache=True, nogil=True)
def _compare(data: np.ndarray, offsets: np.ndarray, x: int, y: int) -> int:  # pragma: no cover - compiled
    lx, ly = offsets[x + 1] - offsets[x], offsets[y + 1] - offsets[y]
    if lx != ly:
        return 1 if lx > ly else -1
    for t in range(lx):
        bx, by = data[offsets[x] + t], data[offsets[y] + t]
        if bx != by:
            return 1 if bx > by else -1
    return 0


@njit(cache=True, nogil=True)
def _build(
    data: np.ndarray, offsets: np.ndarray, valid: np.ndarray, lists: np.ndarray, ends: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """The buffer of each list (values ``lists[g]`` to ``lists[g + 1]``), back to back; ``ends[g + 1]`` is
    where list ``g``'s ends."""
    total = 0
    for k in range(len(offsets) - 1):
        total += offsets[k + 1] - offsets[k] + 5
    out = np.empty(total, np.uint8)
    o = 0
    ends[0] = 0
    for g in range(len(lists) - 1):
        a, b = lists[g], lists[g + 1]
        idx = np.empty(b - a, np.int64)
        m = 0
        for k in range(a, b):
            if valid[k]:
                idx[m] = k
                m += 1
        for i in range(1, m):  # insertion sort: a group holds a few values
            j = i
            while j > 0 and _compare(data, offsets, idx[j - 1], idx[j]) > 0:
                idx[j - 1], idx[j] = idx[j], idx[j - 1]
                j -= 1
        for i in range(m):
            x = idx[i]
            if i > 0 and _compare(data, offsets, idx[i - 1], x) == 0:
                continue
            n = offsets[x + 1] - offsets[x]
            v = n
            while v >= 128:
                out[o] = (v & 0x7F) | 0x80
                o += 1
                v >>= 7
            out[o] = v
            o += 1
            out[o : o + n] = data[offsets[x] : offsets[x] + n]
            o += n
        ends[g + 1] = o
    return out[:o]
