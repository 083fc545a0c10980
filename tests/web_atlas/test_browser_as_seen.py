"""The Atlas as a new user saw it (issue 36), in headless Debian Chromium against a REAL InfluxDB: the
time slider shows the window the map draws, every cell is drawn in a legend colour after a hover and a
change, integer counts get integer legend classes, and the metric label is shown whole."""

from __future__ import annotations

import io
import re
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import s2_signed
from tests.web_atlas.conftest import JAKARTA, JAKARTA_EAST, E
from web_atlas.areas import area_by_name, view_for_area
from web_atlas.browser import CHROMIUM, DECK_SELECTOR, AtlasPage, chromium, serve_atlas
from web_atlas.colors import DEFAULT_ALPHA

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).is_file(), reason="Debian's chromium is not installed"),
]

VIEWPORT = {"width": 1500, "height": 950}
MINUTES = 30  # a point a minute for the half hour up to E (2025-11-22 08:00 UTC)


@pytest.fixture(scope="module")
def timeline_db(influxdb: Any) -> str:
    """A database with Jakarta bookings in each of the 30 one-minute windows up to E, in two cells."""
    db = f"atlas_{uuid.uuid4().hex[:8]}"
    influxdb.create_database(db)
    k1, k2 = s2_signed(*JAKARTA), s2_signed(*JAKARTA_EAST)
    lines = [
        f"bookings_per_s2,tag_city_id=1,tag_s2id={cell},tag_vehicle_type=CAR num_of_bookings={n + m}i "
        f"{E - 60 * m}"
        for m in range(MINUTES)
        for cell, n in ((k1, 20), (k2, 57))
    ]
    influxdb.write("\n".join(lines), db, precision="s")
    return db


