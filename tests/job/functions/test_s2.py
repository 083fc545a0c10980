"""job.functions.s2 against s2sphere: exact cell ids at every level, strings, tokens, geometry."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest

from job.functions import s2

s2sphere = pytest.importorskip("s2sphere")

N_RANDOM = 1_000_000
LEVELS = range(s2.MAX_LEVEL + 1)


def _s2sphere_leaf_ids(lat: npt.NDArray[np.float64], lng: npt.NDArray[np.float64]) -> npt.NDArray[np.uint64]:
    """Leaf ids from s2sphere, one Python call per point."""
    from_lat_lng, from_degrees = s2sphere.CellId.from_lat_lng, s2sphere.LatLng.from_degrees
    return np.array(
        [from_lat_lng(from_degrees(a, b)).id() for a, b in zip(lat.tolist(), lng.tolist(), strict=True)],
        dtype=np.uint64,
    )


def _s2sphere_parent(leaf_ids: npt.NDArray[np.uint64], level: int) -> npt.NDArray[np.uint64]:
    """``CellId(id).parent(level).id()`` from s2sphere for each id."""
    cell_id = s2sphere.CellId
    return np.array([cell_id(x).parent(level).id() for x in leaf_ids.tolist()], dtype=np.uint64)


def _bit_parent(leaf_ids: npt.NDArray[np.uint64], level: int) -> npt.NDArray[np.uint64]:
    """The S2 parent bit formula, checked against s2sphere on a subset in test_parent_formula."""
    lsb = np.uint64(1 << (2 * (s2.MAX_LEVEL - level)))
    return (leaf_ids & ~(lsb - np.uint64(1))) | lsb


def _random_points(n: int, seed: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Half uniform on the sphere, 45% uniform in the lat/lng box, 5% out of range (not normalised)."""
    rng = np.random.default_rng(seed)
    n_sphere, n_box = n // 2, (n * 9) // 20
    n_wild = n - n_sphere - n_box
    lat = np.concatenate(
        [
            np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n_sphere))),
            rng.uniform(-90.0, 90.0, n_box),
            rng.uniform(-200.0, 200.0, n_wild),
        ]
    )
    lng = np.concatenate(
        [
            rng.uniform(-180.0, 180.0, n_sphere + n_box),
            rng.uniform(-540.0, 540.0, n_wild),
        ]
    )
    return lat, lng


def _vertex_degrees(cell_id: int) -> list[tuple[float, float]]:
    """s2sphere's 4 cell corners as (lat, lng) degrees."""
    cell = s2sphere.Cell(s2sphere.CellId(cell_id))
    out = []
    for k in range(4):
        ll = s2sphere.LatLng.from_point(cell.get_vertex(k))
        out.append((ll.lat().degrees, ll.lng().degrees))
    return out


