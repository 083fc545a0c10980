"""GeoHash: the vectorised encoder against a plain per-point bisection written from the definition."""

from __future__ import annotations

import numpy as np
import pytest

from job.functions.geo import BASE32, geohash


def reference(lat: float, lng: float, length: int) -> str:
    """Geohash by the textbook loop: longitude bit first, 1 when at or above the middle."""
    lat_lo, lat_hi, lng_lo, lng_hi = -90.0, 90.0, -180.0, 180.0
    bits, out, even = [], [], True
    while len(out) < length:
        if even:
            mid = (lng_lo + lng_hi) / 2
            bits.append(lng >= mid)
            lng_lo, lng_hi = (mid, lng_hi) if lng >= mid else (lng_lo, mid)
        else:
            mid = (lat_lo + lat_hi) / 2
            bits.append(lat >= mid)
            lat_lo, lat_hi = (mid, lat_hi) if lat >= mid else (lat_lo, mid)
        even = not even
        if len(bits) == 5:
            out.append(BASE32[int("".join("1" if b else "0" for b in bits), 2)])
            bits = []
    return "".join(out)


def test_published_values() -> None:
    assert geohash([57.64911], [10.40744], [11]).to_pylist() == ["u4pruydqqvj"]  # Wikipedia's example
    assert geohash([-6.2], [106.816666], [6]).to_pylist() == [reference(-6.2, 106.816666, 6)]


def test_random_points_every_length_equal_the_reference() -> None:
    rng = np.random.default_rng(3)
    n = 6000
    lat, lng = rng.uniform(-90, 90, n), rng.uniform(-180, 180, n)
    length = rng.integers(1, 13, n)
    got = geohash(lat, lng, length).to_pylist()
    assert got == [reference(a, b, int(k)) for a, b, k in zip(lat, lng, length, strict=True)]


@pytest.mark.parametrize(
    ("lat", "lng"),
    [
        (90.0, 180.0),
        (-90.0, -180.0),
        (0.0, 0.0),
        (45.0, 90.0),
        (-45.0, -90.0),
        (89.99999999, 179.99999999),
        (0.0, -180.0),
        (22.5, 11.25),
    ],
)
def test_edges_and_cell_boundaries(lat: float, lng: float) -> None:
    for length in range(1, 13):
        assert geohash([lat], [lng], [length]).to_pylist() == [reference(lat, lng, length)]


def test_bad_inputs_are_null() -> None:
    got = geohash(
        [np.nan, 91.0, 10.0, 10.0, 10.0, 10.0], [0.0, 0.0, 181.0, 0.0, 0.0, 0.0], [5, 5, 5, 0, 13, 2.5]
    ).to_pylist()
    assert got == [None] * 6
    assert geohash([], [], []).to_pylist() == []
