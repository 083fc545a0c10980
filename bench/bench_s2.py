"""Benchmark ``job.functions.s2.latlng_to_cell_id`` (level 13) against a per-row s2sphere loop.

Usage::

    python bench/bench_s2.py [--points N] [--s2sphere-points M] [--repeat R]

numpy runs on N points (best of R runs); s2sphere, being ~100x slower, runs once on
M points and its rate is reported per point, so the two rates are comparable. Both
run in this process on one core (numpy's ufuncs used here are single-threaded). The
script also checks that both give the same ids on the s2sphere sample.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job.functions.s2 import latlng_to_cell_id  # noqa: E402

LEVEL = 13


def _random_points(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``n`` points uniform on the sphere as (lat, lng) degree arrays."""
    rng = np.random.default_rng(seed)
    return np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n))), rng.uniform(-180.0, 180.0, n)


def _time_numpy(lat: np.ndarray, lng: np.ndarray, repeat: int) -> tuple[float, np.ndarray]:
    """Return (best seconds over ``repeat`` runs, ids) for ``latlng_to_cell_id``."""
    latlng_to_cell_id(lat[:1000], lng[:1000], LEVEL)  # warm-up
    best, ids = float("inf"), np.empty(0, np.uint64)
    for _ in range(repeat):
        start = time.perf_counter()
        ids = latlng_to_cell_id(lat, lng, LEVEL)
        best = min(best, time.perf_counter() - start)
    return best, ids


def _time_s2sphere(lat: np.ndarray, lng: np.ndarray) -> tuple[float, np.ndarray]:
    """Return (seconds, ids) for the per-row s2sphere loop."""
    import s2sphere

    from_lat_lng, from_degrees = s2sphere.CellId.from_lat_lng, s2sphere.LatLng.from_degrees
    start = time.perf_counter()
    ids = [
        from_lat_lng(from_degrees(a, b)).parent(LEVEL).id()
        for a, b in zip(lat.tolist(), lng.tolist(), strict=True)
    ]
    elapsed = time.perf_counter() - start
    return elapsed, np.array(ids, dtype=np.uint64)


def _machine() -> str:
    """Return a one-line description: CPU model, nproc, memory, Python and numpy versions."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
        mem = f"{mem_kb / 1024**2:.1f} GiB"
    except (OSError, StopIteration):
        mem = "unknown"
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{model}, nproc={nproc}, memory={mem}, Python {platform.python_version()}, "
        f"numpy {np.__version__}, {platform.system()} {platform.release()}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the machine and a Markdown table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=5_000_000, help="points for numpy (default 5,000,000)")
    parser.add_argument(
        "--s2sphere-points", type=int, default=50_000, help="points for s2sphere (default 50,000)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="numpy runs; the best is kept (default 5)")
    args = parser.parse_args(argv)

    lat, lng = _random_points(args.points, seed=42)
    np_seconds, np_ids = _time_numpy(lat, lng, args.repeat)
    m = min(args.s2sphere_points, args.points)
    s2_seconds, s2_ids = _time_s2sphere(lat[:m], lng[:m])
    if not np.array_equal(np_ids[:m], s2_ids):
        print("MISMATCH between numpy and s2sphere ids", file=sys.stderr)
        return 1

    np_rate, s2_rate = args.points / np_seconds, m / s2_seconds
    print(f"machine: {_machine()}")
    print(f"level {LEVEL}, ids identical on the {m:,} s2sphere points\n")
    print("| implementation | points | seconds | points/s | ratio |")
    print("|---|---:|---:|---:|---:|")
    print(
        f"| job.functions.s2 (numpy, best of {args.repeat}) | {args.points:,} | {np_seconds:.3f} "
        f"| {np_rate:,.0f} | {np_rate / s2_rate:.1f}x |"
    )
    print(f"| s2sphere per-row loop | {m:,} | {s2_seconds:.3f} | {s2_rate:,.0f} | 1.0x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
