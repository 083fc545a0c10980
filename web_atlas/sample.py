"""Dagger-shaped sample points for the Atlas's tests, benchmark and screenshot.

The points look like what the seed dagger ``bookings-per-s2`` writes: measurement
``bookings_per_s2``, tags ``tag_city_id``, ``tag_s2id`` (signed decimal level-13 S2 id) and
``tag_vehicle_type``, an integer field ``num_of_bookings``, a float field ``avg_distance_km``, and
the window's end as the point's time (seconds precision). Demand falls off from the city centre,
with a few hot spots, and is drawn from a seeded generator: the same arguments give the same points.
Only cells whose centre lies on land (the shipped land grid, :mod:`job.produce.geography`) get
points, as no booking happens at sea.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from job.functions.s2 import cell_center, latlng_to_cell_id, to_decimal_strings
from job.produce.geography import land_mask
from web_atlas.areas import ServiceArea
from web_atlas.geometry import distance_km

MEASUREMENT = "bookings_per_s2"
VEHICLE_TYPES = ("CAR", "BIKE")


def cells_in_circle(lat: float, lng: float, radius_km: float, level: int = 13) -> npt.NDArray[np.uint64]:
    """Return the sorted uint64 ids of the ``level`` cells whose centre is within ``radius_km`` of ``(lat, lng)``.

    A grid of points spaced at a third of the cell size finds every such cell.
    """
    cell_km = 1.1 * 2 ** (13 - level)
    step_km = cell_km / 3
    n = int(math.ceil((radius_km + cell_km) / step_km))
    offsets = np.arange(-n, n + 1) * step_km
    dy, dx = np.meshgrid(offsets, offsets, indexing="ij")
    lats = lat + dy.ravel() / 111.32
    lngs = lng + dx.ravel() / (111.32 * math.cos(math.radians(lat)))
    ids = np.unique(latlng_to_cell_id(lats, lngs, level))
    centers = cell_center(ids)
    return ids[distance_km(centers[:, 0], centers[:, 1], lat, lng) <= radius_km]


def land_cells(ids: npt.NDArray[np.uint64], city_id: int) -> npt.NDArray[np.uint64]:
    """Return the ``ids`` whose centre lies on land by the city's land grid (cells beyond the grid,
    or of a city without one, are kept)."""
    mask = land_mask()
    if city_id not in mask or not ids.size:
        return ids
    grid = mask.grids[city_id]
    centers = cell_center(ids)
    keep = grid.on_land(centers[:, 0], centers[:, 1]) | ~grid.covers(centers[:, 0], centers[:, 1])
    return ids[keep]


@dataclass(frozen=True)
class SamplePoints:
    """Line-protocol ``lines`` and how many points, cells and windows they hold."""

    lines: list[str]
    cells: int
    windows: int

    def body(self) -> str:
        """Return the points as one ``/write`` body (``precision=s``)."""
        return "\n".join(self.lines)


def _demand(
    ids: npt.NDArray[np.uint64], area: ServiceArea, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Return the mean bookings per minute of each cell: a fall-off from the centre plus hot spots."""
    centers = cell_center(ids)
    d = distance_km(centers[:, 0], centers[:, 1], area.latitude, area.longitude)
    mean = 6.0 * np.exp(-((d / (0.45 * area.radius_km)) ** 2))
    for _ in range(5):
        k = rng.integers(0, ids.size)
        hd = distance_km(centers[:, 0], centers[:, 1], centers[k, 0], centers[k, 1])
        mean += rng.uniform(3, 8) * np.exp(-((hd / rng.uniform(1.0, 3.0)) ** 2))
    return mean


def sample_points(
    areas: Sequence[ServiceArea],
    window_ends_s: Iterable[int],
    *,
    seed: int = 7,
    measurement: str = MEASUREMENT,
    level: int = 13,
    radius_km: float | None = None,
) -> SamplePoints:
    """Return sample points for every area and window (one-minute windows ending at ``window_ends_s``).

    ``radius_km`` overrides the areas' own radius (e.g. a whole metro region for the benchmark).
    Cells with no booking in a window get no point, as a dagger writes none.
    """
    rng = np.random.default_rng(seed)
    ends = list(window_ends_s)
    lines: list[str] = []
    cells = 0
    for area in areas:
        ids = land_cells(
            cells_in_circle(area.latitude, area.longitude, radius_km or area.radius_km, level), area.city_id
        )
        cells += ids.size
        signed = to_decimal_strings(ids)
        demand = _demand(ids, area, rng)
        for end in ends:
            minute_of_day = (end // 60) % 1440
            daily = 0.6 + 0.4 * math.sin(2 * math.pi * (minute_of_day - 360) / 1440)
            for share, vehicle in zip((0.65, 0.35), VEHICLE_TYPES, strict=True):
                counts = rng.poisson(demand * daily * share)
                distances = np.round(rng.gamma(4.0, 1.5, ids.size), 2)
                for k in np.flatnonzero(counts):
                    lines.append(
                        f"{measurement},tag_city_id={area.city_id},tag_s2id={signed[k]},"
                        f"tag_vehicle_type={vehicle} num_of_bookings={int(counts[k])}i,"
                        f"avg_distance_km={float(distances[k])} {int(end)}"
                    )
    return SamplePoints(lines, cells, len(ends))


__all__ = ["MEASUREMENT", "VEHICLE_TYPES", "SamplePoints", "cells_in_circle", "land_cells", "sample_points"]
