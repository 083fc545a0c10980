"""Unit tests of S2 polygons (checked against s2sphere), the geometry cache, service areas and views."""

from __future__ import annotations

import math

import numpy as np
import pytest
import s2sphere

from job.functions.s2 import latlng_to_cell_id
from web_atlas.areas import (
    ALL_AREAS,
    View,
    area_by_name,
    area_names,
    in_area,
    project,
    view_for_area,
    view_for_cells,
)
from web_atlas.geometry import CellGeometryCache, circle_path, distance_km

R_KM = 6371.0088


def _s2_distance_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    return s2sphere.LatLng.from_degrees(*a).get_distance(s2sphere.LatLng.from_degrees(*b)).radians * R_KM


def test_polygons_and_centres_match_s2sphere() -> None:
    rng = np.random.default_rng(3)
    lat, lng = rng.uniform(-80, 80, 300), rng.uniform(-180, 180, 300)
    ids = latlng_to_cell_id(lat, lng, rng.integers(2, 25, 300))
    geo = CellGeometryCache().lookup(ids)
    assert geo.polygons.shape == (300, 4, 2) and len(geo) == 300
    for k, cid in enumerate(ids.tolist()):
        cell = s2sphere.Cell(s2sphere.CellId(cid))
        for v in range(4):
            ll = s2sphere.LatLng.from_point(cell.get_vertex(v))
            assert geo.polygons[k, v].tolist() == pytest.approx(
                [ll.lng().degrees, ll.lat().degrees], abs=1e-12
            )
        centre = s2sphere.CellId(cid).to_lat_lng()
        assert geo.centers[k].tolist() == pytest.approx(
            [centre.lat().degrees, centre.lng().degrees], abs=1e-12
        )


def test_cache_computes_each_cell_once_and_keeps_request_order() -> None:
    a, b, c = (int(x) for x in latlng_to_cell_id([1.0, 2.0, 3.0], [100.0, 101.0, 102.0], 13))
    cache = CellGeometryCache()
    first = cache.lookup([a, b])
    assert (cache.misses, cache.hits, len(cache)) == (2, 0, 2)
    again = cache.lookup([b, c, b])
    assert (cache.misses, cache.hits, len(cache)) == (3, 1, 3)
    assert again.polygons[0].tolist() == first.polygons[1].tolist() == again.polygons[2].tolist()
    fresh = CellGeometryCache().lookup([c])
    assert again.polygons[1].tolist() == fresh.polygons[0].tolist()
    # Invalid ids (0) give NaN rows instead of an error.
    assert np.isnan(cache.lookup([0]).centers).all()
    cache.clear()
    assert (len(cache), cache.hits, cache.misses) == (0, 0, 0)


def test_cache_starts_again_when_full() -> None:
    ids = [int(x) for x in latlng_to_cell_id(np.arange(6.0), np.arange(6.0), 10)]
    cache = CellGeometryCache(max_cells=4)
    cache.lookup(ids[:3])
    geo = cache.lookup(ids[3:5])  # 5 > 4: keeps only the cells of this request
    assert len(cache) == 2 and not np.isnan(geo.polygons).any()
    assert cache.lookup(ids[3:5]).polygons.tolist() == geo.polygons.tolist()


def test_distance_and_service_area_ring() -> None:
    jakarta, bandung = (-6.2088, 106.8456), (-6.9175, 107.6191)
    assert distance_km([bandung[0]], [bandung[1]], *jakarta)[0] == pytest.approx(
        _s2_distance_km(jakarta, bandung), rel=1e-9
    )
    ring = circle_path(*jakarta, 30.0, points=12)
    assert len(ring) == 13 and ring[0] == ring[-1]
    for lng, lat in ring:
        assert _s2_distance_km(jakarta, (lat, lng)) == pytest.approx(30.0, abs=1e-3)


def test_area_presets_and_membership() -> None:
    assert area_names()[0] == ALL_AREAS and "Singapore" in area_names()
    assert area_by_name("all cities") is None
    jakarta = area_by_name("jakarta")
    assert jakarta is not None and (jakarta.latitude, jakarta.longitude, jakarta.radius_km) == (
        -6.2088,
        106.8456,
        30.0,
    )
    with pytest.raises(ValueError, match="unknown service area 'Atlantis'; known: All cities, Jakarta"):
        area_by_name("Atlantis")
    # 31.9 km north of the centre is in (radius 30 + margin 2), 32.1 km is out.
    north = [[jakarta.latitude + d / (R_KM * math.pi / 180), jakarta.longitude] for d in (31.9, 32.1)]
    assert in_area(np.array(north), jakarta).tolist() == [True, False]
    assert in_area(np.empty((0, 2)), jakarta).tolist() == []


def test_views_fit_areas_and_cells_and_project_points() -> None:
    jakarta = area_by_name("Jakarta")
    assert jakarta is not None
    view = view_for_area(jakarta, 1000, 640)
    expected = math.log2(40075.016686 * math.cos(math.radians(-6.2088)) / 512 * 640 / (2 * 32 * 1.1))
    assert (view.latitude, view.longitude) == (-6.2088, 106.8456) and view.zoom == round(expected, 2)
    assert view_for_cells(np.empty((0, 2))) == View(0.0, 0.0, 1.0)
    fit = view_for_cells(np.array([[0.0, 10.0], [0.0, 12.0]]), 1000, 640)
    assert (fit.latitude, fit.longitude) == (0.0, 11.0)
    assert fit.zoom == round(math.log2(0.85 * 1000 * 360 / (512 * 2.0)), 2)
    # One cell: the view spans at least 0.02 degrees of longitude and 0.0004 of Mercator y.
    one = min(
        math.log2(0.85 * 1000 * 360 / (512 * 0.02)), math.log2(0.85 * 640 * 2 * math.pi / (512 * 0.0004))
    )
    assert view_for_cells(np.array([[-6.2, 106.8]]), 1000, 640).zoom == round(one, 2)
    # One degree of longitude east at zoom z is 512 * 2**z / 360 pixels to the right.
    v = View(0.0, 0.0, 10.0)
    assert project(0.0, 1.0, v) == pytest.approx((512 * 1024 / 360, 0.0))
    dx, dy = project(1.0, 0.0, v)
    assert dx == 0 and dy < 0  # north is up
    assert view.tilted(45).pitch == 45 and view.tilted(45).zoom == view.zoom
