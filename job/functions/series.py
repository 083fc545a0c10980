"""Time-series functions over per-row lists (LinearTrend, ExponentialMovingAverage, OutlierMad).

Each row carries a list of timestamps and a list of values (e.g. ``CollectArray`` of a windowed
subquery) and the start of its hop window. The work is vectorised across all rows of an Arrow batch:
lists are flattened once, every row is a group id, and group sums and medians come from numpy
(``bincount``, ``lexsort``), never a Python loop per row.

The semantics follow the original platform's Java functions; where Java would throw (an index out
of its window, a NULL in a list, lists of different lengths) these return NULL or skip the value, as
each function's docstring says.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

MS_PER_MINUTE = 60_000
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Points:
    """The flattened (timestamp, value) pairs of a batch of rows; ``row`` says whose each pair is."""

    row: IntArray
    ms: IntArray  # epoch milliseconds
    value: FloatArray
    rows: int
    ok: npt.NDArray[np.bool_]  # per row: both lists present and of equal length


def _epoch_ms(values: pa.Array) -> IntArray:
    """Return epoch milliseconds of a timestamp (or integer epoch ms) array, floored like Java's getTime()."""
    if not pa.types.is_timestamp(values.type):
        ms: IntArray = pc.fill_null(values.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        return ms
    unit = values.type.unit
    raw: IntArray = pc.fill_null(values.cast(pa.timestamp(unit)).cast(pa.int64()), 0).to_numpy(
        zero_copy_only=False
    )
    per_ms = {"s": 0, "ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    return raw * 1000 if per_ms == 0 else np.floor_divide(raw, per_ms)


def _as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def flatten(timestamps: pa.Array, values: pa.Array) -> Points:
    """Return the pairs of the two list columns; NULL values (and their timestamps) are left out."""
    timestamps, values = _as_array(timestamps), _as_array(values)
    n = len(timestamps)
    t_len = pc.fill_null(pc.list_value_length(timestamps), -1).to_numpy(zero_copy_only=False)
    v_len = pc.fill_null(pc.list_value_length(values), -2).to_numpy(zero_copy_only=False)
    ok = (t_len == v_len) & (t_len >= 0)
    if not ok.all():
        empty = pa.array([None] * n, type=timestamps.type)
        timestamps = pc.if_else(pa.array(ok), timestamps, empty)
        values = pc.if_else(pa.array(ok), values, pa.array([None] * n, type=values.type))
    flat_t = pc.list_flatten(timestamps)
    flat_v = pc.list_flatten(values)
    row = pc.list_parent_indices(timestamps).to_numpy(zero_copy_only=False).astype(np.int64)
    present = flat_v.is_valid().to_numpy(zero_copy_only=False) & flat_t.is_valid().to_numpy(
        zero_copy_only=False
    )
    ms = _epoch_ms(flat_t)
    vals = pc.fill_null(flat_v.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)
    return Points(row[present], ms[present], vals[present], n, ok)


def _scalar_column(values: pa.Array, kind: str) -> IntArray | FloatArray:
    """Return a per-row argument as numpy: epoch ms for ``kind='ms'``, else float64 with NaN for NULL."""
    values = _as_array(values)
    if kind == "ms":
        return _epoch_ms(values)
    floats: FloatArray = pc.fill_null(values.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    return floats


def _last_per_key(row: IntArray, key: IntArray) -> npt.NDArray[np.bool_]:
    """Return a mask keeping, for each (row, key), only its last occurrence (Java's set/put overwrite)."""
    if row.size == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort((np.arange(row.size), key, row))
    r, k = row[order], key[order]
    last = np.ones(row.size, dtype=bool)
    last[:-1] = (r[1:] != r[:-1]) | (k[1:] != k[:-1])
    keep = np.zeros(row.size, dtype=bool)
    keep[order[last]] = True
    return keep


def linear_trend(
    timestamps: pa.Array, values: pa.Array, hop_start: pa.Array, window_minutes: pa.Array
) -> pa.Array:
    """Return the least-squares slope (value per minute) of each row's per-minute series.

    Minute i of the window (0..window-1) holds the value whose timestamp is i whole minutes after
    ``hop_start`` (the last one when several fall in the same minute); minutes without a value count 0.
    Values outside the window are left out. NULL when an argument is NULL or the lists differ in
    length; NaN for a one-minute window (zero variance), as the original.
    """
    pts = flatten(timestamps, values)
    start = _scalar_column(hop_start, "ms")
    window = _scalar_column(window_minutes, "float")
    bad = (
        ~pts.ok
        | _as_array(hop_start).is_null().to_numpy(zero_copy_only=False)
        | np.isnan(window)
        | (window < 1)
    )
    w = np.where(bad, 1.0, np.floor(window))
    pos = np.trunc((pts.ms - start[pts.row]) / MS_PER_MINUTE).astype(np.int64)
    inside = (pos >= 0) & (pos < w[pts.row])
    keep = inside & _last_per_key(pts.row, pos)
    r, x, y = pts.row[keep], pos[keep].astype(np.float64), pts.value[keep]
    sum_y = np.bincount(r, weights=y, minlength=pts.rows)
    sum_xy = np.bincount(r, weights=x * y, minlength=pts.rows)
    sum_x = w * (w - 1) / 2
    sum_xx = (w - 1) * w * (2 * w - 1) / 6
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (sum_xy - sum_x * sum_y / w) / (sum_xx - sum_x * sum_x / w)
    return pa.array(slope, pa.float64(), mask=bad)


def exponential_moving_average(
    timestamps: pa.Array, values: pa.Array, hop_start: pa.Array, window_minutes: pa.Array, alpha: pa.Array
) -> pa.Array:
    """Return each row's exponential moving average of per-minute values.

    A value ``m`` whole minutes after ``hop_start`` has position ``p = window - 1 - m`` (the newest
    minute is 0); the result is ``Σ v·α·(1-α)^p``, except the oldest position (``window - 1``) which
    weighs ``(1-α)^p``. Of several values with one position the last counts. NULL when an argument
    is NULL or the lists differ in length.
    """
    pts = flatten(timestamps, values)
    start = _scalar_column(hop_start, "ms")
    window = _scalar_column(window_minutes, "float")
    a = _scalar_column(alpha, "float")
    bad = (
        ~pts.ok
        | _as_array(hop_start).is_null().to_numpy(zero_copy_only=False)
        | np.isnan(window)
        | np.isnan(a)
    )
    minutes = np.trunc((pts.ms - start[pts.row]) / MS_PER_MINUTE)
    pos = window[pts.row] - 1.0 - minutes
    keep = _last_per_key(pts.row, minutes.astype(np.int64))
    r, p, v = pts.row[keep], pos[keep], pts.value[keep]
    ar, wr = a[r], window[r]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # rows that are NULL anyway
        decay = np.power(1.0 - ar, p)
        term = np.where(p == wr - 1.0, v * decay, v * ar * decay)
    order = np.lexsort((p, r))  # ascending position per row, the original's TreeMap order
    ema = np.zeros(pts.rows)
    np.add.at(ema, r[order], term[order])
    return pa.array(ema, pa.float64(), mask=bad)


def group_median(values: FloatArray, groups: IntArray, n: int) -> FloatArray:
    """Return the median of each group 0..n-1 (mean of the two middle values when even; NaN when empty)."""
    counts = np.bincount(groups, minlength=n)
    order = np.lexsort((values, groups))
    ordered = values[order]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    out = np.full(n, np.nan)
    has = counts > 0
    lo = starts[has] + (counts[has] - 1) // 2
    hi = starts[has] + counts[has] // 2
    out[has] = (ordered[lo] + ordered[hi]) / 2
    return out


def _mad(values: FloatArray, groups: IntArray, n: int) -> FloatArray:
    """Return each group's median absolute deviation from the group's own median."""
    med = group_median(values, groups, n)
    return group_median(np.abs(values - med[groups]), groups, n)


OUTLIER_TYPE = pa.list_(
    pa.struct(
        [
            pa.field("timestamp", pa.timestamp("us", tz="UTC")),
            pa.field("value", pa.float64()),
            pa.field("upper_bound", pa.float64()),
            pa.field("lower_bound", pa.float64()),
            pa.field("is_outlier", pa.bool_()),
        ]
    )
)


def outlier_mad(
    values: pa.Array,
    timestamps: pa.Array,
    window_start: pa.Array,
    window_minutes: pa.Array,
    observation_minutes: pa.Array,
    tolerance: pa.Array,
    outlier_percentage: pa.Array,
) -> pa.Array:
    """Return per row the observed points with their bounds and whether the window is an outlier.

    The median ``m`` splits the values into a lower (≤ m) and an upper (≥ m) half; each half's MAD
    (median absolute deviation from the half's median) scales the distance of the values on its side:
    a value is an outlier when it is observable (timestamp ≥ window_start + window - observation
    minutes) and ``|v - m| / mad > tolerance``. Bounds are ``m ± tolerance·mad``. ``is_outlier`` is
    the same for every point of the row: outliers are at least ``outlier_percentage`` % of the
    observable points. When a MAD is 0 no value is an outlier and the bounds are NULL (the original
    stops there too). Points come in time order; a row with no observable point gives an empty list.
    """
    pts = flatten(timestamps, values)
    n = pts.rows
    start = _scalar_column(window_start, "ms")
    length = _scalar_column(window_minutes, "float")
    observe = _scalar_column(observation_minutes, "float")
    tol = _scalar_column(tolerance, "float")
    pct = _scalar_column(outlier_percentage, "float")
    bad = (
        ~pts.ok
        | _as_array(window_start).is_null().to_numpy(zero_copy_only=False)
        | np.isnan(length)
        | np.isnan(observe)
        | np.isnan(tol)
        | np.isnan(pct)
    )
    r, v, ms = pts.row, pts.value, pts.ms
    med = group_median(v, r, n)
    low_side, high_side = v <= med[r], v >= med[r]
    mad_low = _mad(v[low_side], r[low_side], n)
    mad_high = _mad(v[high_side], r[high_side], n)
    usable = (mad_low > 0) & (mad_high > 0)  # NaN (an empty half) compares False too
    mad = np.where(low_side, mad_low[r], mad_high[r])
    threshold = start + (length - observe) * MS_PER_MINUTE
    observable = ms >= threshold[r]
    with np.errstate(divide="ignore", invalid="ignore"):
        outlier = observable & usable[r] & (np.abs(v - med[r]) / mad > tol[r])
    observed = np.bincount(r, weights=observable, minlength=n)
    outliers = np.bincount(r, weights=outlier, minlength=n)
    with np.errstate(divide="ignore", invalid="ignore"):
        flagged = outliers * 100.0 / observed >= pct
    keep = observable & ~bad[r]
    order = np.lexsort((ms, r))
    order = order[keep[order]]
    rows = r[order]
    counts = np.bincount(rows, minlength=n)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    upper = med[rows] + tol[rows] * mad[order]
    lower = med[rows] - tol[rows] * mad[order]
    no_bounds = ~usable[rows]
    struct = pa.StructArray.from_arrays(
        [
            pa.array(ms[order] * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array(v[order], pa.float64()),
            pa.array(upper, pa.float64(), mask=no_bounds),
            pa.array(lower, pa.float64(), mask=no_bounds),
            pa.array(flagged[rows], pa.bool_()),
        ],
        fields=list(OUTLIER_TYPE.value_type),
    )
    return pa.ListArray.from_arrays(pa.array(offsets), struct, type=OUTLIER_TYPE, mask=pa.array(bad))
