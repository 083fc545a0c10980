"""Unit tests of map building (rows, comparison, elevation, area filter) and of the pydeck chart."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import s2sphere

from job.functions.s2 import latlng_to_cell_id, to_decimal_strings
from web_atlas.areas import area_by_name
from web_atlas.deck import AtlasDeck, build_deck, cell_layer_id, map_style_url
from web_atlas.geometry import CellGeometryCache
from web_atlas.mapdata import GONE_RGB, NEW_RGB, MapRequest, build_map, coordinate_decimals, row_key

JAKARTA = (-6.2088, 106.8456)


def _frame(points: list[tuple[float, float]], **values: list[float]) -> pd.DataFrame:
    ids = np.unique(latlng_to_cell_id([p[0] for p in points], [p[1] for p in points], 13))
    assert ids.size == len(points)
    frame = pd.DataFrame({"cell": to_decimal_strings(ids), "id": ids})
    order = np.argsort(latlng_to_cell_id([p[0] for p in points], [p[1] for p in points], 13))
    for name, vals in values.items():
        frame[name] = np.asarray(vals, dtype=np.float64)[order]
    return frame


def test_row_keys_are_template_safe() -> None:
    assert row_key("num_of_bookings") == "num_of_bookings"
    assert row_key("avg fare (IDR)") == "avg_fare__IDR_"
    assert row_key("cell") == "f_cell" and row_key("polygon") == "f_polygon" and row_key("2x") == "f_2x"


def test_rows_carry_polygon_colour_tags_and_values() -> None:
    frame = _frame([JAKARTA, (-6.25, 106.9), (-6.9175, 107.6191)], n=[10, 20, 5], avg=[1.5, math.nan, 2.0])
    req = MapRequest("n", ("n", "avg"), tags=(("tag_vehicle_type", "CAR"),), scale="linear")
    data = build_map(frame, req, CellGeometryCache())
    assert data.count == 3 and data.total == 35 and data.previous_total is None and not data.extruded
    by_cell = {r["cell"]: r for r in data.rows()}
    jak = by_cell[str(frame.loc[frame["n"] == 10, "cell"].iloc[0])]
    assert set(jak) == {"cell", "polygon", "fill", "n", "avg"}
    assert (jak["n"], jak["avg"]) == (10, 1.5)
    cid = s2sphere.CellId(int(jak["cell"]))
    corner = s2sphere.LatLng.from_point(s2sphere.Cell(cid).get_vertex(2))
    assert jak["polygon"][4:6] == [round(corner.lng().degrees, 4), round(corner.lat().degrees, 4)]
    assert json.loads(data.rows_json()) == data.rows() and data.decimals == 4
    assert by_cell[str(frame.loc[frame["n"] == 20, "cell"].iloc[0])]["avg"] == "–"  # NaN: no value
    # Linear from 5 to 20: 10 is a third of the way.
    assert jak["fill"] == [254, 178, 76, 210] and data.scale.domain == (5.0, 20.0)  # LIGHT_SEQUENTIAL[2]
    assert "<b>tag_vehicle_type</b> CAR" in data.tooltip_html and "{avg}" in data.tooltip_html
    assert "(level 13)" in data.tooltip_html
    assert data.legend_title == "n"


def test_area_filter_elevation_and_mean_summary() -> None:
    frame = _frame([JAKARTA, (-6.25, 106.9), (-6.9175, 107.6191)], n=[10, 20, 5])
    jakarta = area_by_name("Jakarta")
    data = build_map(
        frame, MapRequest("n", ("n",), elevation_field="n", area=jakarta, summary="mean"), CellGeometryCache()
    )
    assert sorted(r["n"] for r in data.rows()) == [10, 20] and data.total == 15.0
    assert sorted(r["elevation"] for r in data.rows()) == [1500.0, 3000.0]
    assert data.extruded and data.view.pitch == 45 and data.area_ring == jakarta
    assert (data.view.latitude, data.view.longitude) == JAKARTA


def test_comparison_joins_both_windows() -> None:
    current = _frame([JAKARTA, (-6.25, 106.9)], n=[10, 20])
    previous = _frame([JAKARTA, (-6.3, 106.7)], n=[4, 6])
    data = build_map(current, MapRequest("n", ("n",), compare="D-1"), CellGeometryCache(), previous)
    rows = sorted(data.rows(), key=lambda r: str(r["n"]))
    # a cell without a point on one side is new or gone, never a change from 0
    assert [(r["n"], r["n__prev"], r["n__diff"]) for r in rows] == [
        (10, 4, 6),
        (20, "–", "new"),
        ("–", 6, "gone"),
    ]
    assert [r["fill"] for r in rows[1:]] == [[*NEW_RGB, 210], [*GONE_RGB, 210]]
    assert (data.total, data.previous_total) == (30.0, 10.0)
    assert data.scale.diverging and data.legend_title == "n: change against D-1" and not data.scale.no_data
    assert [(e.color, e.label) for e in data.legend_extra] == [
        (NEW_RGB, "new: no point D-1"),
        (GONE_RGB, "gone: no point now"),
    ]
    assert data.compare_note == ""
    assert "{n__prev}" in data.tooltip_html and "{n__diff}" in data.tooltip_html


def test_no_baseline_is_no_comparison() -> None:
    """The D-1 window holds no point (or none in the service area): nothing is compared, nothing is a rise."""
    current = _frame([JAKARTA, (-6.25, 106.9)], n=[10, 20])
    alone = build_map(current, MapRequest("n", ("n",), scale="linear"), CellGeometryCache())
    for previous in (current.iloc[0:0], _frame([(-6.9175, 107.6191)], n=[5])):  # empty; only in Bandung
        data = build_map(
            current,
            MapRequest("n", ("n",), compare="D-1", scale="linear", area=area_by_name("Jakarta")),
            CellGeometryCache(),
            previous,
        )
        assert data.compare_note == "no D-1 data" and data.previous_total is None and data.legend_extra == ()
        assert data.legend_title == "n" and not data.scale.diverging
        assert [(r["n"], r["fill"]) for r in data.rows()] == [(r["n"], r["fill"]) for r in alone.rows()]
        assert all("n__prev" not in r and "n__diff" not in r for r in data.rows())
        assert "{n__prev}" not in data.tooltip_html


def test_mixed_levels_and_precision() -> None:
    ids = np.array(
        [int(latlng_to_cell_id(-6.2, 106.8, 13)), int(latlng_to_cell_id(-6.3, 106.9, 20))], dtype=np.uint64
    )
    frame = pd.DataFrame({"cell": to_decimal_strings(ids), "id": ids, "n": [1.0, 2.5]})
    data = build_map(frame, MapRequest("n", ("n",), level=20), CellGeometryCache())
    assert data.uniform_level is None and "(level {level})" in data.tooltip_html
    assert data.decimals == coordinate_decimals(20) == 7
    assert sorted((r["level"], r["n"]) for r in data.rows()) == [(13, 1), (20, 2.5)]
    assert (
        coordinate_decimals(10),
        coordinate_decimals(13),
        coordinate_decimals(16),
        coordinate_decimals(30),
    ) == (4, 4, 5, 9)


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="field 'x' is not one of n"):
        build_map(_frame([JAKARTA], n=[1]), MapRequest("x", ("n",)), CellGeometryCache())


def test_deck_json_is_compact_with_layers_tooltip_and_local_style() -> None:
    frame = _frame([JAKARTA, (-6.25, 106.9)], n=[10, 20])
    data = build_map(frame, MapRequest("n", ("n",), area=area_by_name("Jakarta")), CellGeometryCache())
    deck = build_deck(data, style="dark")
    assert isinstance(deck, AtlasDeck)
    text = deck.to_json()
    assert "\n" not in text and ": " not in text
    spec = json.loads(text)
    assert [(layer["@@type"], layer["id"]) for layer in spec["layers"]] == [
        ("PolygonLayer", cell_layer_id(data.rows_json())),
        ("PathLayer", "service-area"),
        ("TextLayer", "place-names"),
    ]
    # a layer of other rows is another layer to deck.gl: a highlight of the old rows is not carried over
    other = build_map(
        _frame([JAKARTA, (-6.25, 106.9)], n=[10, 21]), MapRequest("n", ("n",)), CellGeometryCache()
    )
    assert cell_layer_id(other.rows_json()) != cell_layer_id(data.rows_json())
    assert re.fullmatch(r"cells-[0-9a-f]{16}", cell_layer_id(data.rows_json()))
    assert cell_layer_id(data.rows_json(), "window 08:00") != cell_layer_id(data.rows_json(), "window 07:55")
    cells = spec["layers"][0]
    assert (cells["getPolygon"], cells["getFillColor"], cells["pickable"]) == ("@@=polygon", "@@=fill", True)
    assert cells["positionFormat"] == "XY" and cells["stroked"] is False
    assert (
        cells["data"] == data.rows()
        and len(cells["data"]) == 2
        and spec["mapStyle"] == "/app/static/basemap-dark.json"
    )
    assert spec["initialViewState"]["transitionDuration"] == 1200
    assert deck._tooltip["html"] == data.tooltip_html  # what st.pydeck_chart sends as the tooltip
    assert map_style_url("light") == "/app/static/basemap-light.json"
    names = spec["layers"][2]
    assert names["data"][0] == {"name": "Jakarta", "position": [106.8451, -6.2146], "size": 15.9}
    assert {"Bekasi", "Tangerang", "Depok"} <= {row["name"] for row in names["data"]}
    assert names["pickable"] is False and names["getText"] == "@@=name" and names["characterSet"] == "auto"
    with pytest.raises(ValueError, match="map style 'sepia' is not one of light, dark"):
        map_style_url("sepia")


def test_static_map_styles_are_blank_and_local() -> None:
    from pathlib import Path

    static = Path(__file__).resolve().parents[2] / "web_atlas" / "static"
    for name in ("blank-light.json", "blank-dark.json"):
        style = json.loads((static / name).read_text())
        assert style["version"] == 8 and style["sources"] == {}
        assert [layer["type"] for layer in style["layers"]] == ["background"]
        assert "http" not in (static / name).read_text()


def test_an_integer_field_gets_whole_legend_bounds() -> None:
    frame = _frame([JAKARTA, (-6.25, 106.9), (-6.3, 106.8)], n=[20, 57, 30], avg=[1.5, 2.25, 3.0])
    request = MapRequest("n", ("n", "avg"), integer_fields=("n",))
    assert [e.label for e in build_map(frame, request, CellGeometryCache()).scale.entries] == [
        "20 – 22",
        "23 – 25",
        "26 – 28",
        "29 – 33",
        "34 – 41",
        "42 – 49",
        "50 – 57",
    ]
    assert build_map(frame, replace(request, integer_fields=()), CellGeometryCache()).scale.entries[
        0
    ].label == ("20 – 22.9")
    floats = build_map(frame, replace(request, color_field="avg"), CellGeometryCache())
    assert floats.scale.entries[0].label == "1.5 – 1.71"
