"""Coarser S2 cells for a zoomed-out map: a level-13 cell of about 1 km is a speck at country zoom,
so the Atlas draws its ancestors instead, each combining its children's values.

How a parent combines its children, per field, is how the points of a cell were combined over
time and tags (the "Combine points by" control, :meth:`web_atlas.influx.CellQuery.aggregate_of`):

* ``sum`` (counts; ``auto`` for integer fields): the parent is the sum of its children, exact for
  counts such as bookings. For a **distinct count** (``DistinctCount(driver_id)``) the sum is an
  *upper bound*: an entity seen in two children counts twice. Choose ``max`` for a *lower bound*
  (the busiest child); the true value lies between the two. The legend says which one is shown.
* ``mean`` (``auto`` for float fields): the mean of the children's values, unweighted.
* ``max`` / ``min``: the largest / smallest child.
* ``last``: no child is later than another within one window, so the children's mean.

Children with no value (NaN) are left out; a parent none of whose children has a value has none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

import numpy as np
import pandas as pd

from job.functions.s2 import cell_level, cell_parent, to_decimal_strings
from web_atlas.areas import View

MIN_CELL_PX: Final = 8.0
"""The auto level is the finest whose cells are at least this many pixels across at the view's zoom."""
COARSEST_LEVEL: Final = 4
_EARTH_CIRCUMFERENCE_KM: Final = 40075.016686
_TILE_PX: Final = 512
_LEVEL0_EDGE_KM: Final = 10_018.0
"""Mean edge of an S2 cell at level 0, in km (half the edge at each level; 1.22 km at level 13)."""
_PANDAS_FUNCTION: Final[dict[str, str]] = {
    "sum": "sum",
    "mean": "mean",
    "max": "max",
    "min": "min",
    "last": "mean",
}


def cell_edge_km(level: int) -> float:
    """Return the mean edge of an S2 cell at ``level`` (km)."""
    return _LEVEL0_EDGE_KM / 2.0**level


def auto_level(view: View, data_level: int, min_px: float = MIN_CELL_PX) -> int:
    """Return the finest level, at most ``data_level``, whose cells are ``min_px`` pixels or more
    across on a map showing ``view`` (Web Mercator at the view's latitude)."""
    km_per_px = _EARTH_CIRCUMFERENCE_KM * math.cos(math.radians(view.latitude)) / (_TILE_PX * 2**view.zoom)
    level = data_level
    while level > COARSEST_LEVEL and cell_edge_km(level) / km_per_px < min_px:
        level -= 1
    return level


def coarsen(frame: pd.DataFrame, level: int, how: Mapping[str, str]) -> pd.DataFrame:
    """Return the per-cell ``frame`` (columns ``cell``, ``id`` and the fields of ``how``) with every
    cell finer than ``level`` replaced by its ancestor at ``level``, the fields combined by ``how``
    (``sum``, ``mean``, ``max``, ``min`` or ``last``; see the module docstring). Sorted by id.

    Raises:
        ValueError: an unknown combination.
    """
    for field, rule in how.items():
        if rule not in _PANDAS_FUNCTION:
            raise ValueError(f"cannot combine {field!r} by {rule!r}; known: {', '.join(_PANDAS_FUNCTION)}")
    if frame.empty:
        return frame
    ids = frame["id"].to_numpy(dtype=np.uint64)
    parents = cell_parent(ids, level)
    if np.array_equal(parents, ids):
        return frame
    grouped = frame[list(how)].astype(np.float64).groupby(parents, sort=True)
    columns: dict[str, pd.Series] = {}
    for field, rule in how.items():
        function = _PANDAS_FUNCTION[rule]
        if function == "sum":
            columns[field] = grouped[field].sum(min_count=1)
        else:
            columns[field] = grouped[field].agg(function)
    out = pd.DataFrame(columns)
    parent_ids = out.index.to_numpy(dtype=np.uint64)
    out.insert(0, "id", parent_ids)
    out.insert(0, "cell", pd.Series(to_decimal_strings(parent_ids), index=out.index, dtype=object))
    return out.reset_index(drop=True)


def data_level(frame: pd.DataFrame) -> int | None:
    """Return the finest level of the frame's cells (None when it has none)."""
    if frame.empty:
        return None
    levels = cell_level(frame["id"].to_numpy(dtype=np.uint64))
    return int(levels.max()) if levels.size else None


def combine_note(level: int, child_level: int, rule: str) -> str:
    """Return the legend's line saying how the shown cells combine the data's cells."""
    if level >= child_level:
        return f"level-{level} S2 cells"
    what = {"sum": "sum", "mean": "mean", "max": "largest", "min": "smallest", "last": "mean"}[rule]
    note = f"level-{level} S2 cells, each the {what} of its level-{child_level} cells"
    if rule == "sum":
        note += " (for a distinct count: an upper bound; combine by max for a lower bound)"
    elif rule == "max":
        note += " (for a distinct count: a lower bound)"
    return note


__all__ = [
    "COARSEST_LEVEL",
    "MIN_CELL_PX",
    "auto_level",
    "cell_edge_km",
    "coarsen",
    "combine_note",
    "data_level",
]
