"""S2 cell polygons and centres for the map, computed vectorised and kept by cell id.

:class:`CellGeometryCache` computes the corners (:func:`job.functions.s2.cell_vertices`) and centres
(:func:`job.functions.s2.cell_center`) of the cells it has not seen yet in one numpy call, and keeps
them in sorted arrays, so stepping through the windows of a city (mostly the same cells each
minute) costs a ``searchsorted`` instead of any S2 work.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from job.functions.s2 import EARTH_RADIUS_KM, cell_center, cell_vertices

DEFAULT_MAX_CELLS: Final = 2_000_000
"""Cells kept at most (about 100 bytes each); past it the cache starts again from the current cells."""


@dataclass(frozen=True)
class CellGeometry:
    """Corners and centres of cells, row ``k`` for the ``k``-th id asked for.

    ``polygons`` is ``(n, 4, 2)`` ``[lng, lat]`` degrees (deck.gl's order), counter-clockwise as
    S2's vertices 0..3; ``centers`` is ``(n, 2)`` ``[lat, lng]`` degrees. Invalid ids give NaN.
    """

    polygons: npt.NDArray[np.float64]
    centers: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return int(self.centers.shape[0])


class CellGeometryCache:
    """A thread-safe cache of S2 cell geometry keyed by uint64 cell id; see the module docstring."""

    def __init__(self, max_cells: int = DEFAULT_MAX_CELLS) -> None:
        self.max_cells = max_cells
        self._lock = threading.Lock()
        self._ids = np.empty(0, dtype=np.uint64)
        self._polygons = np.empty((0, 4, 2), dtype=np.float64)
        self._centers = np.empty((0, 2), dtype=np.float64)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return int(self._ids.size)

    def lookup(self, ids: npt.ArrayLike) -> CellGeometry:
        """Return the geometry of ``ids`` (uint64, flattened), computing only the cells not cached yet."""
        wanted = np.asarray(ids, dtype=np.uint64).ravel()
        with self._lock:
            known_ids, polygons, centers = self._ids, self._polygons, self._centers
            unique = np.unique(wanted)
            pos = np.searchsorted(known_ids, unique)
            found = pos < known_ids.size
            found[found] = known_ids[pos[found]] == unique[found]
            new_ids = unique[~found]
            self.hits += int(found.sum())
            self.misses += int(new_ids.size)
            if new_ids.size:
                new_polygons = cell_vertices(new_ids)[:, :, ::-1]  # (lat, lng) -> (lng, lat)
                new_centers = cell_center(new_ids)
                if known_ids.size + new_ids.size > self.max_cells:
                    keep = np.isin(known_ids, unique)
                    known_ids, polygons, centers = known_ids[keep], polygons[keep], centers[keep]
                merged = np.concatenate([known_ids, new_ids])
                order = np.argsort(merged, kind="stable")
                known_ids = merged[order]
                polygons = np.concatenate([polygons, new_polygons])[order]
                centers = np.concatenate([centers, new_centers])[order]
                self._ids, self._polygons, self._centers = known_ids, polygons, centers
        rows = np.searchsorted(known_ids, wanted)
        return CellGeometry(polygons[rows], centers[rows])

    def clear(self) -> None:
        """Forget every cell and reset the hit and miss counters."""
        with self._lock:
            self._ids = np.empty(0, dtype=np.uint64)
            self._polygons = np.empty((0, 4, 2), dtype=np.float64)
            self._centers = np.empty((0, 2), dtype=np.float64)
            self.hits = self.misses = 0


def distance_km(lat: npt.ArrayLike, lng: npt.ArrayLike, lat0: float, lng0: float) -> npt.NDArray[np.float64]:
    """Return great-circle distances (km, haversine on a sphere of ``EARTH_RADIUS_KM``) to ``(lat0, lng0)``."""
    phi, lam = np.radians(np.asarray(lat, dtype=np.float64)), np.radians(np.asarray(lng, dtype=np.float64))
    phi0, lam0 = np.radians(lat0), np.radians(lng0)
    a = np.sin((phi - phi0) / 2) ** 2 + np.cos(phi) * np.cos(phi0) * np.sin((lam - lam0) / 2) ** 2
    km: npt.NDArray[np.float64] = 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0.0, 1.0)))
    return km


def circle_path(lat0: float, lng0: float, radius_km: float, points: int = 96) -> list[list[float]]:
    """Return a closed ring of ``[lng, lat]`` points ``radius_km`` around ``(lat0, lng0)`` (a service area)."""
    bearing = np.linspace(0.0, 2 * np.pi, points + 1)
    d = radius_km / EARTH_RADIUS_KM
    phi0, lam0 = np.radians(lat0), np.radians(lng0)
    phi = np.arcsin(np.sin(phi0) * np.cos(d) + np.cos(phi0) * np.sin(d) * np.cos(bearing))
    lam = lam0 + np.arctan2(
        np.sin(bearing) * np.sin(d) * np.cos(phi0), np.cos(d) - np.sin(phi0) * np.sin(phi)
    )
    ring = np.stack([(np.degrees(lam) + 540.0) % 360.0 - 180.0, np.degrees(phi)], axis=-1)
    path: list[list[float]] = np.round(ring, 6).tolist()
    return path


__all__ = ["DEFAULT_MAX_CELLS", "CellGeometry", "CellGeometryCache", "circle_path", "distance_km"]
