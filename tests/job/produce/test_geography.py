"""Generated positions lie on land, around the cities' named places, exactly as many as asked and the
same for a seed. "On land" is judged by the shipped Natural Earth polygons themselves
(``web_atlas/static/basemap/land.json``, what the Atlas draws), with shapely's exact point-in-polygon
test, not by the land grid the generator uses."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from job.produce.cities import CITIES, city_by_name
from job.produce.generator import generate
from job.produce.geography import PROBES, CityLand, LandMask, land_mask, places

shapely = pytest.importorskip("shapely")

LAND_FILE = Path(__file__).resolve().parents[3] / "web_atlas" / "static" / "basemap" / "land.json"
START = datetime(2025, 11, 22, 8, 0, tzinfo=UTC)
JAVA_SEA = (-5.95, 106.85)  # off Jakarta's coast, inside its service circle
MONAS = (-6.1754, 106.8272)  # Jakarta's National Monument: on land


@lru_cache(maxsize=1)
def _land() -> Any:
    from shapely.geometry import shape

    land = shapely.union_all([shape(f["geometry"]) for f in json.loads(LAND_FILE.read_text())["features"]])
    shapely.prepare(land)
    return land


def _on_land(lat: np.ndarray, lng: np.ndarray) -> np.ndarray:
    return np.asarray(shapely.contains_xy(_land(), lng, lat))


@pytest.mark.parametrize("stream", ["driver_location", "booking"])
def test_every_point_of_a_big_sample_is_on_land(stream: str) -> None:
    batch = generate(
        stream,
        150_000,
        seed=19,
        start=START,
        duration_s=1800.0,  # type: ignore[arg-type]
        cities=["Jakarta", "Surabaya", "Denpasar", "Makassar", "Semarang", "Singapore"],
    )
    assert len(batch) == 150_000
    lat_col, lng_col = ("lat", "long") if stream == "driver_location" else ("pickup_lat", "pickup_long")
    lat, lng = batch.table.column(lat_col).to_numpy(), batch.table.column(lng_col).to_numpy()
    at_sea = ~_on_land(lat, lng)
    assert at_sea.sum() == 0, list(zip(lat[at_sea][:5], lng[at_sea][:5], strict=True))


def test_the_same_seed_gives_the_same_points_and_another_seed_others() -> None:
    kw: dict[str, Any] = {"start": START, "duration_s": 600.0, "cities": ["Jakarta"]}
    a, b = generate("booking", 20_000, seed=5, **kw), generate("booking", 20_000, seed=5, **kw)
    c = generate("booking", 20_000, seed=6, **kw)
    assert len(a) == len(b) == len(c) == 20_000
    assert a.table.equals(b.table)
    assert not np.array_equal(
        a.table.column("pickup_lat").to_numpy(), c.table.column("pickup_lat").to_numpy()
    )


def test_jakarta_demand_follows_its_coast_and_towns() -> None:
    jakarta = city_by_name("Jakarta")
    batch = generate("booking", 40_000, seed=8, start=START, duration_s=600.0, cities=["Jakarta"])
    lat, lng = batch.table.column("pickup_lat").to_numpy(), batch.table.column("pickup_long").to_numpy()
    # Nothing north of the coast of Jakarta Bay (about 6.09 S at the centre's longitude)...
    assert not ((lat > -6.05) & (np.abs(lng - jakarta.long) < 0.05)).any()
    # ...and the named towns in the radius draw demand: a 2-km disc on Bekasi's and on Tangerang's
    # centres holds far more points than the same disc would under a uniform spread over the land.
    for name in ("Bekasi", "Tangerang"):
        town = next(p for p in places() if p.name == name)
        near = np.hypot(lat - town.lat, (lng - town.lng) * np.cos(np.radians(town.lat))) * 111.2 < 2.0
        uniform = len(lat) * (2.0**2) / (0.8 * jakarta.radius_km**2)  # ~80% of the circle is land
        assert near.sum() > 3 * uniform, (name, int(near.sum()), uniform)


def test_places_are_the_geonames_towns_of_the_region() -> None:
    names = {p.name: p for p in places()}
    for name in ("Jakarta", "Bandung", "Surabaya", "Bekasi", "Tangerang", "Depok", "Singapore", "Bangkok"):
        assert name in names and names[name].on_land
    assert names["Jakarta"].population > 8_000_000
    assert [p.population for p in places()] == sorted((p.population for p in places()), reverse=True)


def test_land_grid_cells_lie_wholly_on_the_land_polygons() -> None:
    mask = land_mask()
    assert set(mask.grids) == {c.city_id for c in CITIES}
    grid = mask.grids[city_by_name("Jakarta").city_id]
    rows, cols = np.nonzero(grid.land)
    pick = np.random.default_rng(0).choice(rows.size, 3000, replace=False)
    r, c = rows[pick], cols[pick]
    boxes = shapely.box(
        grid.west + c * grid.step,
        grid.south + r * grid.step,
        grid.west + (c + 1) * grid.step,
        grid.south + (r + 1) * grid.step,
    )
    assert shapely.contains(_land(), boxes).all()
    assert mask.on_land([1], [MONAS[0]], [MONAS[1]]).tolist() == [True]
    assert mask.on_land([1], [JAVA_SEA[0]], [JAVA_SEA[1]]).tolist() == [False]


def test_to_land_moves_sea_points_to_the_first_land_cell_towards_the_anchor() -> None:
    # A 10 x 10 grid of 1-degree cells whose left half is land, the anchor in it.
    land = np.zeros((10, 10), dtype=bool)
    land[:, :5] = True
    mask = LandMask({7: CityLand(0.0, 0.0, 1.0, land, (5.5, 2.5))})
    lat, lng = mask.to_land([7, 7, 8], [5.5, 5.5, 5.5], [1.25, 8.5, 8.5])
    assert lat.tolist() == [5.5, 5.5, 5.5]  # on the line to the anchor: the same latitude
    assert lng[0] == 1.25  # already on land: unchanged
    assert 4.999 < lng[1] < 5.0  # the shore (bisected to 1/2^12 of a probe step), on the land side
    assert lng[2] == 8.5  # city 8 has no grid: left alone
    assert mask.on_land([7, 7], lat[:2], lng[:2]).all()
    assert PROBES >= 8
