"""Service areas (the city presets of the Atlas) and the map view that shows an area or a set of cells.

The presets are the cities synthetic events happen in (:data:`job.produce.cities.CITIES`): a
centre and a service radius. Choosing one flies the map there and keeps only the cells whose
centre lies within the radius (plus a margin of about one level-13 cell).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from job.produce.cities import CITIES
from web_atlas.geometry import distance_km

ALL_AREAS: Final = "All cities"
AREA_MARGIN_KM: Final = 2.0
"""Cells whose centre is this far outside an area's radius still belong to it (a level-13 cell is ~1.1 km)."""

_EARTH_CIRCUMFERENCE_KM: Final = 40075.016686
_TILE_PX: Final = 512  # deck.gl's world size at zoom 0
MIN_ZOOM: Final = 1.0
MAX_ZOOM: Final = 15.0


@dataclass(frozen=True)
class ServiceArea:
    """A city the Atlas can fly to: its centre (degrees) and service radius (km)."""

    name: str
    latitude: float
    longitude: float
    radius_km: float
    city_id: int


@dataclass(frozen=True)
class View:
    """A map camera: centre (degrees), zoom (deck.gl / Web Mercator, 512 px tiles), pitch and bearing."""

    latitude: float
    longitude: float
    zoom: float
    pitch: float = 0.0
    bearing: float = 0.0

    def tilted(self, pitch: float) -> View:
        """Return this view with ``pitch`` degrees of tilt (for 3D elevation)."""
        return View(self.latitude, self.longitude, self.zoom, pitch, self.bearing)


SERVICE_AREAS: Final[tuple[ServiceArea, ...]] = tuple(
    ServiceArea(c.name, c.lat, c.long, c.radius_km, c.city_id) for c in CITIES
)


def area_names() -> list[str]:
    """Return the choices of the service-area control: :data:`ALL_AREAS`, then the cities in id order."""
    return [ALL_AREAS, *(a.name for a in SERVICE_AREAS)]


def area_by_name(name: str) -> ServiceArea | None:
    """Return the service area called ``name`` (case-insensitive), or None for :data:`ALL_AREAS`.

    Raises:
        ValueError: no area has that name; the message lists the known ones.
    """
    if name.strip().casefold() == ALL_AREAS.casefold():
        return None
    for area in SERVICE_AREAS:
        if area.name.casefold() == name.strip().casefold():
            return area
    raise ValueError(f"unknown service area {name!r}; known: {', '.join(area_names())}")


def in_area(
    centers: npt.NDArray[np.float64], area: ServiceArea, margin_km: float = AREA_MARGIN_KM
) -> npt.NDArray[np.bool_]:
    """Return which ``(n, 2)`` ``[lat, lng]`` cell centres lie within ``area.radius_km + margin_km``."""
    if centers.size == 0:
        return np.zeros(0, dtype=bool)
    d = distance_km(centers[:, 0], centers[:, 1], area.latitude, area.longitude)
    return np.asarray(d <= area.radius_km + margin_km)


def _clamp_zoom(z: float) -> float:
    return round(min(max(z, MIN_ZOOM), MAX_ZOOM), 2)


def view_for_area(area: ServiceArea, width_px: int = 1000, height_px: int = 640) -> View:
    """Return the view centred on ``area`` with the zoom that fits its service circle (and margin)."""
    diameter_km = 2 * (area.radius_km + AREA_MARGIN_KM) * 1.1
    km_per_px_at_zoom0 = _EARTH_CIRCUMFERENCE_KM * math.cos(math.radians(area.latitude)) / _TILE_PX
    zoom = math.log2(km_per_px_at_zoom0 * min(width_px, height_px) / diameter_km)
    return View(area.latitude, area.longitude, _clamp_zoom(zoom))


def _mercator_y(lat_deg: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    phi = np.radians(np.clip(lat_deg, -85.0511, 85.0511))
    return np.log(np.tan(np.pi / 4 + phi / 2))


def view_for_cells(centers: npt.NDArray[np.float64], width_px: int = 1000, height_px: int = 640) -> View:
    """Return the view that fits the ``(n, 2)`` ``[lat, lng]`` centres (the whole world when there are none)."""
    finite = centers[np.isfinite(centers).all(axis=1)] if centers.size else centers
    if finite.size == 0:
        return View(0.0, 0.0, MIN_ZOOM)
    lat, lng = finite[:, 0], finite[:, 1]
    y = _mercator_y(lat)
    y_mid = (y.min() + y.max()) / 2
    center_lat = float(np.degrees(2 * np.arctan(np.exp(y_mid)) - np.pi / 2))
    center_lng = float((lng.min() + lng.max()) / 2)
    span_lng = max(float(lng.max() - lng.min()), 0.02)
    span_y = max(float(y.max() - y.min()), 0.0004)
    zoom_x = math.log2(0.85 * width_px * 360.0 / (_TILE_PX * span_lng))
    zoom_y = math.log2(0.85 * height_px * 2 * math.pi / (_TILE_PX * span_y))
    return View(round(center_lat, 6), round(center_lng, 6), _clamp_zoom(min(zoom_x, zoom_y)))


def project(lat: float, lng: float, view: View) -> tuple[float, float]:
    """Return the pixel offset ``(dx, dy)`` of ``(lat, lng)`` from the centre of a map showing ``view``
    (Web Mercator, no pitch or bearing): where to point at a cell on screen."""
    scale = _TILE_PX * 2**view.zoom
    dx = (lng - view.longitude) / 360.0 * scale
    y, y0 = _mercator_y(np.array([lat, view.latitude]))
    dy = -(y - y0) / (2 * math.pi) * scale
    return float(dx), float(dy)


__all__ = [
    "ALL_AREAS",
    "AREA_MARGIN_KM",
    "SERVICE_AREAS",
    "ServiceArea",
    "View",
    "area_by_name",
    "area_names",
    "in_area",
    "project",
    "view_for_area",
    "view_for_cells",
]