def _special_points() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Poles, antimeridian, face edges and corners, zeros, cell corners, each with 1-ulp neighbours."""
    edge_lat = math.degrees(math.atan(1 / math.sqrt(2)))  # 35.26438968275466: |x| = |y| = |z|
    lngs = [-180.0, -135.0, -90.0, -45.0, -0.0, 0.0, 45.0, 90.0, 135.0, 180.0]
    base: list[tuple[float, float]] = []
    for lng in lngs:
        base += [(90.0, lng), (-90.0, lng), (0.0, lng), (-0.0, lng), (45.0, lng), (-45.0, lng)]
        base += [(edge_lat, lng), (-edge_lat, lng), (35.26438968275466, lng), (-35.26438968275466, lng)]
    for lat in [-89.9, -60.0, -10.0, -1e-300, 1e-300, 5e-324, 10.0, 60.0, 89.9]:
        base += [(lat, 180.0), (lat, -180.0), (lat, 179.99999999999997), (lat, -179.99999999999997)]
    rng = np.random.default_rng(20240607)
    for level in LEVELS:
        for _ in range(8):
            leaf = s2sphere.CellId.from_lat_lng(
                s2sphere.LatLng.from_degrees(float(rng.uniform(-90, 90)), float(rng.uniform(-180, 180)))
            )
            base += _vertex_degrees(leaf.parent(level).id())
    for face in range(6):
        base += _vertex_degrees(s2sphere.CellId.from_face_pos_level(face, 0, 0).id())
    lat0 = np.array([p[0] for p in base])
    lng0 = np.array([p[1] for p in base])
    lats, lngs_out = [], []
    for dlat in (-np.inf, 0, np.inf):
        for dlng in (-np.inf, 0, np.inf):
            lats.append(lat0 if dlat == 0 else np.nextafter(lat0, dlat))
            lngs_out.append(lng0 if dlng == 0 else np.nextafter(lng0, dlng))
    for eps in (1e-15, 1e-12, 1e-9):
        for sign in (-1.0, 1.0):
            lats += [lat0 + sign * eps, lat0]
            lngs_out += [lng0, lng0 + sign * eps]
    return np.concatenate(lats), np.concatenate(lngs_out)


@pytest.fixture(scope="module")
def random_points() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.uint64]]:
    """1,000,000 fixed-seed points and their s2sphere leaf ids (about 10-20 s)."""
    lat, lng = _random_points(N_RANDOM, seed=12345)
    return lat, lng, _s2sphere_leaf_ids(lat, lng)


def test_lookup_tables_equal_s2sphere() -> None:
    from s2sphere import sphere

    assert s2.LOOKUP_POS.tolist() == sphere.LOOKUP_POS
    assert s2.LOOKUP_IJ.tolist() == sphere.LOOKUP_IJ


def test_random_points_leaf_level_exact(random_points) -> None:
    lat, lng, ref = random_points
    got = s2.latlng_to_cell_id(lat, lng, 30)
    assert got.dtype == np.uint64
    mismatches = np.flatnonzero(got != ref)
    assert mismatches.size == 0, list(zip(lat[mismatches[:5]], lng[mismatches[:5]], strict=True))


def test_parent_formula_matches_s2sphere(random_points) -> None:
    _, _, ref = random_points
    sample = ref[np.random.default_rng(1).choice(ref.size, 3000, replace=False)]
    for level in LEVELS:
        np.testing.assert_array_equal(_bit_parent(sample, level), _s2sphere_parent(sample, level))


def test_random_points_every_level_exact(random_points) -> None:
    lat, lng, ref = random_points
    for level in LEVELS:
        got = s2.latlng_to_cell_id(lat, lng, level)
        assert np.array_equal(got, _bit_parent(ref, level)), f"level {level}"


def test_random_points_per_row_levels(random_points) -> None:
    lat, lng, ref = random_points
    rng = np.random.default_rng(2)
    idx = rng.choice(ref.size, 20_000, replace=False)
    levels = rng.integers(0, 31, idx.size)
    got = s2.latlng_to_cell_id(lat[idx], lng[idx], levels)
    cell_id = s2sphere.CellId
    want = np.array(
        [cell_id(int(x)).parent(int(lv)).id() for x, lv in zip(ref[idx], levels, strict=True)],
        dtype=np.uint64,
    )
    np.testing.assert_array_equal(got, want)


def test_special_points_every_level_exact() -> None:
    lat, lng = _special_points()
    ref = _s2sphere_leaf_ids(lat, lng)
    for level in LEVELS:
        got = s2.latlng_to_cell_id(lat, lng, level)
        want = ref if level == 30 else _s2sphere_parent(ref, level)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (level, list(zip(lat[bad[:5]], lng[bad[:5]], strict=True)))


def test_signed_zero_and_pole_literals() -> None:
    for lat, lng in [(0.0, 0.0), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (90.0, 0.0), (-90.0, 180.0)]:
        want = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).id()
        assert int(s2.latlng_to_cell_id(lat, lng, 30)) == want


def test_known_literals() -> None:
    jakarta = s2.latlng_to_cell_id([-6.2], [106.816666], 13)
    assert s2.to_decimal_strings(jakarta).tolist() == ["3344475382534373376"]
    assert s2.to_tokens(jakarta).tolist() == ["2e69f6a4"]
    new_york = s2.latlng_to_cell_id([40.7128], [-74.0060], 13)  # face 4: negative as a Java long
    assert s2.to_decimal_strings(new_york).tolist() == ["-8520148434366234624"]
    assert s2.to_decimal_strings(new_york, signed=False).tolist() == ["9926595639343316992"]


def test_shapes_and_broadcasting() -> None:
    scalar = s2.latlng_to_cell_id(1.0, 2.0, 10)
    assert scalar.shape == () and scalar.dtype == np.uint64
    grid = s2.latlng_to_cell_id(np.zeros((2, 3)), [10.0, 20.0, 30.0], 5)
    assert grid.shape == (2, 3)
    assert grid[0].tolist() == grid[1].tolist()
    assert s2.latlng_to_cell_id([], [], 3).shape == (0,)
    per_row = s2.latlng_to_cell_id([1.0, 1.0], [2.0, 2.0], np.array([0, 30]))
    assert s2.cell_level(per_row).tolist() == [0, 30]


def test_non_finite_gives_invalid_id() -> None:
    lat = np.array([np.nan, 10.0, np.inf, 10.0, -np.inf, 10.0])
    lng = np.array([10.0, np.nan, 10.0, -np.inf, 10.0, 20.0])
    got = s2.latlng_to_cell_id(lat, lng, 12)
    assert got[:5].tolist() == [0, 0, 0, 0, 0]
    want = s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(10.0, 20.0)).parent(12).id()
    assert int(got[5]) == want
    assert s2.to_tokens(got[:1]).tolist() == ["X"]
    assert s2.cell_level(got).tolist() == [-1] * 5 + [12]


@pytest.mark.parametrize("level", [-1, 31, 64, 1.5, True, "13"])
def test_bad_level_raises(level: object) -> None:
    with pytest.raises(ValueError, match="level"):
        s2.latlng_to_cell_id([1.0], [2.0], level)


def test_bad_level_in_array_names_it() -> None:
    with pytest.raises(ValueError, match="got level 31"):
        s2.latlng_to_cell_id([1.0, 2.0], [2.0, 3.0], np.array([30, 31]))


def _sample_cells(n: int, seed: int) -> npt.NDArray[np.uint64]:
    """Valid cell ids at random levels 0..30, from random points."""
    rng = np.random.default_rng(seed)
    lat, lng = _random_points(n, seed)
    return s2.latlng_to_cell_id(lat, lng, rng.integers(0, 31, n))


def test_signed_view() -> None:
    ids = _sample_cells(5000, 3)
    signed = s2.to_signed(ids)
    assert signed.dtype == np.int64
    faces = ids >> np.uint64(61)
    assert set(faces.tolist()) == set(range(6))
    assert ((signed < 0) == (faces >= 4)).all()  # face 3 is 0b011: bit 63 clear
    assert [int(x) for x in signed] == [x - (1 << 64) if x >= 1 << 63 else x for x in ids.tolist()]
    np.testing.assert_array_equal(s2._as_ids(signed), ids)


def test_decimal_strings_round_trip() -> None:
    ids = np.concatenate(
        [_sample_cells(5000, 4), np.array([0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1], np.uint64)]
    )
    signed = s2.to_decimal_strings(ids)
    unsigned = s2.to_decimal_strings(ids, signed=False)
    assert signed.dtype == object and all(type(x) is str for x in signed)
    assert unsigned.tolist() == [str(x) for x in ids.tolist()]
    assert signed.tolist() == [str(x - (1 << 64) if x >= 1 << 63 else x) for x in ids.tolist()]
    np.testing.assert_array_equal(s2.from_decimal_strings(signed), ids)
    np.testing.assert_array_equal(s2.from_decimal_strings(unsigned), ids)
    np.testing.assert_array_equal(s2.from_decimal_strings(list(signed)), ids)


@pytest.mark.parametrize("bad", ["18446744073709551616", "-9223372036854775809", "abc", "1.5", ""])
def test_from_decimal_strings_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        s2.from_decimal_strings([bad])


def test_tokens_match_s2sphere_and_round_trip() -> None:
    ids = _sample_cells(5000, 5)
    tokens = s2.to_tokens(ids)
    assert tokens.dtype == object
    assert tokens.tolist() == [s2sphere.CellId(x).to_token() for x in ids.tolist()]
    np.testing.assert_array_equal(s2.from_tokens(tokens), ids)
    np.testing.assert_array_equal(s2.from_tokens([t.upper() for t in tokens]), ids)
    assert [s2sphere.CellId.from_token(t).id() for t in tokens[:100]] == ids[:100].tolist()
    assert s2.to_tokens(np.array([0, 1 << 60], np.uint64)).tolist() == ["X", "1"]
    assert s2.from_tokens(["X", "x", "1", "89c25a24"]).tolist() == [0, 0, 1 << 60, 9926595639343316992]


@pytest.mark.parametrize("bad", ["", "g", "0123456789abcdef0", "1 2", "é"])
def test_from_tokens_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        s2.from_tokens([bad])


def test_cell_level_matches_s2sphere() -> None:
    ids = _sample_cells(5000, 6)
    got = s2.cell_level(ids)
    assert got.dtype == np.int8
    assert got.tolist() == [s2sphere.CellId(x).level() for x in ids.tolist()]
    invalid = np.array([0, 7 << 61 | 1, 2, (1 << 64) - 1], dtype=np.uint64)  # no bit, face 7, odd lsb, face 7
    assert s2.cell_level(invalid).tolist() == [-1, -1, -1, -1]


def test_vertices_match_s2sphere() -> None:
    ids = _sample_cells(2000, 7)
    got = s2.cell_vertices(ids)
    assert got.shape == (ids.size, 4, 2)
    want = np.array([_vertex_degrees(x) for x in ids.tolist()])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_centers_match_s2sphere() -> None:
    ids = _sample_cells(2000, 8)
    got = s2.cell_center(ids)
    want = []
    for x in ids.tolist():
        ll = s2sphere.CellId(x).to_lat_lng()
        want.append((ll.lat().degrees, ll.lng().degrees))
    np.testing.assert_allclose(got, np.array(want), rtol=0, atol=1e-12)
    leaf = s2.latlng_to_cell_id([12.5], [-33.25], 30)
    np.testing.assert_allclose(s2.cell_center(leaf), [[12.5, -33.25]], atol=1e-6)


def test_areas_match_s2sphere_exact_area() -> None:
    ids = _sample_cells(2000, 9)
    got = s2.cell_area_km2(ids)
    want = np.array([s2sphere.Cell(s2sphere.CellId(x)).exact_area() for x in ids.tolist()])
    np.testing.assert_allclose(got, want * 510_072_000 / (4 * math.pi), rtol=1e-12)
    faces = np.array([s2sphere.CellId.from_face_pos_level(f, 0, 0).id() for f in range(6)], np.uint64)
    total = s2.cell_area_km2(faces).sum()
    assert total == pytest.approx(510_072_000, rel=1e-12)  # the original's Earth surface


def test_area_is_the_original_platforms_value() -> None:
    # S2AreaInKm2Test of the original platform: s2id 3267730965564227584 -> 909.97058 km² (delta 1e-4)
    area = s2.cell_area_km2(np.array([3267730965564227584], dtype=np.uint64))[0]
    assert abs(area - 909.97058) < 1e-4
    # the former convention (mean radius 6371.0088 km) was off by ~1e-5 relative: outside that delta
    old = area * 4 * math.pi / 510_072_000 * 6371.0088**2
    assert abs(old - 909.97058) > 1e-3


def test_geometry_of_invalid_ids_is_nan() -> None:
    ids = np.array([0, s2.latlng_to_cell_id(1.0, 2.0, 10)], dtype=np.uint64)
    assert np.isnan(s2.cell_vertices(ids)[0]).all() and np.isfinite(s2.cell_vertices(ids)[1]).all()
    assert np.isnan(s2.cell_center(ids)[0]).all() and np.isfinite(s2.cell_center(ids)[1]).all()
    area = s2.cell_area_km2(ids)
    assert np.isnan(area[0]) and area[1] > 0


def test_non_integer_ids_rejected() -> None:
    with pytest.raises(TypeError):
        s2.cell_level(np.array([1.5]))
