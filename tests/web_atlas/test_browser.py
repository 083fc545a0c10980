"""The Atlas in a real browser: headless Debian Chromium (driven by Playwright) loads the running app
(``streamlit run`` as ``daggers atlas`` starts it) against a REAL InfluxDB, changes the city and the
colour field, hovers a known cell and reads its tooltip, and saves a screenshot of the polygons.

Nothing on the page may come from another host, and the console must stay free of errors.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.web_atlas.conftest import JAKARTA, KnownCells
from web_atlas.areas import area_by_name, view_for_area
from web_atlas.browser import CHROMIUM, AtlasPage, chromium, serve_atlas

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="Debian's chromium is not installed"),
]

VIEWPORT = {"width": 1500, "height": 950}


def _polygon_pixels(png: bytes) -> tuple[int, int]:
    """Return (pixels that are neither the blank map's background nor grey, distinct such colours)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    colours = image.getcolors(maxcolors=1 << 20) or []
    painted = [(n, c) for n, c in colours if max(c) - min(c) > 40]  # saturated: the choropleth's colours
    return sum(n for n, _ in painted), len(painted)


def test_atlas_in_chromium(influxdb: Any, city_db: KnownCells, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with serve_atlas(influxdb.url, city_db.db, tmp_path / "streamlit.log") as server, sync_playwright() as pw:
        browser = chromium(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            atlas = AtlasPage(page)
            atlas.open(server.url)
            assert page.locator(".atlas-legend").inner_text().startswith("num_of_bookings")

            # The city control flies the map to Jakarta and keeps its cells only.
            atlas.choose("Service area", "Jakarta")
            page.get_by_text("bookings_per_s2 · Jakarta").wait_for(state="visible", timeout=60_000)
            view = view_for_area(area_by_name("Jakarta"))
            text = atlas.tooltip(*JAKARTA, view, expect=city_db.k1)
            lines = [re.sub(r"\s+", " ", line).strip() for line in text.splitlines()]
            assert lines[0] == f"cell {city_db.k1} (level 13)"
            assert "tag_city_id all" in lines and "tag_vehicle_type all" in lines
            assert "num_of_bookings 50" in lines and "avg_distance_km 2.875" in lines

            # The field control recolours the map by another field; the tooltip keeps every value.
            atlas.choose("Colour by", "avg_distance_km")  # (a late rerun: the legend changes when it ends)
            page.locator(".atlas-legend", has_text="avg_distance_km").wait_for(timeout=60_000)
            assert page.locator(".atlas-legend").inner_text().startswith("avg_distance_km")
            text = atlas.tooltip(*JAKARTA, view, expect=city_db.k1)
            assert "avg_distance_km 2.875" in text and "num_of_bookings 50" in text

            page.mouse.move(5, 5)
            page.wait_for_timeout(300)
            shot = page.screenshot(path=str(tmp_path / "atlas.png"))
            painted, distinct = _polygon_pixels(
                page.locator('[data-testid="stDeckGlJsonChart"]').screenshot()
            )
            assert painted > 20_000 and distinct >= 5, (painted, distinct)
            assert len(shot) > 50_000

            assert atlas.console_errors == [] and atlas.page_errors == []
            assert atlas.hosts == {server.url.removeprefix("http://")}, atlas.hosts
        finally:
            browser.close()
