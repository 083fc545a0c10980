"""The Atlas's base map: what is drawn under the cells, chosen by :class:`BaseMapSettings`.

``offline`` (the default)
    The base map shipped with Daggers, drawn with nothing from another host: MapLibre styles
    (``static/basemap-light.json``, ``-dark.json``) fill Natural Earth 1:10m land over a sea-coloured
    background, stroke the coastline and the country borders (GeoJSON in ``static/basemap/``, served
    by the app itself), and place names (GeoNames towns, :func:`job.produce.geography.places`) are a
    deck.gl ``TextLayer`` above the cells (deck.gl draws its own font atlas, so no glyphs are
    fetched). ``scripts/make_basemap.py`` regenerates the data from the registry packages.
``style``
    A deployment's own MapLibre style URL (vector or raster tiles, with its own labels).
``tiles``
    A deployment's XYZ raster tile URL template (``{z}/{x}/{y}``): the Atlas wraps it in a
    one-source MapLibre style, passed inline as a ``data:`` URL.
``none``
    A plain background (``static/blank-*.json``): no base map at all.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import quote

from job.produce.geography import Place, places
from web_atlas.areas import ServiceArea, View, view_for_area
from web_atlas.geometry import distance_km

BaseMapKind = Literal["offline", "style", "tiles", "none"]
BASEMAP_KINDS: Final[tuple[str, ...]] = ("offline", "style", "tiles", "none")
STATIC_PREFIX: Final = "/app/static"
OFFLINE_ATTRIBUTION: Final = "Made with Natural Earth (public domain) · places © GeoNames (CC BY 4.0)"
"""The offline base map's sources and licences, shown on the map (MapLibre's attribution control)."""
LABEL_LAYER_ID: Final = "place-names"
AREA_LABEL_MIN_POP: Final = 20_000
"""Places within a chosen service area (and a margin) with at least this many inhabitants are named."""
WIDE_LABEL_MIN_POP: Final = 1_000_000
"""With no area chosen (all cities), only places this big are named."""
LABEL_MARGIN_KM: Final = 8.0
MAX_LABELS: Final = 40
LABEL_BOX_PX: Final = (90.0, 22.0)
"""Width and height (px) kept free around a label's anchor: a smaller town closer than that is not named."""
WIDE_ZOOM: Final = 4.5
"""About the zoom of the all-cities view (Medan to Makassar, Bangkok to Bali)."""


@dataclass(frozen=True)
class BaseMap:
    """What the deck needs for the base map: the MapLibre ``style_url``, whether to add place names,
    and the attribution to state."""

    style_url: str
    labels: bool
    attribution: str


def offline_style_url(dark: bool) -> str:
    """Return the app-relative URL of the shipped offline style."""
    return f"{STATIC_PREFIX}/basemap-{'dark' if dark else 'light'}.json"


def blank_style_url(dark: bool) -> str:
    """Return the app-relative URL of the plain background style."""
    return f"{STATIC_PREFIX}/blank-{'dark' if dark else 'light'}.json"


def raster_style(
    tiles_url: str, *, tile_size: int = 256, attribution: str = "", dark: bool = False
) -> dict[str, Any]:
    """Return a MapLibre style drawing the XYZ raster tiles ``tiles_url`` over a plain background."""
    return {
        "version": 8,
        "name": "Daggers Atlas raster tiles",
        "sources": {
            "tiles": {
                "type": "raster",
                "tiles": [tiles_url],
                "tileSize": tile_size,
                "attribution": attribution,
            }
        },
        "layers": [
            {
                "id": "background",
                "type": "background",
                "paint": {"background-color": "#1b1d23" if dark else "#f3f2ee"},
            },
            {"id": "tiles", "type": "raster", "source": "tiles"},
        ],
    }


