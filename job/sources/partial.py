"""The source's first step of a query's aggregation: a task's records, one row per window and key.

:mod:`job.sql.partial` says when a query lets its source aggregate first and what: per TUMBLE window and the
query's keys, the distinct values of string columns, each group's as one DistinctCount buffer (the values'
UTF-8 bytes, each after its length as a varint, sorted by length and then bytes as unsigned numbers, without
repeats: the layout of ``job/spark/jvm/DistinctCount.java``); the count, sum, least and greatest value of
numeric columns (NULLs left out); the group's latest event time and its records. Grouping is pyarrow's hash
aggregation, which also lists each group's rows in the order read; the buffers, counts, sums, least and
greatest values are computed by compiled passes over those lists, a group's values added in the order read
as Spark's own partial aggregation adds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from job.errors import DaggerError
from job.sources.config import PARTIAL_RECORDS

_WINDOW = "__dagger_window"
_ROW = "__dagger_row"
#: The column of the rows handed over that holds how many records each row stands for (the query's frame
#: adds them up per micro-batch: job.query.runner.stream_frame).
RECORDS = PARTIAL_RECORDS


def aggregate(
    batches: Sequence[pa.RecordBatch],
    keys: Sequence[str],
    time: str,
    window_ms: int,
    distinct: dict[str, str],
    aggregates: Sequence[Sequence[str]] = (),
    wrap: bool = False,
) -> pa.RecordBatch | None:
    """Return one row per TUMBLE window of ``window_ms`` and ``keys`` of ``batches`` (None for no rows): the keys,
    the latest ``time`` (a timestamp, or an integer of epoch ms), for each ``distinct`` column its buffer
    column, for each ``aggregates`` entry ``[function, column, output]`` (``count``, ``sum``, ``min`` or
    ``max`` of ``column``) its ``output`` column, and the group's records (:data:`RECORDS`). A NULL key or time
    is a group of its own; NULL values are left out of the buffers and the aggregates (a group without a value
    has a count of 0 and a NULL sum, least and greatest value).

    Raises DaggerError (``[ARITHMETIC_OVERFLOW]``, as Spark's ANSI sum) for a sum of integers past BIGINT's
    range, unless ``wrap`` (Spark's arithmetic without ANSI: the sum wraps around)."""
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
    table = table.append_column(_WINDOW, window)
    everything = pc.CountOptions(mode="all")
    wanted = [(time, "max"), (_WINDOW, "count", everything)] + [(c, "distinct") for c in distinct]
    if aggregates:  # each group's rows, in the order read
        table = table.append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        wanted.append((_ROW, "list"))
    out = table.group_by([*keys, _WINDOW], use_threads=False).aggregate(wanted)
    arrays = [out.column(k) for k in keys] + [out.column(f"{time}_max").cast(stamps.type)]
    arrays += [_buffers(out.column(f"{c}_distinct").combine_chunks()) for c in distinct]
    if aggregates:
        lists = out.column(f"{_ROW}_list").combine_chunks()
        members = lists.values.to_numpy()
        bounds = lists.offsets.to_numpy().astype(np.int64)
        partials = _partials(table, aggregates, members, bounds, wrap)
        arrays += [partials[(function, column)] for function, column, _ in aggregates]
    arrays.append(out.column(f"{_WINDOW}_count").cast(pa.int64()))
    names = [*keys, time, *distinct.values(), *(output for *_, output in aggregates), RECORDS]
    rows = pa.RecordBatch.from_arrays([_one_chunk(a) for a in arrays], names=names)
    # in key order: Spark's map-side aggregation sorts its rows by key, which sorted runs make cheap
    return rows.take(pc.sort_indices(rows, [(k, "ascending") for k in [*keys, time]]))


def _partials(
    table: pa.Table,
    aggregates: Sequence[Sequence[str]],
    members: np.ndarray,
    bounds: np.ndarray,
    wrap: bool,
) -> dict[tuple[str, str], pa.Array]:
    """``(function, column)`` → its value per group, for each of ``aggregates``; group ``g``'s rows are
    ``members[bounds[g]:bounds[g + 1]]``."""
    out: dict[tuple[str, str], pa.Array] = {}
    groups = len(bounds) - 1
    for column in dict.fromkeys(column for _, column, _ in aggregates):
        wanted = {function for function, c, _ in aggregates if c == column}
        array = _one_chunk(table.column(column))
        valid = (
            np.ones(len(array), np.bool_)
            if array.null_count == 0
            else array.is_valid().to_numpy(zero_copy_only=False)
        )
        count = np.zeros(groups, np.int64)
        if wanted == {"count"}:
            _count(valid, members, bounds, count)
            out[("count", column)] = pa.array(count, pa.int64())
            continue
        values = _values(array)
        least = np.zeros(groups, values.dtype)
        most = np.zeros(groups, values.dtype)
        if values.dtype.kind == "f":
            total: np.ndarray = np.zeros(groups, np.float64)
            _floats(values, valid, members, bounds, count, total, least, most)
        else:
            total = np.zeros(groups, np.int64)
            if _integers(values, valid, members, bounds, count, total, least, most) and not wrap:
                raise DaggerError(
                    f"the streaming query failed: [ARITHMETIC_OVERFLOW] overflow: SUM({column}) is past "
                    "BIGINT's range",
                    hint=f"sum a wider type: SUM(CAST({column} AS DECIMAL(38, 0)))",
                )
        empty = count == 0
        out[("count", column)] = pa.array(count, pa.int64())
        out[("sum", column)] = pa.array(
            total, pa.float64() if values.dtype.kind == "f" else pa.int64(), mask=empty
        )
        out[("min", column)] = pa.array(least, array.type, mask=empty)
        out[("max", column)] = pa.array(most, array.type, mask=empty)
    return out


def _values(array: pa.Array) -> np.ndarray:
    """The values of a numeric array as numpy, without a copy (what lies under a NULL is any number)."""
    width = np.dtype(array.type.to_pandas_dtype())
    data = array.buffers()[1]
    assert data is not None
    return np.frombuffer(data, dtype=width)[array.offset : array.offset + len(array)]


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


@njit(cache=True, nogil=True)
def _count(
    valid: np.ndarray, members: np.ndarray, bounds: np.ndarray, count: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``count[g]``: the valid values among group ``g``'s rows."""
    for g in range(len(bounds) - 1):
        c = 0
        for k in range(bounds[g], bounds[g + 1]):
            if valid[members[k]]:
                c += 1
        count[g] = c


@njit(cache=True, nogil=True)
def _integers(
    values: np.ndarray,
    valid: np.ndarray,
    members: np.ndarray,
    bounds: np.ndarray,
    count: np.ndarray,
    total: np.ndarray,
    least: np.ndarray,
    most: np.ndarray,
) -> bool:  # pragma: no cover - compiled
    """Per group ``g`` (rows ``members[bounds[g]:bounds[g + 1]]``) of integers: the count of its valid values,
    their sum as a BIGINT (wrapped around past its range), the least and the greatest; return whether a sum
    went past BIGINT's range on the way, as Spark's ANSI addition, value after value, would have found."""
    overflow = False
    for g in range(len(bounds) - 1):
        c = 0
        s = np.int64(0)
        for k in range(bounds[g], bounds[g + 1]):
            r = members[k]
            if not valid[r]:
                continue
            v = values[r]
            if c == 0:
                least[g] = v
                most[g] = v
            else:
                if v < least[g]:
                    least[g] = v
                if v > most[g]:
                    most[g] = v
            w = np.int64(v)
            t = np.int64(np.uint64(s) + np.uint64(w))  # unsigned: wraps around, never undefined
            if ((s ^ t) & (w ^ t)) < 0:  # both operands' signs differ from the result's
                overflow = True
            s = t
            c += 1
        count[g] = c
        total[g] = s
    return overflow


@njit(cache=True, nogil=True)
def _floats(
    values: np.ndarray,
    valid: np.ndarray,
    members: np.ndarray,
    bounds: np.ndarray,
    count: np.ndarray,
    total: np.ndarray,
    least: np.ndarray,
    most: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Per group of FLOATs or DOUBLEs: the count of its valid values, their sum as a DOUBLE (0.0 + each in
    turn, as Spark's SUM), the least and the greatest in Spark's order (NaN above every other number; of
    equal values the first stays)."""
    for g in range(len(bounds) - 1):
        c = 0
        s = 0.0
        for k in range(bounds[g], bounds[g + 1]):
            r = members[k]
            if not valid[r]:
                continue
            v = values[r]
            if c == 0:
                least[g] = v
                most[g] = v
            else:
                if not np.isnan(v) and (np.isnan(least[g]) or v < least[g]):
                    least[g] = v
                if not np.isnan(most[g]) and (np.isnan(v) or v > most[g]):
                    most[g] = v
            s += np.float64(v)
            c += 1
        count[g] = c
        total[g] = s
