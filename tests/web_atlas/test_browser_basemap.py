"""The base map in a real browser (headless Debian Chromium via Playwright), under the cells of a REAL
InfluxDB: the offline Natural Earth map paints the Java Sea and Jakarta's land in their colours and
names Jakarta; a deployment's XYZ raster tiles come from a tile server this test starts on
127.0.0.1 (solid-colour PNG tiles it makes), are requested by the page and drawn under the cells.
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.web_atlas.conftest import KnownCells
from web_atlas.areas import View, area_by_name, project, view_for_area
from web_atlas.basemap import label_rows
from web_atlas.browser import CHROMIUM, DECK_SELECTOR, AtlasPage, chromium, serve_atlas

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="Debian's chromium is not installed"),
]

VIEWPORT = {"width": 1500, "height": 950}
JAVA_SEA = (-5.99, 106.80)  # Jakarta Bay, 24 km north of the centre: sea, inside the view, no cell
INLAND = (-6.47, 106.50)  # 46 km south-west of the centre: land, outside the service circle (no cell)
SEA_LIGHT = (0xC6, 0xDA, 0xE6)  # web_atlas/static/basemap-light.json
LAND_LIGHT = (0xF4, 0xF3, 0xEE)
TILE_RGB = (200, 30, 200)


def _canvas(atlas: AtlasPage) -> Any:
    """Return the map area's screenshot as an RGB numpy array."""
    from PIL import Image

    png = atlas.page.locator(DECK_SELECTOR).screenshot()
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(np.int64)


def _patch(atlas: AtlasPage, image: Any, lat: float, lng: float, view: View, half: int = 3) -> Any:
    """Return the median colour of the (2*half+1)^2 pixels around ``(lat, lng)`` in ``image``."""
    box = atlas.page.locator(DECK_SELECTOR).bounding_box()
    canvas = atlas.deck_box()
    dx, dy = project(lat, lng, view)
    x = round(canvas["x"] - box["x"] + canvas["width"] / 2 + dx)
    y = round(canvas["y"] - box["y"] + canvas["height"] / 2 + dy)
    return np.median(image[y - half : y + half + 1, x - half : x + half + 1].reshape(-1, 3), axis=0)


def _close(colour: Any, expected: tuple[int, int, int], tolerance: float = 12.0) -> bool:
    return float(np.abs(np.asarray(colour) - np.asarray(expected)).max()) <= tolerance


def _wait_for_colour(
    atlas: AtlasPage,
    lat: float,
    lng: float,
    view: View,
    expected: tuple[int, int, int],
    timeout_ms: int = 30_000,
) -> Any:
    """Return the screenshot once the pixel at ``(lat, lng)`` shows ``expected`` (the map has loaded)."""
    waited = 0
    while True:
        image = _canvas(atlas)
        colour = _patch(atlas, image, lat, lng, view)
        if _close(colour, expected) or waited >= timeout_ms:
            return image
        atlas.page.wait_for_timeout(500)
        waited += 500


@contextlib.contextmanager
def _jakarta(influxdb: Any, db: str, log: Path, env: dict[str, str]) -> Iterator[tuple[AtlasPage, str]]:
    """Yield the Atlas (with ``env``, no camera flight) open on Jakarta in Chromium, and its URL."""
    from playwright.sync_api import sync_playwright

    with (
        serve_atlas(influxdb.url, db, log, extra_env={"DAGGERS_ATLAS_FLY_MS": "0", **env}) as server,
        sync_playwright() as pw,
    ):
        browser = chromium(pw)
        try:
            atlas = AtlasPage(browser.new_page(viewport=VIEWPORT))
            atlas.open(server.url)
            atlas.choose("Service area", "Jakarta")
            atlas.page.mouse.move(5, 5)
            yield atlas, server.url
        finally:
            browser.close()


