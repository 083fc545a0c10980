"""Rows → line protocol: tag_/label_ conventions, NULLs, escaping, precision."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

import pyarrow as pa

from job.sinks.line_protocol import encode


def ts(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_conventions_and_types() -> None:
    table = pa.table(
        {
            "tag_s2id": ["3344475382534373376", "-8520148434366234624"],
            "label_city": ["Jakarta", "New York"],
            "bookings": pa.array([3, None], pa.int64()),
            "avg_fare": [12.5, 7.0],
            "note": ['say "hi"', None],
            "ok": [True, False],
            "window_timestamp": pa.array(
                [ts(2026, 1, 1, 0, 1), ts(2026, 1, 1, 0, 2)], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    enc = encode(table, "bookings per s2")
    assert enc.precision == "s"
    assert enc.lines == [
        "bookings\\ per\\ s2,city=Jakarta,tag_s2id=3344475382534373376 bookings=3i,avg_fare=12.5,"
        'note="say \\"hi\\"",ok=true 1767225660',
        "bookings\\ per\\ s2,city=New\\ York,tag_s2id=-8520148434366234624 avg_fare=7.0,ok=false 1767225720",
    ]
    assert enc.skipped == 0


def test_rows_without_fields_or_time_are_skipped() -> None:
    table = pa.table(
        {
            "tag_a": ["x", "y", "z"],
            "n": pa.array([None, 1, 2], pa.int64()),
            "window_timestamp": pa.array(
                [ts(2026, 1, 1), None, ts(2026, 1, 1)], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    enc = encode(table, "m")
    assert enc.lines == ["m,tag_a=z n=2i 1767225600"]
    assert enc.skipped == 2


def test_precision_follows_the_data() -> None:
    micro = pa.array([datetime(2026, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
    milli = pa.array([datetime(2026, 1, 1, 0, 0, 0, 5000, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))
    assert encode(pa.table({"n": [1], "window_timestamp": micro}), "m").lines == ["m n=1i 1767225600001500"]
    assert encode(pa.table({"n": [1], "window_timestamp": milli}), "m").precision == "ms"


def test_empty_and_escaped_tags() -> None:
    table = pa.table(
        {
            "tag_k": ["", "a,b=c"],
            "n": [1.5, 2.5],
            "window_timestamp": pa.array([ts(2026, 1, 1)] * 2, pa.timestamp("us", tz="UTC")),
        }
    )
    assert encode(table, "m").lines == ["m n=1.5 1767225600", "m,tag_k=a\\,b\\=c n=2.5 1767225600"]


def test_nan_fields_are_left_out() -> None:
    table = pa.table(
        {
            "a": [float("nan")],
            "b": [1.0],
            "window_timestamp": pa.array([ts(2026, 1, 1)], pa.timestamp("us", tz="UTC")),
        }
    )
    assert encode(table, "m").lines == ["m b=1.0 1767225600"]


def _reference(table: pa.Table, measurement: str) -> list[str]:
    """Line protocol row by row in plain Python (the encoder's first, per-row version), as the oracle."""

    def key(text: str) -> str:
        return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")

    def field(v: object) -> str | None:
        if v is None or (isinstance(v, float) and (v != v or v in (float("inf"), float("-inf")))):
            return None
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return f"{v}i"
        if isinstance(v, float):
            return re.sub(r"e([+-])0(\d)", r"e\1\2", repr(v))  # Arrow writes 1e-07 as 1e-7: the same float
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    rows = table.to_pylist()
    head = measurement.replace(" ", "\\ ")
    tag_cols = sorted(c for c in table.column_names if c.startswith("tag_"))
    field_cols = [c for c in table.column_names if c != "window_timestamp" and c not in tag_cols]
    lines = []
    for r in rows:
        if r["window_timestamp"] is None:
            continue
        fs = ",".join(f"{key(c)}={field(r[c])}" for c in field_cols if field(r[c]) is not None)
        if not fs:
            continue
        ts = "".join(f",{key(c)}={key(r[c])}" for c in tag_cols if r[c])
        lines.append(f"{head}{ts} {fs} {int(r['window_timestamp'].timestamp())}")
    return lines


def test_vectorised_lines_match_the_row_by_row_encoder_on_random_rows() -> None:
    rng = random.Random(7)
    words = ["a", "b c", "x,y", "k=v", 'q"u', "back\\slash", "ünï", ""]
    n = 3000

    def maybe(v: object) -> object:
        return None if rng.random() < 0.2 else v

    table = pa.table(
        {
            "tag_s2id": [maybe(str(rng.randrange(-(2**63), 2**63))) for _ in range(n)],
            "tag_word": [maybe(rng.choice(words)) for _ in range(n)],
            "count": pa.array([maybe(rng.randrange(-(10**12), 10**12)) for _ in range(n)], pa.int64()),
            "ratio": pa.array(
                [
                    maybe(rng.choice([rng.uniform(-1e6, 1e6), 1e-7, 3.0, float("nan"), float("inf"), 1e21]))
                    for _ in range(n)
                ],
                pa.float64(),
            ),
            "flag": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
            "note": [maybe(rng.choice(words)) for _ in range(n)],
            "window_timestamp": pa.array(
                [maybe(ts(2026, 1, 1, rng.randrange(24), rng.randrange(60))) for _ in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )
    enc = encode(table, "my measure")
    want = _reference(table, "my measure")
    assert enc.lines == want and enc.skipped == n - len(want) and len(enc) == len(want)
    assert b"".join(enc.bodies(7)) == ("\n".join(want) + "\n").encode()
    assert [len(b.splitlines()) for b in enc.bodies(1000)] == [1000] * (len(want) // 1000) + [
        len(want) % 1000
    ]


def test_an_empty_batch_and_a_batch_without_fields() -> None:
    empty = pa.table(
        {"n": pa.array([], pa.int64()), "window_timestamp": pa.array([], pa.timestamp("us", tz="UTC"))}
    )
    assert encode(empty, "m").lines == [] and list(encode(empty, "m").bodies(10)) == []
    tags_only = pa.table(
        {"tag_a": ["x"], "window_timestamp": pa.array([ts(2026, 1, 1)], pa.timestamp("us", tz="UTC"))}
    )
    assert (encode(tags_only, "m").lines, encode(tags_only, "m").skipped) == ([], 1)
