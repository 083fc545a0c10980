"""Rows → line protocol: tag_/label_ conventions, NULLs, escaping, precision."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from job.sinks.line_protocol import encode


def ts(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_conventions_and_types() -> None:
    table = pa.table({
        "tag_s2id": ["3344475382534373376", "-8520148434366234624"],
        "label_city": ["Jakarta", "New York"],
        "bookings": pa.array([3, None], pa.int64()),
        "avg_fare": [12.5, 7.0],
        "note": ['say "hi"', None],
        "ok": [True, False],
        "window_timestamp": pa.array([ts(2026, 1, 1, 0, 1), ts(2026, 1, 1, 0, 2)], pa.timestamp("us", tz="UTC")),
    })
    enc = encode(table, "bookings per s2")
    assert enc.precision == "s"
    assert enc.lines == [
        'bookings\\ per\\ s2,city=Jakarta,tag_s2id=3344475382534373376 bookings=3i,avg_fare=12.5,'
        'note="say \\"hi\\"",ok=true 1767225660',
        "bookings\\ per\\ s2,city=New\\ York,tag_s2id=-8520148434366234624 avg_fare=7.0,ok=false 1767225720",
    ]
    assert enc.skipped == 0


def test_rows_without_fields_or_time_are_skipped() -> None:
    table = pa.table({
        "tag_a": ["x", "y", "z"],
        "n": pa.array([None, 1, 2], pa.int64()),
        "window_timestamp": pa.array([ts(2026, 1, 1), None, ts(2026, 1, 1)], pa.timestamp("us", tz="UTC")),
    })
    enc = encode(table, "m")
    assert enc.lines == ["m,tag_a=z n=2i 1767225600"]
    assert enc.skipped == 2


def test_precision_follows_the_data() -> None:
    micro = pa.array([datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
    milli = pa.array([datetime(2026, 1, 1, 0, 0, 0, 5000, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
    assert encode(pa.table({"n": [1], "window_timestamp": micro}), "m").lines == ["m n=1i 1767225600001500"]
    assert encode(pa.table({"n": [1], "window_timestamp": milli}), "m").precision == "ms"


def test_empty_and_escaped_tags() -> None:
    table = pa.table({"tag_k": ["", "a,b=c"], "n": [1.5, 2.5],
                      "window_timestamp": pa.array([ts(2026, 1, 1)] * 2, pa.timestamp("us", tz="UTC"))})
    assert encode(table, "m").lines == ["m n=1.5 1767225600", "m,tag_k=a\\,b\\=c n=2.5 1767225600"]


def test_nan_fields_are_left_out() -> None:
    table = pa.table({"a": [float("nan")], "b": [1.0],
                      "window_timestamp": pa.array([ts(2026, 1, 1)], pa.timestamp("us", tz="UTC"))})
    assert encode(table, "m").lines == ["m b=1.0 1767225600"]
