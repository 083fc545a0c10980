"""LinearTrend, ExponentialMovingAverage and OutlierMad, vectorised over Arrow batches, against per-row
Python written line by line from the original platform's Java (same summation order)."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from job.functions.series import exponential_moving_average, group_median, linear_trend, outlier_mad

H = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
TS = pa.list_(pa.timestamp("us", tz="UTC"))


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def java_linear_trend(times: list[datetime], values: list[float], hop: datetime, window: int) -> float:
    x = [float(i) for i in range(window)]
    y = [0.0] * window
    for t, v in zip(times, values, strict=True):
        pos = int((_ms(t) - _ms(hop)) / 60000)  # Java long division truncates
        if 0 <= pos < window:  # Java would throw; the vectorised function leaves it out
            y[pos] = v
    cov = sum(a * b for a, b in zip(x, y, strict=True)) - sum(x) * sum(y) / window
    var = sum(a * a for a in x) - sum(x) ** 2 / window
    return cov / var


def java_ema(times: list[datetime], values: list[float], hop: datetime, window: float, alpha: float) -> float:
    positions: dict[float, float] = {}
    for t, v in zip(times, values, strict=True):
        positions[window - 1.0 - float(int((_ms(t) - _ms(hop)) / 60000))] = v
    total = 0.0
    for pos in sorted(positions):
        v = positions[pos]
        total += v * math.pow(1 - alpha, pos) if pos == window - 1 else v * alpha * math.pow(1 - alpha, pos)
    return total


def _random_rows(rng: np.random.Generator, rows: int) -> list[tuple[list[datetime], list[float]]]:
    out = []
    for _ in range(rows):
        k = int(rng.integers(0, 12))
        minutes = rng.integers(-2, 12, k)  # some outside the window
        seconds = rng.integers(0, 60, k)
        times = [H + timedelta(minutes=int(m), seconds=int(s)) for m, s in zip(minutes, seconds, strict=True)]
        out.append((times, [float(v) for v in rng.integers(0, 50, k)]))
    return out


def test_linear_trend_matches_the_java_definition() -> None:
    rng = np.random.default_rng(5)
    rows = _random_rows(rng, 400)
    windows = [int(w) for w in rng.integers(2, 11, len(rows))]
    got = linear_trend(
        pa.array([t for t, _ in rows], TS),
        pa.array([v for _, v in rows]),
        pa.array([H] * len(rows), pa.timestamp("us", tz="UTC")),
        pa.array(windows),
    ).to_pylist()
    want = [java_linear_trend(t, v, H, w) for (t, v), w in zip(rows, windows, strict=True)]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_ema_matches_the_java_definition() -> None:
    rng = np.random.default_rng(6)
    rows = _random_rows(rng, 400)
    alphas = [float(a) for a in rng.choice([0.1, 0.25, 0.5, 0.9], len(rows))]
    got = exponential_moving_average(
        pa.array([t for t, _ in rows], TS),
        pa.array([v for _, v in rows]),
        pa.array([H] * len(rows), pa.timestamp("us", tz="UTC")),
        pa.array([10.0] * len(rows)),
        pa.array(alphas),
    ).to_pylist()
    want = [java_ema(t, v, H, 10.0, a) for (t, v), a in zip(rows, alphas, strict=True)]
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_nulls_and_mismatched_lists() -> None:
    hop = pa.array([H, None, H, H], pa.timestamp("us", tz="UTC"))
    times = pa.array([[H], [H], [H, H], None], TS)
    values = pa.array([[2.0, None][:1], [1.0], [1.0], [1.0]])
    assert linear_trend(times, values, hop, pa.array([3, 3, 3, 3])).to_pylist() == [
        pytest.approx(-1.0),
        None,
        None,
        None,
    ]
    values_with_null = pa.array([[None], [1.0], [1.0, 2.0], [1.0]])
    assert exponential_moving_average(
        times, values_with_null, hop, pa.array([3.0] * 4), pa.array([0.5] * 4)
    ).to_pylist() == [0.0, None, 0.5, None]


def test_group_median() -> None:
    values = np.array([5.0, 1.0, 3.0, 2.0, 8.0, 7.0])
    groups = np.array([0, 0, 0, 2, 2, 2])
    got = group_median(values, groups, 4)
    assert got[0] == 3.0 and got[2] == 7.0 and np.isnan(got[1]) and np.isnan(got[3])
    assert group_median(np.array([4.0, 1.0]), np.array([0, 0]), 1).tolist() == [2.5]


def java_outlier_mad(
    values: list[float],
    times: list[datetime],
    start: datetime,
    window: int,
    observe: int,
    tolerance: int,
    pct: int,
) -> list[tuple]:
    points = sorted(zip(times, values, strict=True), key=lambda p: p[0])
    threshold = _ms(start) + (window - observe) * 60000
    observable = [(t, v) for t, v in points if _ms(t) >= threshold]
    m = statistics.median(values)

    def mad(group: list[float]) -> float:
        med = statistics.median(group)
        return statistics.median([abs(g - med) for g in group])

    low, high = [v for v in values if v <= m], [v for v in values if v >= m]
    mads = (mad(low), mad(high)) if low and high else (0.0, 0.0)
    if 0.0 in mads:
        return [(t, v, None, None, pct <= 0) for t, v in observable]
    out, outliers = [], 0
    for t, v in observable:
        d = mads[0] if v <= m else mads[1]
        outliers += abs(v - m) / d > tolerance
        out.append((t, v, m + tolerance * d, m - tolerance * d))
    flag = bool(observable) and outliers * 100.0 / len(observable) >= pct
    return [(*p, flag) for p in out]


def test_outlier_mad_matches_the_java_definition() -> None:
    rng = np.random.default_rng(8)
    values, times, want = [], [], []
    for i in range(300):
        k = int(rng.integers(1, 15))
        vals = [float(v) for v in rng.normal(50, 5, k).round(1)]
        if i % 3 == 0:
            vals[int(rng.integers(0, k))] = 500.0  # a spike
        order = rng.permutation(k)  # timestamps out of order: the function sorts them
        ts = [H + timedelta(minutes=int(m)) for m in order]
        values.append(vals)
        times.append(ts)
        want.append(java_outlier_mad(vals, ts, H, 15, 5, 3, 10))
    got = outlier_mad(
        pa.array(values),
        pa.array(times, TS),
        pa.array([H] * len(values), pa.timestamp("us", tz="UTC")),
        pa.array([15] * len(values)),
        pa.array([5] * len(values)),
        pa.array([3] * len(values)),
        pa.array([10] * len(values)),
    ).to_pylist()
    assert sum(1 for rows in want for r in rows if r[4]) > 20  # some windows are outliers
    for rows_got, rows_want in zip(got, want, strict=True):
        assert [
            (r["timestamp"], r["value"], r["upper_bound"], r["lower_bound"], r["is_outlier"])
            for r in rows_got
        ] == [
            (
                t,
                v,
                pytest.approx(u) if u is not None else None,
                pytest.approx(lo) if lo is not None else None,
                f,
            )
            for t, v, u, lo, f in rows_want
        ]


def test_outlier_mad_null_arguments() -> None:
    got = outlier_mad(
        pa.array([[1.0, 2.0], [1.0]]),
        pa.array([[H, H], [H]], TS),
        pa.array([H, None], pa.timestamp("us", tz="UTC")),
        pa.array([1, 1]),
        pa.array([1, 1]),
        pa.array([3, 3]),
        pa.array([10, 10]),
    )
    assert got.to_pylist()[1] is None
