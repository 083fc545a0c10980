"""The pydeck chart of the Atlas: a ``PolygonLayer`` of S2 cells (choropleth, optional 3D), a
``PathLayer`` ring around the chosen service area, place names (a ``TextLayer``, with the offline
base map), a tooltip, and the base map under it all (:mod:`web_atlas.basemap`: by default the
offline Natural Earth map served by the app itself).

:class:`AtlasDeck` serialises without indentation or key sorting (pydeck's own ``to_json`` indents
every value, which doubles the bytes and the time for 44,000 cells).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import pydeck as pdk
from pydeck.bindings.json_tools import default_serialize

from web_atlas.areas import View
from web_atlas.basemap import LABEL_LAYER_ID, STATIC_PREFIX, BaseMap, base_map, label_rows
from web_atlas.geometry import circle_path
from web_atlas.mapdata import MapData

LIGHT_STYLE: Final = "basemap-light.json"
DARK_STYLE: Final = "basemap-dark.json"
MAP_STYLES: Final[dict[str, str]] = {"light": LIGHT_STYLE, "dark": DARK_STYLE}
CELL_LAYER_ID: Final = "cells"
AREA_LAYER_ID: Final = "service-area"
FLY_MS: Final = 1200
"""How long the view takes to fly to a newly chosen area (ms)."""


def map_style_url(style: str) -> str:
    """Return the app-relative URL of the offline base map's MapLibre style ``style`` ("light" or "dark").

    Raises:
        ValueError: an unknown style; the message lists the known ones.
    """
    try:
        return f"{STATIC_PREFIX}/{MAP_STYLES[style]}"
    except KeyError:
        raise ValueError(f"map style {style!r} is not one of {', '.join(MAP_STYLES)}") from None


_RAW_KEY: Final = "_atlas_raw_data"
_ROWS_PLACEHOLDER: Final = "@@atlas-rows@@"


class AtlasDeck(pdk.Deck):
    """A :class:`pydeck.Deck` whose JSON is compact (no indentation, no sorted keys) and whose cell
    rows are spliced in as JSON text already written (:meth:`web_atlas.mapdata.MapData.rows_json`)."""

    def __init__(self, *args: Any, raw_data: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.__dict__[_RAW_KEY] = dict(raw_data or {})

    def to_json(self) -> str:
        """Return the deck.gl JSON spec (what ``st.pydeck_chart`` sends to the browser)."""
        raw: dict[str, str] = self.__dict__.pop(_RAW_KEY, {})
        try:
            text = json.dumps(self, default=default_serialize, separators=(",", ":"), allow_nan=False)
        finally:
            self.__dict__[_RAW_KEY] = raw
        for placeholder, payload in raw.items():
            text = text.replace(json.dumps(placeholder), payload, 1)
        return text


def view_state(view: View, *, fly_ms: int = FLY_MS) -> pdk.ViewState:
    """Return the pydeck view state of ``view``; a ``fly_ms`` transition animates moves to it."""
    return pdk.ViewState(
        latitude=view.latitude,
        longitude=view.longitude,
        zoom=view.zoom,
        pitch=view.pitch,
        bearing=view.bearing,
        min_zoom=1,
        max_zoom=18,
        transition_duration=fly_ms,
    )


def label_layer(rows: list[dict[str, Any]], *, dark: bool) -> pdk.Layer:
    """Return the ``TextLayer`` of place names: dark text with a light halo (light text with a dark
    one in the dark style), readable over land, sea and cells alike."""
    return pdk.Layer(
        "TextLayer",
        id=LABEL_LAYER_ID,
        data=rows,
        get_position="position",
        get_text="name",
        get_size="size",
        size_units='"pixels"',
        get_color=[235, 235, 235, 255] if dark else [34, 34, 34, 255],
        font_family='"Helvetica Neue, Arial, sans-serif"',
        font_weight=600,
        font_settings={"sdf": True},
        character_set='"auto"',  # the names' own characters (Cần Thơ, Biên Hòa), not ASCII only
        outline_width=3,
        outline_color=[20, 22, 28, 230] if dark else [255, 255, 255, 230],
        get_text_anchor='"middle"',
        get_alignment_baseline='"center"',
        pickable=False,
    )


def cell_layer_id(rows_json: str, shown: str = "") -> str:
    """Return the cell layer's id for the cell rows ``rows_json`` of the map ``shown`` (what the map is
    of: output, window, colour field, scale…): ``cells-`` and a digest of both.

    A new id for a new map makes deck.gl build the layer afresh. With one id, the cell hovered last kept
    its highlight through a change of window or output, and the cell at its index in the new rows was
    drawn in the highlight's blend: a colour that is not in the legend."""
    digest = hashlib.blake2b(shown.encode() + b"\0" + rows_json.encode(), digest_size=8)
    return f"{CELL_LAYER_ID}-{digest.hexdigest()}"


