"""The Atlas as a new user saw it (issue 36), in headless Debian Chromium against a REAL InfluxDB: the
time slider shows the window the map draws, every cell is drawn in a legend colour after a hover and a
change, integer counts get integer legend classes, and the metric label is shown whole."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import s2_signed
from tests.web_atlas.conftest import JAKARTA, JAKARTA_EAST, E
from web_atlas.browser import CHROMIUM, AtlasPage, chromium, serve_atlas

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
    lines = [f"bookings_per_s2,tag_city_id=1,tag_s2id={cell},tag_vehicle_type=CAR num_of_bookings={n + m}i "
             f"{E - 60 * m}" for m in range(MINUTES) for cell, n in ((k1, 20), (k2, 57))]
    influxdb.write("\n".join(lines), db, precision="s")
    return db


@pytest.fixture(scope="module")
def atlas(influxdb: Any, timeline_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AtlasPage]:
    from playwright.sync_api import sync_playwright

    log = tmp_path_factory.mktemp("atlas") / "streamlit.log"
    with serve_atlas(influxdb.url, timeline_db, log) as server, sync_playwright() as pw:
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
