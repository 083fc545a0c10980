"""Benchmark the vectorised DartGet look-up and Features' per-event rows against per-row Python peers.

Usage::

    python bench/bench_lookups.py [--rows N] [--keys K] [--repeat R]

DartGet: N keys looked up in a cached collection of K entries (a fifth of the keys missing) with
``DartStore.get`` (Arrow ``index_in`` + ``take``), against a per-row ``dict.get`` loop that builds the
same Arrow array. Features: N rows of two (key, value) pairs with ``feature_rows_arrow``, against a
per-row loop that builds the same Python rows and converts them with ``pa.array``. Best of R runs,
one core, results checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job.functions.dart import DartStore, store_url  # noqa: E402
from job.functions.feature_rows import FEATURE_ROWS_TYPE, feature_rows_arrow  # noqa: E402


def _best(fn: Callable[[], pa.Array], repeat: int) -> tuple[float, pa.Array]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    assert out is not None
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, k = args.rows, args.keys
    print(f"- Machine: nproc={os.cpu_count()}, Python {platform.python_version()}, pyarrow {pa.__version__}")

    folder = Path(tempfile.mkdtemp())
    (folder / "dart-get").mkdir()
    collection = {str(i): f"value-{i}" for i in range(k)}
    (folder / "dart-get" / "m").write_text(json.dumps(collection))
    store = DartStore(store_url(str(folder)))
    keys = pa.array([str(i % (k + k // 4)) for i in range(n)])
    store.get("m", keys[:10], 1)  # the one read of the collection
    vec_s, vec = _best(lambda: store.get("m", keys, 1), args.repeat)
    key_list = keys.to_pylist()
    row_s, row = _best(lambda: pa.array([collection.get(x) for x in key_list], pa.string()), args.repeat)
    assert vec.equals(row)
    print("| function | implementation | rows | seconds | rows/s | ratio |\n|---|---|---:|---:|---:|---:|")
    print(
        f"| DartGet | Arrow index_in + take | {n:,} | {vec_s:.3f} | {n / vec_s:,.0f} | {row_s / vec_s:.1f}x |"
    )
    print(f"| DartGet | per-row dict.get | {n:,} | {row_s:.3f} | {n / row_s:,.0f} | 1.0x |")

    fields = [
        "bytes_val",
        "string_val",
        "int32_val",
        "int64_val",
        "double_val",
        "float_val",
        "bool_val",
        "timestamp_val",
    ]
    fares = pa.array(range(n), pa.int64())
    cities = pa.array([f"c{i % 50}" for i in range(n)])
    names_fare, names_city = pa.array(["fare"] * n), pa.array(["city"] * n)
    vec_s, vec = _best(lambda: feature_rows_arrow(names_fare, fares, names_city, cities), args.repeat)

    def per_row() -> pa.Array:
        out = []
        for fare, city in zip(fares.to_pylist(), cities.to_pylist(), strict=True):
            a = dict.fromkeys(fields)
            a["int64_val"] = fare
            b = dict.fromkeys(fields)
            b["string_val"] = city
            out.append(
                [{"key": "fare", "value": a, "name": "fare"}, {"key": "city", "value": b, "name": "city"}]
            )
        return pa.array(out, vec.type)

    row_s, row = _best(per_row, args.repeat)
    assert vec.equals(row) and FEATURE_ROWS_TYPE.startswith("array<")
    print(
        f"| Features (2 pairs) | Arrow, per leaf field | {n:,} | {vec_s:.3f} | {n / vec_s:,.0f} | {row_s / vec_s:.1f}x |"
    )
    print(f"| Features (2 pairs) | per-row Python rows | {n:,} | {row_s:.3f} | {n / row_s:,.0f} | 1.0x |")


if __name__ == "__main__":
    main()