def build_deck(
    data: MapData,
    *,
    style: str = "light",
    height: int = 640,
    fly_ms: int = FLY_MS,
    basemap: BaseMap | None = None,
    shown: str = "",
) -> AtlasDeck:
    """Return the deck for ``data``: the cell layer, the service-area ring when an area is chosen,
    place names when the base map wants them, the tooltip, and ``basemap`` (default: the offline
    base map in ``style``); ``shown`` says what the map is of (see :func:`cell_layer_id`).

    Raises:
        ValueError: an unknown ``style``.
    """
    map_style_url(style)  # validates the style name
    dark = style == "dark"
    basemap = basemap or base_map("offline", dark=dark)
    rows_json = data.rows_json()
    layers: list[pdk.Layer] = [
        pdk.Layer(
            "PolygonLayer",
            id=cell_layer_id(rows_json, shown),
            data=_ROWS_PLACEHOLDER,
            get_polygon="polygon",
            position_format='"XY"',  # quoted: a plain string, not an accessor
            get_fill_color="fill",
            # No outlines: with them, every hover re-draws 44,000 paths, which took seconds with
            # software WebGL (SwiftShader); the fills' colours already tell the cells apart.
            stroked=False,
            filled=True,
            extruded=data.extruded,
            get_elevation="elevation" if data.extruded else 0,
            elevation_scale=1,
            wireframe=False,
            pickable=True,
            auto_highlight=True,
            highlight_color=[255, 255, 255, 110] if dark else [0, 0, 0, 60],
        )
    ]
    if data.area_ring is not None:
        area = data.area_ring
        layers.append(
            pdk.Layer(
                "PathLayer",
                id=AREA_LAYER_ID,
                data=[
                    {"name": area.name, "path": circle_path(area.latitude, area.longitude, area.radius_km)}
                ],
                get_path="path",
                get_color=[230, 230, 230, 200] if dark else [40, 40, 40, 170],
                width_min_pixels=1.5,
                get_width=30,
                pickable=False,
            )
        )
    if basemap.labels:
        layers.append(label_layer(label_rows(data.area_ring), dark=dark))
    style_box: dict[str, Any] = {
        "backgroundColor": "#20232a" if dark else "#ffffff",
        "color": "#f0f0f0" if dark else "#222222",
        "border": "1px solid rgba(128,128,128,.5)",
        "borderRadius": "4px",
        "padding": "6px 8px",
    }
    return AtlasDeck(
        layers=layers,
        initial_view_state=view_state(data.view, fly_ms=fly_ms),
        map_style=basemap.style_url,
        map_provider=None,
        tooltip={"html": data.tooltip_html, "style": style_box},
        height=height,
        raw_data={_ROWS_PLACEHOLDER: rows_json},
    )


__all__ = [
    "AREA_LAYER_ID",
    "CELL_LAYER_ID",
    "DARK_STYLE",
    "FLY_MS",
    "LIGHT_STYLE",
    "MAP_STYLES",
    "STATIC_PREFIX",
    "AtlasDeck",
    "build_deck",
    "cell_layer_id",
    "label_layer",
    "map_style_url",
    "view_state",
]
