"""The source's first step of a DistinctCount: one row per window and key, its distinct values as the buffer
``job/spark/jvm/DistinctCount.java`` keeps (sorted by length then bytes, each after its length), against a
plain Python count of the same records."""

from __future__ import annotations

import collections
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from job.sources.partial import RECORDS, aggregate

BUFFER = "__dagger_distinct_driver_id"


def _buffer(values: set[bytes]) -> bytes:
    out = b""
    for v in sorted(values, key=lambda x: (len(x), x)):
        n, head = len(v), b""
        while n >= 128:
            head += bytes([(n & 0x7F) | 0x80])
            n >>= 7
        out += head + bytes([n]) + v
    return out


def test_one_row_per_window_and_key_with_every_distinct_value_once() -> None:
    rng = np.random.default_rng(5)
    n = 20_000
    base = int(datetime(2026, 12, 6, tzinfo=UTC).timestamp() * 1_000_000)
    stamps = [None if i % 1999 == 0 else base + int(t) for i, t in enumerate(rng.integers(0, 240_000_000, n))]
    cells = [None if i % 997 == 0 else int(c) for i, c in enumerate(rng.integers(0, 300, n))]
    drivers = [
        None if rng.random() < 0.01 else f"D{rng.integers(0, 2_000):05d}" + ("é" * int(rng.integers(0, 70)))
        for _ in range(n)
    ]
    batch = pa.record_batch(
        [pa.array(drivers, pa.string()), pa.array(stamps, pa.timestamp("us", tz="UTC")), pa.array(cells)],
        names=["driver_id", "event_timestamp", "cell"],
    )
    out = aggregate(
        [batch.slice(0, 7_000), batch.slice(7_000, 0), batch.slice(7_000)],
        ["cell"],
        "event_timestamp",
        60_000,
        {"driver_id": BUFFER},
    )
    assert out is not None and out.schema.names == ["cell", "event_timestamp", BUFFER, RECORDS]
    assert out.schema.field("event_timestamp").type == pa.timestamp("us", tz="UTC")
    groups: dict[tuple, list] = collections.defaultdict(lambda: [set(), None, 0])
    for d, t, c in zip(drivers, stamps, cells, strict=True):
        g = groups[(c, None if t is None else t // 60_000_000)]
        if d is not None:
            g[0].add(d.encode())
        if t is not None:
            g[1] = t if g[1] is None else max(g[1], t)
        g[2] += 1
    expected = {(c, g[1]): (_buffer(g[0]), g[2]) for (c, _), g in groups.items()}
    micros = out.column("event_timestamp").cast(pa.int64()).to_pylist()
    keys = zip(out.column("cell").to_pylist(), micros, strict=True)
    values = zip(out.column(BUFFER).to_pylist(), out.column(RECORDS).to_pylist(), strict=True)
    got = dict(zip(keys, values, strict=True))
    assert len(got) == out.num_rows == len(expected) and got == expected
    assert sum(n for _, n in got.values()) == n
    assert any(len(b) > 128 for b, _ in got.values())  # lengths past one varint byte among them


def test_epoch_milliseconds_and_no_rows() -> None:
    batch = pa.record_batch(
        [
            pa.array(["b", "a", "b", None]),
            pa.array([59_999, 1_000, 60_000, 61_000], pa.int64()),
            pa.array([1, 1, 1, 1]),
        ],
        names=["driver_id", "ts", "k"],
    )
    out = aggregate([batch], ["k"], "ts", 60_000, {"driver_id": BUFFER})
    assert out is not None
    assert sorted(zip(out.column("ts").to_pylist(), out.column(BUFFER).to_pylist(), strict=True)) == [
        (59_999, b"\x01a\x01b"),
        (61_000, b"\x01b"),
    ]
    assert aggregate([batch.slice(0, 0)], ["k"], "ts", 60_000, {"driver_id": BUFFER}) is None
