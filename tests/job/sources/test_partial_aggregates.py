"""The source's first step of COUNT, SUM, MIN and MAX (job.sources.partial): per window and key, the count of
non-NULL values, their sum (an integer sum past BIGINT's range stops the dagger, or wraps without ANSI), the
least and the greatest in Spark's order (NaN above all), checked with hypothesis against a plain Python
reference that adds each group's values in the order read."""

from __future__ import annotations

import math
import struct
from collections import defaultdict
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from job.errors import DaggerError
from job.sources.partial import RECORDS, aggregate

WINDOW_MS = 60_000
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
AGGREGATES = [
    [function, column, f"{function}_{column}"]
    for column in ("big", "small", "real", "single")
    for function in ("count", "sum", "min", "max")
] + [["count", "name", "count_name"]]

# values near BIGINT's edges as well as small ones, so that some sums pass its range and most do not
BIGS = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.integers(LONG_MIN, LONG_MAX),
    st.sampled_from([LONG_MAX, LONG_MIN, LONG_MAX - 1, 2**62, -(2**62)]),
)
REALS = st.one_of(
    st.none(),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 0.1, 1e308]),
    st.floats(allow_nan=False, width=64),
)
RECORD = st.tuples(
    st.one_of(st.none(), st.integers(0, 3)),  # k: INT key
    st.one_of(st.none(), st.sampled_from(["a", "b", "é"])),  # name: STRING key
    st.one_of(st.none(), st.integers(0, 4 * WINDOW_MS)),  # ts: epoch ms
    BIGS,  # big: BIGINT
    st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),  # small: INT
    REALS,  # real: DOUBLE
    st.one_of(st.none(), st.floats(width=32)),  # single: FLOAT
)


def _batch(records: list[tuple[Any, ...]]) -> pa.RecordBatch:
    columns = list(zip(*records, strict=True)) if records else [()] * 7
    types = [pa.int32(), pa.string(), pa.int64(), pa.int64(), pa.int32(), pa.float64(), pa.float32()]
    names = ["k", "name", "ts", "big", "small", "real", "single"]
    return pa.record_batch([pa.array(list(c), t) for c, t in zip(columns, types, strict=True)], names=names)


def _spark_key(v: float) -> tuple[int, float]:
    """Spark's order of floating-point values: NaN above every other number, all NaNs equal, -0.0 = 0.0."""
    return (1, 0.0) if math.isnan(v) else (0, v)


