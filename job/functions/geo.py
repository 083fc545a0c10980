"""Vectorised geohash, as the original platform's ``GeoHash`` (com.github.davidmoten.geo).

A geohash of ``length`` characters interleaves 5·length bits, longitude first; each bit halves the
current interval and is 1 when the coordinate is at or above its middle. Every step runs on whole
numpy arrays; the characters go straight into an Arrow buffer.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from job.functions.arrow_text import pack_strings

BASE32 = "0123456789bcdefghjkmnpqrstuvwxyz"
MAX_LENGTH = 12
_ALPHABET = np.frombuffer(BASE32.encode(), dtype=np.uint8)


def _bisect(value: npt.NDArray[np.float64], low: float, high: float, bits: int) -> npt.NDArray[np.int64]:
    """Return the ``bits`` interval-halving bits of ``value`` in [low, high], most significant first."""
    lo = np.full(value.shape, low)
    hi = np.full(value.shape, high)
    out = np.zeros(value.shape, dtype=np.int64)
    for _ in range(bits):
        mid = (lo + hi) / 2
        up = value >= mid
        out = (out << 1) | up
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return out


def geohash(lat: npt.ArrayLike, lng: npt.ArrayLike, length: npt.ArrayLike) -> pa.StringArray:
    """Return the geohashes of the points with ``length`` characters each (broadcast together).

    NULL where a coordinate is NaN or out of range (|lat| > 90, |lng| > 180) or the length is not 1..12.
    """
    la, lo, ln = np.broadcast_arrays(
        np.asarray(lat, dtype=np.float64),
        np.asarray(lng, dtype=np.float64),
        np.asarray(length, dtype=np.float64),
    )
    la, lo, ln = la.ravel(), lo.ravel(), ln.ravel()
    valid = (np.abs(la) <= 90) & (np.abs(lo) <= 180) & (ln >= 1) & (ln <= MAX_LENGTH) & (ln == np.floor(ln))
    la, lo = np.where(valid, la, 0.0), np.where(valid, lo, 0.0)
    lengths = np.where(valid, ln, 0).astype(np.int64)
    width = int(lengths.max()) if lengths.size else 0
    total = 5 * width
    lon_bits = _bisect(lo, -180.0, 180.0, (total + 1) // 2)
    lat_bits = _bisect(la, -90.0, 90.0, total // 2)
    code = np.zeros(la.shape, dtype=np.int64)  # up to 60 bits, longitude bit first
    for k in range(total):
        if k % 2 == 0:
            bit = (lon_bits >> ((total + 1) // 2 - 1 - k // 2)) & 1
        else:
            bit = (lat_bits >> (total // 2 - 1 - k // 2)) & 1
        code = (code << 1) | bit
    chars = np.empty((la.size, width), dtype=np.uint8)
    for c in range(width):
        chars[:, c] = _ALPHABET[(code >> (5 * (width - 1 - c))) & 31]
    return pack_strings(chars, lengths, valid)
