"""Benchmark Dagger functions on Spark: rows per second through a real (local) Spark query.

Usage::

    python bench/bench_udf.py [--rows N] [--per-row-rows M] [--repeat R] [--master local[2]]

Each function runs as ``SELECT sum(length(CAST(f(...) AS STRING))) FROM points`` over N cached rows
(points uniform within ±1° of Jakarta, as a city's traffic is), best of R. Measured in the same run:

* ``S2Id`` as registered now (Arrow UDF: numpy cell ids, text by Arrow's C++ cast);
* ``S2Id`` with the previous body (numpy ids, then ``numpy.astype(str)`` and ``pa.array``);
* ``S2Id`` as a per-row Python UDF calling s2sphere (on M rows: it is slow), the usual alternative;
* ``GeoHash`` (Arrow UDF) and ``Distance`` (rewritten to Spark built-ins, JVM only).

Prints a Markdown table. The row counts include Spark's own work (scan, Arrow transfer, sum).
``--arrow-batch`` sets Spark's rows per Arrow batch for the run (default 10,000). The machine's other
load moves these numbers by 2x: compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402


def s2id_previous(lat: pa.Array, lng: pa.Array, level: pa.Array) -> pa.Array:
    """The S2Id body before this benchmark: numpy ids, then Python strings."""
    from job.functions import s2

    lat_np = pc.fill_null(lat.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    lng_np = pc.fill_null(lng.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    lvl = int(level[0].as_py())
    bad = ~np.isfinite(lat_np) | ~np.isfinite(lng_np)
    ids = s2.latlng_to_cell_id(np.where(bad, 0.0, lat_np), np.where(bad, 0.0, lng_np), lvl)
    return pa.array(s2.to_decimal_strings(ids, signed=True), pa.string(), mask=bad)


def s2id_per_row(lat: float | None, lng: float | None, level: int) -> str | None:
    """S2Id one row at a time with s2sphere."""
    import s2sphere

    if lat is None or lng is None:
        return None
    cid = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id()
    return str(cid - (1 << 64) if cid >= 1 << 63 else cid)


def timed(spark, sql: str, repeat: int) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    """Return (best seconds, result) of ``sql`` over ``repeat`` runs, after one warm-up."""
    result = spark.sql(sql).collect()[0][0]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        again = spark.sql(sql).collect()[0][0]
        best = min(best, time.perf_counter() - start)
        assert again == result
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--per-row-rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--arrow-batch",
        type=int,
        default=0,
        help="rows per Arrow batch for the whole run (0: Spark's default, 10,000)",
    )
    args = parser.parse_args()

    from pyspark.sql.functions import arrow_udf, udf

    from job.functions.spark_udfs import register_functions
    from job.spark.session import build_session
    from job.sql.parse import parse
    from job.sql.rewrite import render, to_spark

    extra = (
        {"spark.sql.execution.arrow.maxRecordsPerBatch": str(args.arrow_batch)} if args.arrow_batch else {}
    )
    spark = build_session("bench-udf", master=args.master, shuffle_partitions=2, extra=extra)
    register_functions(spark)
    spark.udf.register("S2IdPrevious", arrow_udf(s2id_previous, "string"))
    spark.udf.register("S2IdPerRow", udf(s2id_per_row, "string"))
    for name, rows in (("points", args.rows), ("sample", args.per_row_rows)):
        (
            spark.range(rows, numPartitions=4)
            .selectExpr("-6.2D + (rand(1) * 2 - 1) AS lat", "106.8D + (rand(2) * 2 - 1) AS lng")
            .cache()
            .createOrReplaceTempView(name)
        )
        spark.table(name).count()

    def dagger(expr: str, table: str) -> str:
        return render(to_spark(parse(f"SELECT sum(length(CAST({expr} AS STRING))) FROM {table}")))

    cases = [
        ("S2Id (Arrow UDF, now)", "S2Id(lat, lng, 13)", "points", args.rows),
        ("S2Id (Arrow UDF, previous body)", "S2IdPrevious(lat, lng, 13)", "points", args.rows),
        ("S2Id (per-row Python UDF, s2sphere)", "S2IdPerRow(lat, lng, 13)", "sample", args.per_row_rows),
        ("GeoHash (Arrow UDF)", "GeoHash(lat, lng, 7)", "points", args.rows),
        ("Distance (Spark built-ins)", "Distance(lat, lng, -6.2D, 106.8D)", "points", args.rows),
        ("scan only (no function)", "lat", "points", args.rows),
    ]
    results = {}
    for label, expr, table, rows in cases:
        seconds, value = timed(spark, dagger(expr, table), args.repeat if table == "points" else 1)
        results[label] = (rows, seconds, value)
    now, prev = results[cases[0][0]], results[cases[1][0]]
    assert now[2] == prev[2], "the two S2Id bodies disagree"
    per_row = results["S2Id (per-row Python UDF, s2sphere)"]
    base = per_row[0] / per_row[1]
    print(
        f"Spark {spark.version}, {args.master}, Python {platform.python_version()}, {platform.machine()}; "
        f"best of {args.repeat} (per-row: one run); {spark.conf.get('spark.sql.execution.arrow.maxRecordsPerBatch')} rows per Arrow batch\n"
    )
    print("| function | rows | seconds | rows/s | vs per-row s2sphere UDF |")
    print("|---|---:|---:|---:|---:|")
    for label, (rows, seconds, _) in results.items():
        rate = rows / seconds
        print(f"| {label} | {rows:,} | {seconds:.3f} | {rate:,.0f} | {rate / base:.1f}x |")
    spark.stop()


if __name__ == "__main__":
    main()