def _reference(records: list[tuple[Any, ...]], wrap: bool) -> dict[tuple, dict[str, Any]] | str:
    """Each group's values by plain Python, adding in the order read; "overflow" when an integer sum passes
    BIGINT's range on the way (and not ``wrap``)."""
    groups: dict[tuple, list[tuple[Any, ...]]] = defaultdict(list)
    for r in records:
        groups[(r[0], r[1], None if r[2] is None else r[2] // WINDOW_MS)].append(r)
    out: dict[tuple, dict[str, Any]] = {}
    for (k, name, _), rows in groups.items():
        times = [r[2] for r in rows if r[2] is not None]
        row: dict[str, Any] = {RECORDS: len(rows), "count_name": sum(r[1] is not None for r in rows)}
        for i, column in ((3, "big"), (4, "small"), (5, "real"), (6, "single")):
            values = [r[i] for r in rows if r[i] is not None]
            if column == "single":  # as FLOAT holds them
                values = [float(np.float32(v)) for v in values]
            row[f"count_{column}"] = len(values)
            if column in ("real", "single"):
                total = 0.0
                for v in values:
                    total += v
                row[f"min_{column}"] = min(values, key=_spark_key) if values else None
                row[f"max_{column}"] = max(values, key=_spark_key) if values else None
            else:
                exact = 0
                for v in values:
                    exact += v
                    if not LONG_MIN <= exact <= LONG_MAX and not wrap:
                        return "overflow"
                total = (exact + 2**63) % 2**64 - 2**63
                row[f"min_{column}"] = min(values) if values else None
                row[f"max_{column}"] = max(values) if values else None
            row[f"sum_{column}"] = total if values else None
        out[(k, name, max(times) if times else None)] = row
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal values, floats bit for bit (so -0.0 is not 0.0), any NaN equal to any NaN."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def _check(records: list[tuple[Any, ...]], cut: int, wrap: bool) -> None:
    whole = _batch(records)
    batches = [whole.slice(0, cut), whole.slice(cut)]
    expected = _reference(records, wrap)
    if expected == "overflow":
        with pytest.raises(DaggerError, match=r"\[ARITHMETIC_OVERFLOW\] overflow: SUM\((big|small)\)"):
            aggregate(batches, ["k", "name"], "ts", WINDOW_MS, {}, AGGREGATES, wrap)
        return
    out = aggregate(batches, ["k", "name"], "ts", WINDOW_MS, {}, AGGREGATES, wrap)
    if not records:
        assert out is None
        return
    assert out is not None
    assert out.schema.names == ["k", "name", "ts", *(a[2] for a in AGGREGATES), RECORDS]
    types = {f.name: f.type for f in out.schema}
    assert (types["sum_big"], types["sum_small"], types["sum_real"], types["sum_single"]) == (
        pa.int64(),
        pa.int64(),
        pa.float64(),
        pa.float64(),
    )
    assert (types["min_small"], types["max_single"], types["count_real"]) == (
        pa.int32(),
        pa.float32(),
        pa.int64(),
    )
    got = {}
    for row in out.to_pylist():
        got[(row.pop("k"), row.pop("name"), row.pop("ts"))] = row
    assert got.keys() == expected.keys()
    for key, row in expected.items():
        assert row.keys() == got[key].keys()
        wrong = {c: (v, got[key][c]) for c, v in row.items() if not _same(v, got[key][c])}
        assert not wrong, (key, wrong)


@settings(max_examples=400, deadline=None)
@given(st.lists(RECORD, max_size=40), st.integers(0, 40), st.booleans())
def test_counts_sums_least_and_greatest_per_window_and_key_as_plain_python_adds_them(
    records: list[tuple[Any, ...]], cut: int, wrap: bool
) -> None:
    _check(records, min(cut, len(records)), wrap)


def test_many_records_in_few_groups() -> None:
    """20,000 records in ~40 groups (long lists per group), NULLs and NaNs among them."""
    rng = np.random.default_rng(11)
    n = 20_000
    records = [
        (
            int(rng.integers(0, 5)),
            None if i % 501 == 0 else str(rng.choice(["a", "b"])),
            None if i % 997 == 0 else int(rng.integers(0, 4 * WINDOW_MS)),
            None if i % 7 == 0 else int(rng.integers(-(10**12), 10**12)),
            int(rng.integers(-1000, 1000)),
            math.nan if i == 12_345 else (None if i % 13 == 0 else float(rng.normal())),
            float(np.float32(rng.random())),
        )
        for i in range(n)
    ]
    _check(records, 7_000, wrap=False)


def test_a_sum_past_bigint_stops_the_dagger_unless_spark_wraps_around() -> None:
    records = [
        (1, "a", 10, LONG_MAX, 1, 1.0, 1.0),
        (1, "a", 20, 1, 1, 1.0, 1.0),
        (1, "a", 30, -5, 1, 1.0, 1.0),
    ]
    with pytest.raises(DaggerError) as caught:
        aggregate([_batch(records)], ["k", "name"], "ts", WINDOW_MS, {}, AGGREGATES)
    assert caught.value.message == (
        "the streaming query failed: [ARITHMETIC_OVERFLOW] overflow: SUM(big) is past BIGINT's range"
    )
    assert caught.value.hint == "sum a wider type: SUM(CAST(big AS DECIMAL(38, 0)))"
    out = aggregate([_batch(records)], ["k", "name"], "ts", WINDOW_MS, {}, AGGREGATES, wrap=True)
    assert out is not None and out.column("sum_big").to_pylist() == [LONG_MAX - 4]