@pytest.fixture(scope="module")
def atlas(influxdb: Any, timeline_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AtlasPage]:
    from playwright.sync_api import sync_playwright

    log = tmp_path_factory.mktemp("atlas") / "streamlit.log"
    # no base map: the cells are drawn over one plain colour, so each cell's colour can be told exactly
    with (
        serve_atlas(influxdb.url, timeline_db, log, extra_env={"DAGGERS_ATLAS_BASEMAP": "none"}) as server,
        sync_playwright() as pw,
    ):
        browser = chromium(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page_ = AtlasPage(page)
            page_.open(server.url)
            yield page_
        finally:
            browser.close()


def _label(end_s: int, size_s: int) -> str:
    end = datetime.fromtimestamp(end_s, UTC)
    start = datetime.fromtimestamp(end_s - size_s, UTC)
    return f"{start:%a %d %b %H:%M}–{end:%H:%M} UTC"


def slider_text(atlas: AtlasPage) -> str:
    """Return the window the time slider shows."""
    return atlas.page.get_by_test_id("stSliderThumbValue").first.inner_text().strip()


def map_window(atlas: AtlasPage) -> str:
    """Return the window the map draws (the caption under it starts with it)."""
    return atlas.caption().split(" · ")[0]


def shown(atlas: AtlasPage, want: str, timeout_s: float = 30.0) -> tuple[str, str]:
    """Return (the slider's window, the map's window) once both show ``want`` or, after ``timeout_s``,
    as they are (a rerun may still be on its way when a click returns)."""
    deadline = time.monotonic() + timeout_s
    while (slider_text(atlas), map_window(atlas)) != (want, want) and time.monotonic() < deadline:
        atlas.page.wait_for_timeout(200)
    return slider_text(atlas), map_window(atlas)


def click(atlas: AtlasPage, name: str) -> None:
    """Click the button ``name`` and wait for the rerun to end."""
    atlas.page.get_by_role("button", name=name, exact=True).click()
    atlas.page.wait_for_timeout(300)
    atlas.wait_idle()


def test_the_time_slider_shows_the_window_the_map_draws(atlas: AtlasPage) -> None:
    atlas.choose("Service area", "Jakarta")
    assert shown(atlas, _label(E, 60)) == (_label(E, 60), _label(E, 60))
    click(atlas, "◀")
    assert shown(atlas, _label(E - 60, 60)) == (_label(E - 60, 60), _label(E - 60, 60))
    click(atlas, "◀")
    assert shown(atlas, _label(E - 120, 60)) == (_label(E - 120, 60), _label(E - 120, 60))
    atlas.choose("Window", "15 min")  # 07:58 is no 15-minute window: both go to the newest
    assert shown(atlas, _label(E, 900)) == (_label(E, 900), _label(E, 900))
    atlas.choose("Window", "5 min")  # the slider showed 07:30–07:35 here, the map 07:55–08:00
    assert shown(atlas, _label(E, 300)) == (_label(E, 300), _label(E, 300))
    click(atlas, "◀")
    assert shown(atlas, _label(E - 300, 300)) == (_label(E - 300, 300), _label(E - 300, 300))
    assert atlas.page.get_by_test_id("stAlert").count() == 0  # no warning about the slider's state
    assert atlas.console_errors == [] and atlas.page_errors == []


BACKGROUND = (0xF3, 0xF2, 0xEE)  # web_atlas/static/blank-light.json


def legend_lines(atlas: AtlasPage) -> list[str]:
    """Return the lines of the legend's text (its title first)."""
    return [
        line.strip() for line in atlas.page.locator(".atlas-legend").inner_text().splitlines() if line.strip()
    ]


def legend_colours(atlas: AtlasPage) -> list[tuple[int, int, int]]:
    """Return the colours of the legend's swatches."""
    text = atlas.page.locator(".atlas-legend").inner_html()
    return [(int(r), int(g), int(b)) for r, g, b in re.findall(r"rgb\((\d+), (\d+), (\d+)\)", text)]


def off_legend_pixels(atlas: AtlasPage) -> int:
    """Return how many pixels of the map are in no colour a legend colour makes (drawn at the cells'
    alpha over the plain background; edges blend a cell's colour with its neighbour's or the background's)."""
    from PIL import Image

    image = np.asarray(Image.open(io.BytesIO(atlas.page.locator(DECK_SELECTOR).screenshot())).convert("RGB"))
    pixels = image.reshape(-1, 3).astype(np.float64)
    pixels = pixels[
        pixels.max(axis=1) - pixels.min(axis=1) > 25
    ]  # saturated: cells (not the ring, not the ground)
    a = DEFAULT_ALPHA / 255
    bg = np.asarray(BACKGROUND, dtype=np.float64)
    drawn = [np.asarray(c, dtype=np.float64) * a + bg * (1 - a) for c in legend_colours(atlas)]
    segments = [(bg, c) for c in drawn] + [(c, d) for i, c in enumerate(drawn) for d in drawn[i + 1 :]]
    best = np.full(len(pixels), np.inf)
    for p, q in segments:
        d = q - p
        t = np.clip(((pixels - p) @ d) / max(float(d @ d), 1e-9), 0.0, 1.0)
        best = np.minimum(best, np.linalg.norm(pixels - (p + t[:, None] * d), axis=1))
    return int((best > 8).sum())


def test_after_a_hover_a_change_draws_every_cell_in_a_legend_colour(atlas: AtlasPage) -> None:
    atlas.choose("Service area", "Jakarta")
    atlas.choose("Window", "1 min")
    view = view_for_area(area_by_name("Jakarta"))
    for change in (("Window", "5 min"), ("Colour scale", "linear"), ("Window", "15 min")):
        k1 = s2_signed(*JAKARTA)
        assert k1 in atlas.tooltip(*JAKARTA, view, expect=k1)  # hovered: that cell is highlighted
        atlas.page.mouse.move(5, 5)  # to the sidebar, to change what is shown
        if change[0] == "Colour scale":
            atlas.page.get_by_text("linear", exact=True).click()
            atlas.page.wait_for_timeout(300)
            atlas.wait_idle()
        else:
            atlas.choose(*change)
        # the new cells are drawn a moment after the run; a cell drawn in a colour of no legend stays so
        deadline = time.monotonic() + 20
        while (off := off_legend_pixels(atlas)) and time.monotonic() < deadline:
            atlas.page.wait_for_timeout(250)
        assert legend_colours(atlas) and off == 0, change


def test_integer_counts_get_whole_legend_classes(atlas: AtlasPage) -> None:
    atlas.choose("Service area", "Jakarta")
    atlas.choose("Window", "1 min")
    if atlas.page.get_by_text("quantile", exact=True).count():
        atlas.page.get_by_text("quantile", exact=True).first.click()
        atlas.page.wait_for_timeout(300)
        atlas.wait_idle()
    # the newest window: 20 bookings in one cell, 57 in the other (quantile classes: "20 – …" first)
    deadline = time.monotonic() + 30
    lines = legend_lines(atlas)
    while not any(line.startswith("20 – ") for line in lines) and time.monotonic() < deadline:
        atlas.page.wait_for_timeout(200)
        lines = legend_lines(atlas)
    classes = [
        line.strip() for line in lines[1:] if re.match(r"\s*\d", line)
    ]  # not the note on the cells' level
    assert lines[0] == "num_of_bookings" and classes[0].startswith("20 – ") and classes[-1].endswith(" – 57")
    assert all(re.fullmatch(r"\d+( – \d+)?", c) for c in classes), classes  # no "20 – 25.3"
    bounds = [tuple(int(x) for x in c.split(" – ")) for c in classes]
    assert all(lo <= hi for lo, hi in bounds) and all(
        a[-1] < b[0] for a, b in zip(bounds, bounds[1:], strict=False)
    )


def test_the_metric_label_is_shown_whole(atlas: AtlasPage) -> None:
    """It was cut ("num_of_bookings, all …") in the column beside the map, on a laptop's screen."""
    atlas.choose("Service area", "Jakarta")
    atlas.page.set_viewport_size({"width": 1280, "height": 800})
    try:
        atlas.page.wait_for_timeout(500)
        label = atlas.page.get_by_test_id("stMetricLabel").filter(has_text="num_of_bookings")
        cut = label.evaluate("""e => [e, ...e.querySelectorAll('*')].filter(
            x => x.scrollWidth > x.clientWidth + 1 && getComputedStyle(x).overflowX !== 'visible').length""")
        assert cut == 0 and label.inner_text().split() == ["num_of_bookings,", "all", "cells"]
    finally:
        atlas.page.set_viewport_size(VIEWPORT)