def data_url(style: dict[str, Any]) -> str:
    """Return ``style`` as a ``data:`` URL (MapLibre fetches it without asking any host)."""
    return "data:application/json," + quote(json.dumps(style, separators=(",", ":")), safe="")


def base_map(
    kind: BaseMapKind, *, dark: bool, url: str | None = None, tile_size: int = 256, attribution: str = ""
) -> BaseMap:
    """Return the base map of ``kind`` (see the module docstring) in the light or dark variant.

    Raises:
        ValueError: ``style`` or ``tiles`` without a ``url``, or an unknown kind.
    """
    if kind == "offline":
        return BaseMap(offline_style_url(dark), True, OFFLINE_ATTRIBUTION)
    if kind == "none":
        return BaseMap(blank_style_url(dark), False, "")
    if kind not in ("style", "tiles"):
        raise ValueError(f"base map {kind!r} is not one of {', '.join(BASEMAP_KINDS)}")
    if not url:
        raise ValueError(f"base map {kind!r} needs a URL")
    if kind == "style":
        return BaseMap(url, False, attribution)
    return BaseMap(
        data_url(raster_style(url, tile_size=tile_size, attribution=attribution, dark=dark)),
        False,
        attribution,
    )


def _label_size(population: int) -> float:
    """Return a label's font size (px): 12 for a town of 20,000, growing with the population to 18."""
    return round(min(18.0, 12.0 + 1.5 * max(0.0, math.log10(max(population, 1) / 20_000))), 1)


def _km_per_px(area: ServiceArea | None) -> float:
    """Return the ground size of a pixel where the labels are drawn: the area's view, or the view of
    all the cities (about zoom 4.5)."""
    view = view_for_area(area) if area is not None else View(0.0, 110.0, WIDE_ZOOM)
    return 40075.016686 * math.cos(math.radians(view.latitude)) / (512 * 2**view.zoom)


def _crowded(place: Place, chosen: list[Place], km_per_px: float) -> bool:
    """Return whether ``place``'s label would overlap one already chosen (a box of
    :data:`LABEL_BOX_PX` around each)."""
    width_km, height_km = LABEL_BOX_PX[0] * km_per_px, LABEL_BOX_PX[1] * km_per_px
    for other in chosen:
        dy = abs(place.lat - other.lat) * 111.2
        dx = abs(place.lng - other.lng) * 111.2 * math.cos(math.radians(place.lat))
        if dx < width_km and dy < height_km:
            return True
    return False


def label_rows(area: ServiceArea | None) -> list[dict[str, Any]]:
    """Return the place names to draw: the towns in and around ``area`` (or, with no area, the big
    cities), biggest first, leaving out a town whose label would overlap a bigger one's, at most
    :data:`MAX_LABELS`; each row has ``name``, ``position`` (``[lng, lat]``) and ``size`` (px)."""
    chosen: list[Place] = []
    km_per_px = _km_per_px(area)
    for place in places():
        if area is not None:
            d = float(distance_km(place.lat, place.lng, area.latitude, area.longitude))
            keep = d <= area.radius_km + LABEL_MARGIN_KM and place.population >= AREA_LABEL_MIN_POP
        else:
            keep = place.population >= WIDE_LABEL_MIN_POP
        if keep and not _crowded(place, chosen, km_per_px):
            chosen.append(place)
        if len(chosen) >= MAX_LABELS:
            break
    return [{"name": p.name, "position": [p.lng, p.lat], "size": _label_size(p.population)} for p in chosen]


__all__ = [
    "AREA_LABEL_MIN_POP",
    "BASEMAP_KINDS",
    "LABEL_LAYER_ID",
    "MAX_LABELS",
    "OFFLINE_ATTRIBUTION",
    "STATIC_PREFIX",
    "WIDE_LABEL_MIN_POP",
    "BaseMap",
    "BaseMapKind",
    "base_map",
    "blank_style_url",
    "data_url",
    "label_rows",
    "offline_style_url",
    "raster_style",
]
