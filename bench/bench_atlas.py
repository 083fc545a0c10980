"""Benchmark the Atlas on a whole metro region: 44,000 level-13 S2 cells in one window.

Usage::

    python bench/bench_atlas.py [--cells 44000] [--repeat 5] [--browser-runs 3] [--no-browser]
                                [--basemaps offline,none]

Two parts, in this process and on this machine:

1. **Python** (best of ``--repeat``): cell polygons with :func:`job.functions.s2.cell_vertices`
   (vectorised, what the Atlas uses) against a per-cell s2sphere loop (the peer); the whole map
   build (:func:`web_atlas.mapdata.build_map`: polygons, colours, rows) with a cold and a warm
   geometry cache; the deck JSON with :class:`web_atlas.deck.AtlasDeck` (compact) against pydeck's
   own ``Deck.to_json`` (indented, sorted: the peer).
2. **Browser** (median of ``--browser-runs``): a real influxd holds the 44,000 cells; the Atlas runs
   as ``daggers atlas`` starts it (with ``DAGGERS_ATLAS_FLY_MS=0``, so no camera flight is timed);
   headless Chromium switches the service area from Singapore (no cells: a blank map) to "All
   cities" (44,000 cells) and watches the pixel of a cell far from Jakarta until it turns from the
   background colour to the cell's (then, untimed, hovers it and checks the tooltip names that
   cell). Reported: that time; the InfluxQL read time the app measured for the run and the
   difference, the time *after the data arrived* (map build, transfer, JSON parse, deck.gl draw);
   when the deck spec reached the page (the "cells" metric, rendered after the deck, updated);
   and the CPU seconds Chromium, the Atlas server and the test driver used meanwhile (the machine
   is shared: wall-clock times grow with its load, which is printed too). The cell size is fixed
   at level 13 (the view would otherwise draw coarser cells, :mod:`web_atlas.coarsen`), and the
   browser part runs once per ``--basemaps`` entry in the same run: the offline base map against
   a plain background (``none``, the peer), so their ratio is what the base map costs.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from job.functions.s2 import cell_center, cell_vertices, to_decimal_strings  # noqa: E402
from web_atlas.areas import area_by_name, view_for_cells  # noqa: E402
from web_atlas.coarsen import cell_edge_km  # noqa: E402
from web_atlas.deck import build_deck  # noqa: E402
from web_atlas.geometry import CellGeometryCache, distance_km  # noqa: E402
from web_atlas.mapdata import MapRequest, build_map, paused_gc  # noqa: E402
from web_atlas.sample import cells_in_circle  # noqa: E402

LEVEL = 13
T = TypeVar("T")


def _best(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    """Return (best seconds over ``repeat`` runs, last result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def region_cells(n: int) -> np.ndarray:
    """Return the ``n`` level-13 cells nearest Jakarta's centre (a contiguous metro region), sorted."""
    jakarta = area_by_name("Jakarta")
    assert jakarta is not None
    radius = max(30.0, float(np.sqrt(n * 1.35 / np.pi)) * 1.1)
    ids = cells_in_circle(jakarta.latitude, jakarta.longitude, radius, LEVEL)
    centers = cell_center(ids)
    nearest = np.argsort(distance_km(centers[:, 0], centers[:, 1], jakarta.latitude, jakarta.longitude))[:n]
    if nearest.size < n:
        raise SystemExit(f"only {nearest.size} cells within {radius:.0f} km")
    return np.sort(ids[nearest])


def s2sphere_polygons(ids: np.ndarray) -> list[list[list[float]]]:
    """The peer: each cell's corners with s2sphere, one cell at a time ([lng, lat] like the Atlas)."""
    import s2sphere

    out = []
    for cid in ids.tolist():
        cell = s2sphere.Cell(s2sphere.CellId(cid))
        corners = []
        for k in range(4):
            ll = s2sphere.LatLng.from_point(cell.get_vertex(k))
            corners.append([ll.lng().degrees, ll.lat().degrees])
        out.append(corners)
    return out


def python_part(ids: np.ndarray, repeat: int) -> dict[str, Any]:
    """Time the Python side; return the figures."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {
            "cell": to_decimal_strings(ids),
            "id": ids,
            "num_of_bookings": rng.poisson(6, ids.size).astype(np.float64),
            "avg_distance_km": np.round(rng.gamma(4, 1.5, ids.size), 2),
        }
    )
    request = MapRequest(
        "num_of_bookings",
        ("num_of_bookings", "avg_distance_km"),
        tags=(("tag_city_id", "all"), ("tag_vehicle_type", "all")),
        level=LEVEL,
        combine=(("num_of_bookings", "sum"), ("avg_distance_km", "mean")),
    )
    cell_vertices(ids[:10])  # warm-up
    vec_s, vec = _best(lambda: cell_vertices(ids), repeat)
    m = min(ids.size, 44_000)
    peer_s, peer = _best(lambda: s2sphere_polygons(ids[:m]), 1)
    assert np.allclose(np.asarray(peer), vec[:m, :, ::-1], atol=1e-12), "polygons differ from s2sphere"
    cold_s, _ = _best(lambda: build_map(frame, request, CellGeometryCache()), repeat)
    cache = CellGeometryCache()
    build_map(frame, request, cache)
    warm_s, data = _best(lambda: build_map(frame, request, cache), repeat)
    json_s, text = _best(lambda: build_deck(data).to_json(), repeat)
    auto = replace(request, level=None)  # the view's own level: coarser cells, each summing its children
    auto_s, coarse = _best(lambda: build_map(frame, auto, cache), repeat)

    import pydeck as pdk

    peer_deck = pdk.Deck(
        layers=[
            pdk.Layer(
                "PolygonLayer", data=data.rows(), get_polygon="polygon", get_fill_color="fill", pickable=True
            )
        ],
        map_style=None,
        tooltip={"html": data.tooltip_html},
    )

    def pydeck_json() -> str:
        with paused_gc():
            return str(peer_deck.to_json())

    pydeck_s, pydeck_text = _best(pydeck_json, max(1, repeat // 2))
    return {
        "cells": ids.size,
        "vec_s": vec_s,
        "peer_s": peer_s,
        "peer_cells": m,
        "cold_s": cold_s,
        "warm_s": warm_s,
        "auto_s": auto_s,
        "auto_cells": coarse.count,
        "auto_level": coarse.uniform_level,
        "json_s": json_s,
        "json_mb": len(text) / 1e6,
        "pydeck_s": pydeck_s,
        "pydeck_mb": len(pydeck_text) / 1e6,
    }


def browser_part(ids: np.ndarray, runs: int, work: Path, basemap: str = "offline") -> dict[str, Any]:
    """Time the real app in Chromium with the base map ``basemap``; return the figures (see the
    module docstring)."""
    from playwright.sync_api import sync_playwright

    from job.stack.influx import InfluxServer
    from job.stack.ports import free_ports
    from web_atlas.browser import AtlasPage, chromium, serve_atlas

    rng = np.random.default_rng(9)
    signed = to_decimal_strings(ids)
    end = 1_763_798_400
    counts = rng.poisson(6, ids.size) + 1
    body = "\n".join(
        f"bookings_per_s2,tag_s2id={c} num_of_bookings={int(n)}i {end}"
        for c, n in zip(signed.tolist(), counts.tolist(), strict=True)
    )
    centers = cell_center(ids)
    jakarta = area_by_name("Jakarta")
    assert jakarta is not None
    # A cell north of Jakarta, 60% of the way to the region's edge: on screen in the "All cities"
    # view whatever the canvas width.
    reach = float(distance_km(centers[:, 0], centers[:, 1], jakarta.latitude, jakarta.longitude).max())
    target_lat = jakarta.latitude + 0.6 * reach / 111.2
    far = int(np.argmin(distance_km(centers[:, 0], centers[:, 1], target_lat, jakarta.longitude)))
    all_view = view_for_cells(centers)
    port, bind_port = free_ports(2)
    influx = InfluxServer(work / "influx", port, bind_port)
    influx.start()
    try:
        influx.create_database("bench")
        import requests

        started = time.perf_counter()
        resp = requests.post(
            f"{influx.url}/write", params={"db": "bench", "precision": "s"}, data=body, timeout=120
        )
        assert resp.status_code == 204, resp.text
        write_s = time.perf_counter() - started
        load_before = os.getloadavg()[0]
        # No fly-to animation: measure drawing, not the 1.2 s camera flight.
        env = {"DAGGERS_ATLAS_FLY_MS": "0", "DAGGERS_ATLAS_BASEMAP": basemap}
        with (
            serve_atlas(influx.url, "bench", work / f"streamlit-{basemap}.log", extra_env=env) as server,
            sync_playwright() as pw,
        ):
            browser = chromium(pw)
            try:
                page = AtlasPage(browser.new_page(viewport={"width": 1500, "height": 950}))
                page.open(server.url)  # All cities: the first load of the cells (cold, coarse: auto level)
                page.choose("Cell size", f"level {LEVEL} (~{cell_edge_km(LEVEL):.3g} km)")  # all 44,000 cells
                page.tooltip(*centers[far], all_view, expect=signed[far], timeout_s=120)
                first_caption = page.caption()
                samples = []
                for _ in range(runs):
                    # Singapore has no cells here: the map is blank, so the far cell's pixel turns
                    # from background to colour exactly when the 44,000 cells are drawn.
                    page.choose("Service area", "Singapore")
                    page.wait_for_metric("cells", "0", timeout_s=120)
                    page.page.wait_for_timeout(500)
                    background = _pixel(page, centers[far], all_view)
                    cpu_before = _cpu_by_kind(os.getpid())
                    started = time.perf_counter()
                    page.choose("Service area", "All cities")
                    # The "cells" metric comes after the deck in the same run: once it shows the new
                    # count, the deck spec is in the browser.
                    page.wait_for_metric("cells", f"{ids.size:,}", timeout_s=120)
                    arrived = time.perf_counter()
                    while _colour_distance(_pixel(page, centers[far], all_view), background) < 30:
                        if time.perf_counter() - started > 120:
                            raise SystemExit("the cells were not drawn within 120 s")
                    total = time.perf_counter() - started
                    cpu = {k: v - cpu_before.get(k, 0.0) for k, v in _cpu_by_kind(os.getpid()).items()}
                    # Untimed: the drawn layer is pickable and the pixel is the expected cell.
                    page.tooltip(*centers[far], all_view, expect=signed[far], timeout_s=120)
                    caption = page.caption()
                    read_s = float(re.search(r"read [\d,]+ cells in ([\d.]+) s", caption).group(1))  # type: ignore[union-attr]
                    built_s = float(re.search(r"map built in ([\d.]+) s", caption).group(1))  # type: ignore[union-attr]
                    samples.append((total, read_s, built_s, arrived - started, cpu))
                errors = page.console_errors + page.page_errors
                load_after = os.getloadavg()[0]
            finally:
                browser.close()
    finally:
        influx.stop()
    cold = re.search(r"read [\d,]+ cells in ([\d.]+) s · map built in ([\d.]+) s", first_caption)
    totals = [s[0] for s in samples]
    k = totals.index(statistics.median_low(totals))
    return {
        "write_s": write_s,
        "total_s": samples[k][0],
        "read_s": samples[k][1],
        "built_s": samples[k][2],
        "arrived_s": samples[k][3],
        "cpu": samples[k][4],
        "after_data_s": samples[k][0] - samples[k][1],
        "all_totals": totals,
        "cold_read_s": float(cold.group(1)) if cold else float("nan"),
        "cold_built_s": float(cold.group(2)) if cold else float("nan"),
        "errors": errors,
        "load": (load_before, load_after),
    }


def _pixel(page: Any, latlng: np.ndarray, view: Any) -> tuple[int, int, int]:
    """Return the RGB colour the page shows at ``latlng`` on a map showing ``view``."""
    import io

    from PIL import Image

    from web_atlas.areas import project

    box = page.deck_box()
    dx, dy = project(float(latlng[0]), float(latlng[1]), view)
    x, y = box["x"] + box["width"] / 2 + dx, box["y"] + box["height"] / 2 + dy
    png = page.page.screenshot(clip={"x": x - 1, "y": y - 1, "width": 3, "height": 3})
    r, g, b = Image.open(io.BytesIO(png)).convert("RGB").getpixel((1, 1))
    return int(r), int(g), int(b)


def _colour_distance(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    return float(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5)


def _cpu_by_kind(root: int) -> dict[str, float]:
    """Return CPU seconds (user + system) used so far by ``root``'s descendants, by kind: ``chromium <type>``
    (renderer, gpu-process, utility, browser), ``streamlit`` (the Atlas server), ``driver`` (Playwright's
    node driver and this process) and ``other``."""
    info: dict[int, tuple[int, str, float, str]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat.rsplit(")", 1)[1].split()
        info[int(entry.name)] = (int(fields[1]), comm, (int(fields[11]) + int(fields[12])) / tick, cmdline)
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in info.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        if pid not in info:
            continue
        _, comm, cpu, cmdline = info[pid]
        if "chrom" in comm:
            kind = "chromium " + next(
                (part.split("=", 1)[1] for part in cmdline.split() if part.startswith("--type=")), "browser"
            )
        else:
            kind = (
                "streamlit"
                if "streamlit" in cmdline
                else "driver"
                if pid == root or comm == "node"
                else "other"
            )
        out[kind] = out.get(kind, 0.0) + cpu
    return out


def _machine() -> str:
    """Return a one-line description: CPU model, nproc, memory, Python, numpy and OS."""
    model = platform.processor() or platform.machine()
    mem = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
        mem = f"{kb / 1024**2:.1f} GiB"
    except (OSError, StopIteration):
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{model}, nproc={nproc}, memory={mem}, Python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.system()} {platform.release()}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a Markdown report; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cells", type=int, default=44_000, help="level-13 cells in the window (default 44,000)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="Python runs; the best is kept (default 5)")
    parser.add_argument("--browser-runs", type=int, default=3, help="browser switches; the median is kept")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    parser.add_argument(
        "--basemaps",
        default="offline,none",
        help="base maps to time the browser part with, in this order (default offline,none)",
    )
    args = parser.parse_args(argv)

    ids = region_cells(args.cells)
    py = python_part(ids, args.repeat)
    print(f"machine: {_machine()}")
    print(f"date: {time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n")
    print(f"{py['cells']:,} level-13 cells around Jakarta (the nearest to its centre), one window.\n")
    print("| step | implementation | seconds | ratio |")
    print("|---|---|---:|---:|")
    print(
        f"| cell polygons | job.functions.s2.cell_vertices (numpy, best of {args.repeat}) | {py['vec_s']:.3f} "
        f"| {py['peer_s'] / py['vec_s'] * py['cells'] / py['peer_cells']:.0f}x |"
    )
    print(
        f"| cell polygons | s2sphere, one cell at a time ({py['peer_cells']:,} cells, same corners) "
        f"| {py['peer_s']:.3f} | 1x |"
    )
    print(
        f"| map data (area filter, colours, columns), cold geometry cache | web_atlas.mapdata.build_map "
        f"| {py['cold_s']:.3f} | |"
    )
    print(f"| map data, warm geometry cache | web_atlas.mapdata.build_map | {py['warm_s']:.3f} | |")
    print(
        f"| map data at the view's auto level ({py['auto_cells']:,} level-{py['auto_level']} cells summing the "
        f"44,000), warm cache | web_atlas.mapdata.build_map + web_atlas.coarsen | {py['auto_s']:.3f} | |"
    )
    print(
        f"| deck spec ({py['json_mb']:.1f} MB) | web_atlas.deck.build_deck + AtlasDeck.to_json (pandas' C "
        f"writer, compact) | {py['json_s']:.3f} | {py['pydeck_s'] / py['json_s']:.1f}x |"
    )
    print(
        f"| deck spec ({py['pydeck_mb']:.1f} MB) | pydeck Deck.to_json on row dicts (json.dumps, indent=2, "
        f"sorted keys) | {py['pydeck_s']:.3f} | 1x |"
    )
    if args.no_browser:
        return 0
    results: dict[str, dict[str, Any]] = {}
    for basemap in args.basemaps.split(","):
        with tempfile.TemporaryDirectory(prefix="daggers-bench-atlas-") as work:
            results[basemap] = br = browser_part(ids, args.browser_runs, Path(work), basemap)
        print(
            f"\nBrowser, base map **{basemap}** (headless Chromium, SwiftShader WebGL; {py['cells']:,} points "
            f"written to influxd in {br['write_s']:.2f} s):\n"
        )
        print("| measure | seconds |")
        print("|---|---:|")
        print(
            f"| first load of the page, cold: InfluxQL read / map build (app's own timers) | "
            f"{br['cold_read_s']:.2f} / {br['cold_built_s']:.2f} |"
        )
        print(
            f"| switch Singapore (no cells) → All cities until a far cell is drawn (median of {len(br['all_totals'])}: "
            f"{', '.join(f'{t:.2f}' for t in br['all_totals'])}) | {br['total_s']:.2f} |"
        )
        print(f"| … of which InfluxQL read (cached) | {br['read_s']:.2f} |")
        print(f"| … of which map build in Python | {br['built_s']:.2f} |")
        print(
            f"| … until the deck spec was in the browser (the cells metric updated) | {br['arrived_s']:.2f} |"
        )
        print(f"| … from then until deck.gl has drawn the cells | {br['total_s'] - br['arrived_s']:.2f} |")
        print(
            f"| **after the data arrived**: all of it but the InfluxQL read (build, transfer, parse, draw) | "
            f"**{br['after_data_s']:.2f}** |"
        )
        cpu = br["cpu"]
        chromium_parts = sorted((k.split(" ", 1)[1], v) for k, v in cpu.items() if k.startswith("chromium"))
        print(
            f"| CPU seconds used meanwhile: Chromium ({', '.join(f'{k} {v:.2f}' for k, v in chromium_parts)}) / "
            f"Atlas server / test driver | {sum(v for _, v in chromium_parts):.2f} / "
            f"{cpu.get('streamlit', 0):.2f} / {cpu.get('driver', 0):.2f} |"
        )
        print(
            f"\nconsole errors: {br['errors'] or 'none'}; 1-minute load average {br['load'][0]:.1f} before, "
            f"{br['load'][1]:.1f} after the browser part (2 cores)"
        )
    if "offline" in results and "none" in results:
        on, off = results["offline"], results["none"]
        print("\n| base map | switch to All cities until drawn (s) | after the data arrived (s) | ratio |")
        print("|---|---:|---:|---:|")
        for name, r in (
            ("offline (Natural Earth + place names)", on),
            ("none (plain background, the peer)", off),
        ):
            print(
                f"| {name} | {r['total_s']:.2f} | {r['after_data_s']:.2f} | "
                f"{r['after_data_s'] / off['after_data_s']:.2f}x |"
            )
    if any(r["after_data_s"] >= 3.0 for r in results.values()):
        print("TARGET MISSED: 3 s after the data arrives", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