def test_offline_base_map_draws_sea_land_and_place_names_under_the_cells(
    influxdb: Any, city_db: KnownCells, tmp_path: Path
) -> None:
    jakarta = area_by_name("Jakarta")
    view = view_for_area(jakarta)
    with _jakarta(influxdb, city_db.db, tmp_path / "streamlit.log", {}) as (atlas, url):
        image = _wait_for_colour(atlas, *JAVA_SEA, view, SEA_LIGHT)
        sea, land = _patch(atlas, image, *JAVA_SEA, view), _patch(atlas, image, *INLAND, view)
        assert _close(sea, SEA_LIGHT), sea
        assert _close(land, LAND_LIGHT), land
        # The known cell at the centre is drawn over the land: a saturated choropleth colour.
        centre = _patch(atlas, image, jakarta.latitude + 0.012, jakarta.longitude + 0.012, view, half=1)
        assert max(centre) - min(centre) > 40 and not _close(centre, LAND_LIGHT), centre
        # "Jakarta" is written at its GeoNames position: dark text pixels around it (the cells,
        # land and sea there are all light or saturated).
        label = label_rows(jakarta)[0]
        assert label["name"] == "Jakarta"
        around = _patch(atlas, image, label["position"][1], label["position"][0], view, half=12)
        box = atlas.page.locator(DECK_SELECTOR).bounding_box()
        canvas = atlas.deck_box()
        dx, dy = project(label["position"][1], label["position"][0], view)
        x = round(canvas["x"] - box["x"] + canvas["width"] / 2 + dx)
        y = round(canvas["y"] - box["y"] + canvas["height"] / 2 + dy)
        text = image[y - 10 : y + 11, x - 40 : x + 41]
        dark = (text.max(axis=2) < 90) & (np.ptp(text, axis=2) < 30)
        assert dark.sum() > 40, (dark.sum(), around)
        # The attribution is on the map.
        attribution = atlas.page.locator(
            f"{DECK_SELECTOR} .maplibregl-ctrl-attrib, {DECK_SELECTOR} .mapboxgl-ctrl-attrib"
        ).first.inner_text()
        assert "Natural Earth" in attribution and "GeoNames" in attribution

        # The dark variant paints the same places in its own colours.
        atlas.page.get_by_text("dark", exact=True).click()
        atlas.wait_idle()
        atlas.page.mouse.move(5, 5)
        image = _wait_for_colour(atlas, *JAVA_SEA, view, (0x0E, 0x16, 0x20))
        assert _close(_patch(atlas, image, *JAVA_SEA, view), (0x0E, 0x16, 0x20))
        assert _close(_patch(atlas, image, *INLAND, view), (0x25, 0x2A, 0x31))

        assert atlas.console_errors == [] and atlas.page_errors == []
        assert atlas.hosts == {url.removeprefix("http://")}, atlas.hosts


class _TileServer:
    """A tile server on 127.0.0.1 (port from the OS) answering every ``/{z}/{x}/{y}.png`` with one
    solid-colour PNG tile, and recording the paths asked for."""

    def __init__(self, rgb: tuple[int, int, int]) -> None:
        from PIL import Image

        buffer = io.BytesIO()
        Image.new("RGB", (256, 256), rgb).save(buffer, format="PNG")
        tile = buffer.getvalue()
        requests: list[str] = []
        self.requests = requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                requests.append(self.path)
                parts = self.path.strip("/").removesuffix(".png").split("/")
                if len(parts) != 3 or not all(p.isdigit() for p in parts):
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(tile)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.end_headers()
                self.wfile.write(tile)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _TileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def tile_server() -> Iterator[_TileServer]:
    with _TileServer(TILE_RGB) as server:
        yield server


def test_deployment_raster_tiles_are_requested_and_drawn(
    influxdb: Any, city_db: KnownCells, tmp_path: Path, tile_server: _TileServer
) -> None:
    view = view_for_area(area_by_name("Jakarta"))
    env = {
        "DAGGERS_ATLAS_BASEMAP": "tiles",
        "DAGGERS_ATLAS_BASEMAP_URL": f"{tile_server.url}/{{z}}/{{x}}/{{y}}.png",
        "DAGGERS_ATLAS_ATTRIBUTION": "© Test Tiles",
    }
    with _jakarta(influxdb, city_db.db, tmp_path / "streamlit.log", env) as (atlas, url):
        image = _wait_for_colour(atlas, *JAVA_SEA, view, TILE_RGB)
        # The tiles are drawn where there is no cell (the same colour at sea and on land now)...
        assert _close(_patch(atlas, image, *JAVA_SEA, view), TILE_RGB)
        assert _close(_patch(atlas, image, *INLAND, view), TILE_RGB)
        # ...and under the cells, which keep their colours.
        jakarta = area_by_name("Jakarta")
        centre = _patch(atlas, image, jakarta.latitude + 0.012, jakarta.longitude + 0.012, view, half=1)
        assert not _close(centre, TILE_RGB), centre
        # Jakarta's tiles at the view's zoom were asked for: x/y of the centre at z = round(zoom) +/- 1
        # (MapLibre's 512-px zoom; 256-px tiles are one level deeper).
        asked = [
            tuple(int(v) for v in p.strip("/").removesuffix(".png").split("/")) for p in tile_server.requests
        ]
        assert asked, "no tile was requested"
        z = max(a[0] for a in asked)
        n = 2**z
        cx = int((jakarta.longitude + 180) / 360 * n)
        lat = np.radians(jakarta.latitude)
        cy = int((1 - np.log(np.tan(lat) + 1 / np.cos(lat)) / np.pi) / 2 * n)
        assert abs(z - (view.zoom + 1)) <= 1.5 and (z, cx, cy) in asked, (z, cx, cy, sorted(set(asked))[:10])
        assert "© Test Tiles" in atlas.caption()
        assert atlas.console_errors == [] and atlas.page_errors == []
        assert atlas.hosts == {url.removeprefix("http://"), tile_server.url.removeprefix("http://")}
