"""The base map choices and the shipped offline base map (unit tests; the browser tests draw them)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from web_atlas.areas import area_by_name
from web_atlas.basemap import (
    AREA_LABEL_MIN_POP,
    MAX_LABELS,
    OFFLINE_ATTRIBUTION,
    WIDE_LABEL_MIN_POP,
    base_map,
    label_rows,
    raster_style,
)

STATIC = Path(__file__).resolve().parents[2] / "web_atlas" / "static"


@pytest.mark.parametrize("variant", ["light", "dark"])
def test_offline_styles_draw_land_coast_and_borders_from_files_the_app_serves(variant: str) -> None:
    style = json.loads((STATIC / f"basemap-{variant}.json").read_text())
    assert [(layer["id"], layer["type"]) for layer in style["layers"]] == [
        ("sea", "background"),
        ("land", "fill"),
        ("coastline", "line"),
        ("provinces", "line"),
        ("borders", "line"),
    ]
    assert style["sources"]["land"]["attribution"] == OFFLINE_ATTRIBUTION
    for source in style["sources"].values():
        path = source["data"].removeprefix("/app/static/")
        data = json.loads((STATIC / path).read_text())
        assert data["type"] == "FeatureCollection" and data["features"]
        assert "Natural Earth" in data["attribution"]
    assert "http" not in (STATIC / f"basemap-{variant}.json").read_text()
    assert "glyphs" not in style and "sprite" not in style  # nothing to fetch for labels


def test_shipped_base_map_is_small() -> None:
    sizes = sum(p.stat().st_size for p in (STATIC / "basemap").iterdir())
    assert 100_000 < sizes < 3_000_000


def test_base_map_kinds() -> None:
    offline = base_map("offline", dark=True)
    assert (offline.style_url, offline.labels, offline.attribution) == (
        "/app/static/basemap-dark.json",
        True,
        OFFLINE_ATTRIBUTION,
    )
    assert base_map("none", dark=False).style_url == "/app/static/blank-light.json"
    own = base_map("style", dark=False, url="https://maps.example/style.json", attribution="© Example")
    assert (own.style_url, own.labels, own.attribution) == (
        "https://maps.example/style.json",
        False,
        "© Example",
    )
    tiles = base_map(
        "tiles", dark=False, url="http://127.0.0.1:9/t/{z}/{x}/{y}.png", tile_size=512, attribution="© Tiles"
    )
    assert tiles.style_url.startswith("data:application/json,") and not tiles.labels
    assert json.loads(unquote(tiles.style_url.removeprefix("data:application/json,"))) == raster_style(
        "http://127.0.0.1:9/t/{z}/{x}/{y}.png", tile_size=512, attribution="© Tiles"
    )
    with pytest.raises(ValueError, match="base map 'tiles' needs a URL"):
        base_map("tiles", dark=False)
    with pytest.raises(ValueError, match="base map 'globe' is not one of offline, style, tiles, none"):
        base_map("globe", dark=False)  # type: ignore[arg-type]


def test_labels_name_the_towns_of_an_area_or_the_big_cities() -> None:
    jakarta = label_rows(area_by_name("Jakarta"))
    names = [row["name"] for row in jakarta]
    assert names[:4] == ["Jakarta", "Bekasi", "Depok", "Tangerang"]  # biggest first
    assert "Bandung" not in names and "Singapore" not in names
    assert jakarta[0] == {"name": "Jakarta", "position": [106.8451, -6.2146], "size": 15.9}
    assert all(12.0 <= row["size"] <= 18.0 for row in jakarta) and len(jakarta) <= MAX_LABELS
    wide = [row["name"] for row in label_rows(None)]
    assert {"Jakarta", "Surabaya", "Bandung", "Medan", "Singapore", "Bangkok"} <= set(wide)
    assert "Utan" not in wide and AREA_LABEL_MIN_POP < WIDE_LABEL_MIN_POP


def test_settings_choose_the_base_map_from_the_environment() -> None:
    from web_atlas.errors import AtlasError
    from web_atlas.settings import AtlasSettings

    assert AtlasSettings.from_env({}).base_map(dark=False).style_url == "/app/static/basemap-light.json"
    tiles = AtlasSettings.from_env(
        {
            "DAGGERS_ATLAS_BASEMAP": "tiles",
            "DAGGERS_ATLAS_TILE_SIZE": "512",
            "DAGGERS_ATLAS_BASEMAP_URL": "http://127.0.0.1:9/{z}/{x}/{y}.png",
            "DAGGERS_ATLAS_ATTRIBUTION": "© City GIS",
        }
    )
    shown = tiles.base_map(dark=True)
    assert shown.attribution == "© City GIS" and '"tileSize":512' in unquote(shown.style_url)
    style = AtlasSettings.from_env(
        {"DAGGERS_ATLAS_BASEMAP": "style", "DAGGERS_ATLAS_BASEMAP_URL": "/app/static/x.json"}
    )
    assert style.base_map(dark=False).style_url == "/app/static/x.json"
    for env, message in [
        ({"DAGGERS_ATLAS_BASEMAP": "tiles"}, "basemap=tiles needs DAGGERS_ATLAS_BASEMAP_URL"),
        (
            {"DAGGERS_ATLAS_BASEMAP": "tiles", "DAGGERS_ATLAS_BASEMAP_URL": "http://h/{z}.png"},
            "needs {z}, {x} and {y}",
        ),
        (
            {"DAGGERS_ATLAS_BASEMAP": "globe"},
            "DAGGERS_ATLAS_BASEMAP: Input should be 'offline', 'style', 'tiles' or 'none'",
        ),
        (
            {"DAGGERS_ATLAS_BASEMAP_URL": "ftp://h/s.json"},
            "DAGGERS_ATLAS_BASEMAP_URL: 'ftp://h/s.json' is not an http(s) URL",
        ),
        ({"DAGGERS_ATLAS_TILE_SIZE": "300"}, "DAGGERS_ATLAS_TILE_SIZE: 300 is not 256 or 512"),
    ]:
        with pytest.raises(AtlasError, match=re.escape(message)):
            AtlasSettings.from_env(env)


def test_borders_hold_country_and_province_lines_of_the_region() -> None:
    features = json.loads((STATIC / "basemap" / "borders.json").read_text())["features"]
    admin = [f["properties"]["admin"] for f in features]
    assert admin.count(0) > 5 and admin.count(1) > 100 and set(admin) == {0, 1}
    lngs = [
        x
        for f in features
        for line in (
            f["geometry"]["coordinates"]
            if f["geometry"]["type"] == "MultiLineString"
            else [f["geometry"]["coordinates"]]
        )
        for x, _ in line
    ]
    assert min(lngs) >= 94.0 and max(lngs) <= 142.0
