"""Take a screenshot of the running Atlas with sample data (the README's ``docs/atlas.png``).

Usage::

    python -m web_atlas.screenshot docs/atlas.png [--area Jakarta] [--style light] [--elevation]

It starts a throw-away influxd (:class:`job.stack.influx.InfluxServer`) on ports from the OS,
writes :func:`web_atlas.sample.sample_points` for the Indonesian presets (fifteen one-minute
windows, plus the same windows a day and a week earlier), serves the Atlas as ``daggers atlas``
does, opens it in headless Chromium, picks the area and a 15-minute window, hovers the busiest
cell near the centre so its tooltip shows, and saves the page. Everything it started is stopped again.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import requests

from job.stack.influx import InfluxServer
from job.stack.ports import free_ports
from web_atlas.areas import ALL_AREAS, SERVICE_AREAS, area_by_name, view_for_area
from web_atlas.browser import AtlasPage, chromium, serve_atlas
from web_atlas.errors import AtlasError
from web_atlas.sample import MEASUREMENT, SamplePoints, sample_points

if TYPE_CHECKING:
    from playwright.sync_api import ViewportSize

WINDOW_END_S = 1_763_798_400  # 2025-11-22 08:00 UTC
WINDOW_S = 900  # the screenshot shows a 15-minute window (fifteen one-minute dagger windows summed)
VIEWPORT: ViewportSize = {"width": 1500, "height": 950}


def _busiest_cell(lines: list[str], start_s: int, end_s: int) -> tuple[str, int]:
    """Return (signed cell id, bookings) of the cell with the most bookings in ``(start_s, end_s]``."""
    totals: dict[str, int] = {}
    for line in lines:
        head, fields, t = line.rsplit(" ", 2)
        if not start_s < int(t) <= end_s:
            continue
        cell = head.split("tag_s2id=", 1)[1].split(",", 1)[0]
        bookings = int(fields.split("num_of_bookings=", 1)[1].split("i", 1)[0])
        totals[cell] = totals.get(cell, 0) + bookings
    cell = max(totals, key=lambda c: totals[c])
    return cell, totals[cell]


def take(out: Path, *, area_name: str = "Jakarta", style: str = "light", elevation: bool = False) -> Path:
    """Write the screenshot to ``out`` and return it.

    Raises:
        AtlasError: a service does not start, or the map does not show the expected tooltip.
    """
    from job.functions.s2 import cell_center, from_decimal_strings, to_decimal_strings
    from web_atlas.geometry import distance_km

    area = area_by_name(area_name)
    if area is None:
        return _take_all_cities(out, style=style)
    indonesia = [a for a in SERVICE_AREAS if a.city_id <= 8]
    ends = [WINDOW_END_S - 60 * k for k in range(WINDOW_S // 60)]
    ends += [e - 86_400 for e in ends] + [e - 7 * 86_400 for e in ends]
    sample = sample_points(indonesia, ends, seed=2026)
    # The busiest cell of the 15-minute window near the centre, so its tooltip fits on the map.
    ids = from_decimal_strings(
        sorted(
            {
                line.split("tag_s2id=", 1)[1].split(",", 1)[0]
                for line in sample.lines
                if f"tag_city_id={area.city_id}," in line
            }
        )
    )
    centers = cell_center(ids)
    central = {
        str(c)
        for c in to_decimal_strings(
            ids[
                distance_km(centers[:, 0], centers[:, 1], area.latitude, area.longitude)
                < 0.4 * area.radius_km
            ]
        )
    }
    near_centre = [line for line in sample.lines if line.split("tag_s2id=", 1)[1].split(",", 1)[0] in central]
    cell, bookings = _busiest_cell(near_centre, WINDOW_END_S - WINDOW_S, WINDOW_END_S)
    lat, lng = (float(x) for x in cell_center(from_decimal_strings([cell]))[0])
    with _sample_page(sample) as page:
        page.choose("Dagger output", MEASUREMENT)
        page.choose("Service area", area.name)
        page.choose("Window", "15 min")
        if style != "light":
            page.page.get_by_text(style, exact=True).click()
            page.wait_idle()
        if elevation:
            page.choose("Elevation (3D)", "num_of_bookings")
        page.page.wait_for_timeout(1500)  # the flight to the area
        if elevation:  # a tilted view: no simple pixel for the cell, show the map alone
            page.page.wait_for_timeout(2000)
        else:
            page.tooltip(lat, lng, view_for_area(area), expect=cell, timeout_s=60)
        _save(page, out)
    print(
        f"{out}: {area.name}, busiest central cell {cell} ({bookings} bookings in the 15 minutes to "
        f"{time.strftime('%H:%M', time.gmtime(WINDOW_END_S))} UTC)"
    )
    return out


def _take_all_cities(out: Path, *, style: str = "light") -> Path:
    """Write a screenshot of all the Indonesian presets at once (coarse cells, no tooltip) to ``out``."""
    indonesia = [a for a in SERVICE_AREAS if a.city_id <= 8]
    ends = [WINDOW_END_S - 60 * k for k in range(WINDOW_S // 60)]
    with _sample_page(sample_points(indonesia, ends, seed=2026)) as page:
        page.choose("Window", "15 min")
        if style != "light":
            page.page.get_by_text(style, exact=True).click()
            page.wait_idle()
        page.page.mouse.move(5, 5)
        page.page.wait_for_function(  # the 15-minute window is on the map (a slow rerun may still be going)
            """() => [...document.querySelectorAll('[data-testid="stCaptionContainer"]')]
                     .some(e => e.innerText.includes('07:45–08:00'))""",
            timeout=120_000,
        )
        page.wait_idle()
        page.page.wait_for_timeout(2500)
        _save(page, out)
    print(f"{out}: {ALL_AREAS}")
    return out


@contextlib.contextmanager
def _sample_page(sample: SamplePoints) -> Iterator[AtlasPage]:
    """Yield the Atlas open in headless Chromium over a throw-away influxd holding ``sample``; stop
    everything afterwards.

    Raises:
        AtlasError: InfluxDB refuses the points, or a service does not start.
    """
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="daggers-atlas-shot-") as tmp:
        port, bind_port = free_ports(2)
        influx = InfluxServer(Path(tmp) / "influx", port, bind_port)
        influx.start()
        try:
            influx.create_database("daggers")
            resp = requests.post(
                f"{influx.url}/write",
                params={"db": "daggers", "precision": "s"},
                data=sample.body().encode(),
                timeout=120,
            )
            if resp.status_code != 204:
                raise AtlasError(f"InfluxDB refused the sample points: {resp.text}")
            with (
                serve_atlas(influx.url, "daggers", Path(tmp) / "streamlit.log") as server,
                sync_playwright() as pw,
            ):
                browser = chromium(pw)
                try:
                    page = AtlasPage(browser.new_page(viewport=VIEWPORT))
                    page.open(server.url)
                    yield page
                finally:
                    browser.close()
        finally:
            influx.stop()


def _save(page: AtlasPage, out: Path) -> None:
    """Save the page to ``out``, unless it logged errors.

    Raises:
        AtlasError: the page logged console or page errors.
    """
    if page.console_errors or page.page_errors:
        raise AtlasError(f"errors in the page: {page.console_errors + page.page_errors}")
    out.parent.mkdir(parents=True, exist_ok=True)
    page.page.screenshot(path=str(out))


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and take the screenshot; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="PNG file to write, e.g. docs/atlas.png")
    parser.add_argument(
        "--area", default="Jakarta", help=f"service area to show (default Jakarta; {ALL_AREAS!r}: all)"
    )
    parser.add_argument("--style", default="light", choices=("light", "dark"), help="map style")
    parser.add_argument("--elevation", action="store_true", help="extrude the cells by num_of_bookings")
    args = parser.parse_args(argv)
    try:
        take(args.out, area_name=args.area, style=args.style, elevation=args.elevation)
    except AtlasError as exc:
        print(f"{exc.title}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
