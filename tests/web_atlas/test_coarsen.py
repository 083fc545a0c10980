"""Coarser S2 cells when zoomed out: exact parent values from known children (ids from s2sphere)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import s2sphere

from job.functions.s2 import cell_parent, to_decimal_strings
from web_atlas.areas import View, area_by_name, view_for_area
from web_atlas.coarsen import MIN_CELL_PX, auto_level, cell_edge_km, coarsen, combine_note
from web_atlas.geometry import CellGeometryCache
from web_atlas.mapdata import MapRequest, build_map


def _id(lat: float, lng: float, level: int) -> int:
    return int(s2sphere.CellId.from_lat_lng(s2sphere.LatLng.from_degrees(lat, lng)).parent(level).id())


def _children(parent: int, n: int) -> list[int]:
    """Return ``n`` of the level-13 descendants of the level-10 ``parent`` (from s2sphere)."""
    cell = s2sphere.CellId(parent)
    kids = [int(c.id()) for c in cell.children(13)]
    return kids[:n]


P = _id(-6.2088, 106.8456, 10)  # Jakarta centre, level 10
Q = _id(-6.9175, 107.6191, 10)  # Bandung centre, level 10
KIDS_P = _children(P, 3)
KIDS_Q = _children(Q, 2)


def _frame() -> pd.DataFrame:
    ids = np.array(KIDS_P + KIDS_Q, dtype=np.uint64)
    return (
        pd.DataFrame(
            {
                "cell": to_decimal_strings(ids),
                "id": ids,
                "bookings": [5.0, 7.0, 1.0, 4.0, 6.0],
                "drivers": [3.0, 2.0, 4.0, 1.0, 1.0],  # a distinct count per child
                "avg_km": [2.0, 4.0, np.nan, 3.0, 5.0],
            }
        )
        .sort_values("id")
        .reset_index(drop=True)
    )


def test_cell_parent_matches_s2sphere() -> None:
    ids = np.array(KIDS_P + KIDS_Q, dtype=np.uint64)
    assert cell_parent(ids, 10).tolist() == [P] * 3 + [Q] * 2
    assert cell_parent(np.array([P], dtype=np.uint64), 12).tolist() == [P]  # already coarser: unchanged
    assert cell_parent(ids, 7).tolist() == [int(s2sphere.CellId(k).parent(7).id()) for k in KIDS_P + KIDS_Q]
    with pytest.raises(ValueError, match="S2 level must be an integer in 0..30"):
        cell_parent(ids, 31)


def test_parents_sum_counts_and_bound_distinct_counts() -> None:
    out = coarsen(_frame(), 10, {"bookings": "sum", "drivers": "sum", "avg_km": "mean"})
    rows = {int(r.id): r for r in out.itertuples()}
    assert sorted(rows) == sorted([P, Q]) and out["id"].is_monotonic_increasing
    assert (rows[P].bookings, rows[Q].bookings) == (13.0, 10.0)
    assert (rows[P].drivers, rows[Q].drivers) == (9.0, 2.0)  # upper bound of the distinct drivers
    assert (rows[P].avg_km, rows[Q].avg_km) == (3.0, 4.0)  # NaN child left out
    assert rows[P].cell == str(np.int64(np.uint64(P).astype(np.int64)))
    lower = coarsen(_frame(), 10, {"drivers": "max", "avg_km": "min"})
    rows = {int(r.id): r for r in lower.itertuples()}
    assert (rows[P].drivers, rows[Q].drivers) == (4.0, 1.0)  # lower bound: the busiest child
    assert (rows[P].avg_km, rows[Q].avg_km) == (2.0, 3.0)
    with pytest.raises(ValueError, match="cannot combine 'x' by 'median'"):
        coarsen(_frame(), 10, {"x": "median"})


def test_coarsening_to_the_data_level_changes_nothing() -> None:
    frame = _frame()
    assert coarsen(frame, 13, {"bookings": "sum"}) is frame


def test_auto_level_keeps_cells_readable() -> None:
    jakarta = view_for_area(area_by_name("Jakarta"))
    assert auto_level(jakarta, 13) == 13  # a city: level-13 cells (1.2 km) are ~11 px
    country = View(-2.0, 110.0, 4.0)
    level = auto_level(country, 13)
    km_per_px = 40075.016686 * math.cos(math.radians(-2.0)) / (512 * 16)
    assert cell_edge_km(level) / km_per_px >= MIN_CELL_PX > cell_edge_km(level + 1) / km_per_px
    assert level == 8


def test_all_cities_view_draws_coarse_cells_and_says_so() -> None:
    request = MapRequest(
        "bookings",
        ("bookings", "drivers", "avg_km"),
        combine=(("bookings", "sum"), ("drivers", "sum"), ("avg_km", "mean")),
    )
    bangkok = np.array([_id(13.7563, 100.5018, 13)], dtype=np.uint64)  # all cities: Bangkok to Bandung
    frame = pd.concat(
        [
            _frame(),
            pd.DataFrame(
                {
                    "cell": to_decimal_strings(bangkok),
                    "id": bangkok,
                    "bookings": [2.0],
                    "drivers": [1.0],
                    "avg_km": [1.0],
                }
            ),
        ],
        ignore_index=True,
    )
    data = build_map(frame.sort_values("id").reset_index(drop=True), request, CellGeometryCache())
    assert data.view.zoom < 5.5 and data.uniform_level == auto_level(data.view, 13) == 8
    assert sorted(r["bookings"] for r in data.rows()) == [2, 10, 13]  # Jakarta's and Bandung's sums
    assert data.total == 25.0  # the header's total is the same at any level
    assert data.level_note.endswith(
        "each the sum of its level-13 cells (for a distinct count: an upper bound; "
        "combine by max for a lower bound)"
    )
    fine = build_map(_frame(), MapRequest("bookings", ("bookings",), level=13), CellGeometryCache())
    assert fine.count == 5 and fine.level_note == "level-13 S2 cells"
    ten = build_map(_frame(), MapRequest("bookings", ("bookings",), level=10), CellGeometryCache())
    assert sorted(r["bookings"] for r in ten.rows()) == [10, 13] and ten.uniform_level == 10


def test_notes() -> None:
    assert combine_note(9, 13, "max") == (
        "level-9 S2 cells, each the largest of its level-13 cells (for a distinct count: a lower bound)"
    )
    assert combine_note(9, 13, "mean") == "level-9 S2 cells, each the mean of its level-13 cells"
