"""What keeping generated positions on land costs ``daggers produce``.

Usage::

    python bench/bench_generator_land.py [--events 200000] [--repeat 3]

For ``driver_location`` and ``booking``, times :func:`job.produce.generator.generate` (best of
``--repeat``, the driver world rebuilt each time) with the shipped land grid and, in the same run,
with an empty one (the peer: no point is moved), and times
:meth:`job.produce.geography.LandMask.to_land` alone on Jakarta-shaped points.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import job.produce.generator as generator  # noqa: E402
from job.produce.geography import LandMask, land_mask  # noqa: E402

START = datetime(2025, 11, 22, tzinfo=UTC)


def _best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a Markdown table; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    real, empty = land_mask(), LandMask({})
    n = args.events

    def generate(stream: str, mask: LandMask) -> None:
        generator.land_mask = lambda: mask  # type: ignore[assignment]
        generator._world.cache_clear()
        generator.generate(
            stream,
            n,
            seed=3,
            start=START,
            duration_s=600.0,  # type: ignore[arg-type]
            late_fraction=0.01,
            out_of_order_fraction=0.05,
        )

    print("| stream | land grid | events/s | ratio |")
    print("|---|---|---:|---:|")
    for stream in ("driver_location", "booking"):
        generate(stream, real)  # warm-up
        on = n / _best(lambda s=stream: generate(s, real), args.repeat)  # type: ignore[misc]
        off = n / _best(lambda s=stream: generate(s, empty), args.repeat)  # type: ignore[misc]
        print(f"| {stream} | shipped (points moved onto land) | {on:,.0f} | {on / off:.2f}x |")
        print(f"| {stream} | empty (the peer: nothing moved) | {off:,.0f} | 1x |")
    rng = np.random.default_rng(1)
    lat, lng = -6.2088 + rng.normal(0, 0.1, n), 106.8456 + rng.normal(0, 0.1, n)
    city = np.ones(n, dtype=np.int64)
    sea = float((~real.on_land(city, lat, lng)).mean())
    seconds = _best(lambda: real.to_land(city, lat, lng), args.repeat)
    print(
        f"\nLandMask.to_land alone: {n:,} points around Jakarta ({sea:.0%} not in a land cell): "
        f"{seconds * 1000:.0f} ms, {n / seconds:,.0f} points/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
