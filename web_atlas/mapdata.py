"""From per-cell aggregates to what the map draws: rows with polygons, colours, elevations and
tooltip values, the legend, and the view. No Streamlit or pydeck here, so it is cheap to test and
to benchmark.

In comparison mode (``D-1`` / ``D-7``) a cell's colour is its change against the same window a day
or a week earlier, on a diverging scale; the tooltip shows both values and the change. A missing baseline
is never taken as 0: a cell with points now and none in the baseline is *new* (a colour of its own, change
"new"), one with points in the baseline and none now is *gone* (change "gone"), and neither is on the change
scale; with no point at all in the baseline window (within the service area) nothing is compared: the cells
are coloured as without a comparison and the map says "no D-1 data".
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from job.functions.s2 import cell_level
from web_atlas.areas import ServiceArea, View, in_area, view_for_area, view_for_cells
from web_atlas.coarsen import auto_level, coarsen, combine_note, data_level
from web_atlas.colors import (
    DARK_SEQUENTIAL,
    DEFAULT_ALPHA,
    DIVERGING,
    LIGHT_SEQUENTIAL,
    ColorScale,
    LegendEntry,
    ScaleKind,
    color_scale,
)
from web_atlas.geometry import CellGeometry, CellGeometryCache

CompareMode = Literal["none", "D-1", "D-7"]
COMPARE_MODES: Final[tuple[CompareMode, ...]] = ("none", "D-1", "D-7")
COMPARE_SHIFT_S: Final[dict[str, int]] = {"D-1": 86_400, "D-7": 7 * 86_400}
MAX_ELEVATION_M: Final = 3000.0
"""Height of the tallest cell in 3D mode, in metres (the others in proportion)."""
EXTRUDED_PITCH: Final = 45.0
RESERVED_KEYS: Final = frozenset({"cell", "level", "polygon", "fill", "elevation"})
NO_VALUE: Final = "–"
"""What the tooltip shows for a field a cell has no value of."""
NEW_RGB: Final = (123, 50, 148)
"""A cell with points now and none in the baseline window (violet: not on the change scale's blue-red)."""
GONE_RGB: Final = (77, 77, 77)
"""A cell with points in the baseline window and none now (dark grey)."""


def row_key(name: str) -> str:
    """Return the key a field or tag has in a deck row: ``name`` with anything but letters, digits
    and ``_`` replaced by ``_`` (and ``f_`` in front of the row's own keys), so tooltip templates
    can refer to it."""
    key = re.sub(r"\W", "_", name) or "_"
    return f"f_{key}" if key in RESERVED_KEYS or key[0].isdigit() else key


@dataclass(frozen=True)
class MapRequest:
    """What the controls ask the map to show.

    ``tags`` are the measurement's other tags with the chosen value (``"all"`` when not filtered):
    they are the same for every cell and are shown in the tooltip. ``summary`` says how the colour
    field's cells add up for the page header: a sum (counts) or a mean over cells (averages).
    ``level`` is the S2 level to draw (None: the finest whose cells are readable at the view's zoom,
    :func:`web_atlas.coarsen.auto_level`); coarser cells combine their children field by field as
    ``combine`` says (``sum`` when a field is not named; :mod:`web_atlas.coarsen`). ``integer_fields``
    are the fields whose cell values are whole numbers (integer counts added up): their legend has whole
    bounds (``20 – 34``, not ``20 – 34.4``).
    """

    color_field: str
    fields: tuple[str, ...]
    elevation_field: str | None = None
    scale: ScaleKind = "quantile"
    dark: bool = False
    compare: CompareMode = "none"
    area: ServiceArea | None = None
    tags: tuple[tuple[str, str], ...] = ()
    summary: Literal["sum", "mean"] = "sum"
    width_px: int = 1000
    height_px: int = 640
    level: int | None = None
    combine: tuple[tuple[str, str], ...] = ()
    integer_fields: tuple[str, ...] = ()

    def combine_rule(self, name: str) -> str:
        """Return how field ``name`` combines children into a coarser cell (``sum`` by default)."""
        return dict(self.combine).get(name, "sum")


@dataclass(frozen=True)
class MapData:
    """The map's content, column by column (one entry per cell), plus the colour ``scale`` and its
    ``legend_title``, the ``view``, the ``tooltip_html`` template, and a few figures for the page
    header: ``total`` is the colour field's sum (or mean, see :attr:`MapRequest.summary`) over the
    cells shown, and ``previous_total`` the same a day or a week earlier when comparing.

    :meth:`rows_json` is the deck layer's data, written straight from the columns (44,000 cells
    in a fraction of the time ``json.dumps`` takes on dicts); :meth:`rows` parses it back.
    """

    cells: list[str]
    polygons: npt.NDArray[np.float64]
    fills: npt.NDArray[np.uint8]
    elevation: npt.NDArray[np.float64] | None
    levels: npt.NDArray[np.int8]
    values: tuple[tuple[str, npt.NDArray[np.float64] | list[Any]], ...]
    decimals: int
    scale: ColorScale
    legend_title: str
    view: View
    tooltip_html: str
    total: float
    previous_total: float | None
    area_ring: ServiceArea | None = None
    columns: dict[str, str] = field(default_factory=dict)
    level_note: str = ""
    compare_note: str = ""
    """Why nothing is compared although a comparison was asked for: ``"no D-1 data"``."""
    legend_extra: tuple[LegendEntry, ...] = ()
    """Swatches beside the scale's: new and gone cells when comparing."""

    @property
    def count(self) -> int:
        """The number of cells."""
        return len(self.cells)

    @property
    def extruded(self) -> bool:
        """Whether the cells are drawn in 3D (an elevation field is chosen)."""
        return self.elevation is not None

    @property
    def uniform_level(self) -> int | None:
        """The cells' S2 level when they all have the same one (shown once in the tooltip), else None."""
        if self.levels.size and (self.levels == self.levels[0]).all():
            return int(self.levels[0])
        return None

    def rows_json(self) -> str:
        """Return the deck rows as a JSON array: per cell ``cell`` (signed decimal id), ``polygon``
        (flat ``[lng0, lat0, ..., lng3, lat3]``, :func:`coordinate_decimals` places), ``fill`` (RGBA), then
        ``elevation`` (metres) in 3D, ``level`` when levels differ, and the values (integers when
        whole, :data:`NO_VALUE` where a cell has none).

        Written by pandas' C JSON writer: about three times faster than ``json.dumps`` on dicts.
        """
        n = self.count
        if n == 0:
            return "[]"
        with paused_gc():
            columns: dict[str, Any] = {
                "cell": self.cells,
                "polygon": list(np.round(self.polygons.reshape(n, 8), self.decimals)),
                "fill": list(self.fills),
            }
            if self.elevation is not None:
                columns["elevation"] = np.round(self.elevation, 1)
            if self.uniform_level is None:
                columns["level"] = self.levels.astype(np.int64)
            for key, values in self.values:
                columns[key] = values if isinstance(values, list) else _json_column(values)
            text: str = pd.DataFrame(columns).to_json(
                orient="records", double_precision=self.decimals, force_ascii=False
            )
            return text

    def rows(self) -> list[dict[str, Any]]:
        """Return the deck rows as Python dicts (what :meth:`rows_json` holds)."""
        rows: list[dict[str, Any]] = json.loads(self.rows_json())
        return rows


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small lists (the rows of 44,000 cells
    are ~500,000 containers; collections triggered by their allocation tripled the time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _json_column(values: npt.NDArray[np.float64], digits: int = 4) -> Any:
    """Return ``values`` ready for the JSON writer: rounded to ``digits`` places, int64 when every
    value is whole, and with :data:`NO_VALUE` (an object column) where a value is missing."""
    rounded = np.round(np.asarray(values, dtype=np.float64), digits)
    finite = np.isfinite(rounded)
    whole = finite & (rounded == np.floor(rounded)) & (np.abs(rounded) < 2.0**53)
    if finite.all():
        return rounded.astype(np.int64) if whole.all() else rounded
    return [
        (int(v) if w else v) if f else NO_VALUE
        for v, f, w in zip(rounded.tolist(), finite.tolist(), whole.tolist(), strict=True)
    ]


def coordinate_decimals(max_level: int) -> int:
    """Return the decimal places that keep the corners of ``max_level`` cells to about 1% of their
    size: 4 (about 10 m, for cells of about 1 km) up to level 13, more for smaller cells, at most 9.

    Neighbouring cells share their corners, and a shared corner rounds the same way in both, so
    rounding never opens gaps between cells; it only moves edges by less than a pixel at the
    zooms where such cells are visible.
    """
    edge_deg = 90.0 / 2**max_level
    return int(min(9, max(4, math.ceil(-math.log10(edge_deg)) + 2)))


def _summary(values: npt.NDArray[np.float64], how: str) -> float:
    """Return the sum or the mean of the finite ``values`` (0.0 when there are none)."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 0.0
    return float(finite.sum() if how == "sum" else finite.mean())


def _merge(current: pd.DataFrame, previous: pd.DataFrame | None, fields: Sequence[str]) -> pd.DataFrame:
    """Return ``current`` (and ``<field>__prev`` columns from ``previous``, outer-joined on ``id``)."""
    if previous is None:
        return current
    prev = previous[["cell", "id", *fields]].rename(columns={f: f"{f}__prev" for f in fields})
    merged = current.merge(prev, on=["id"], how="outer", suffixes=("", "__p"))
    merged["cell"] = merged["cell"].fillna(merged["cell__p"])
    return merged.drop(columns=["cell__p"]).sort_values("id", kind="stable").reset_index(drop=True)


def _tooltip(request: MapRequest, columns: dict[str, str], level: int | None) -> str:
    """Return the deck.gl tooltip template: cell id and level, the tags (the same for every cell,
    so written into the template), then the values."""
    level_text = str(level) if level is not None else "{level}"
    lines = [
        "<div style='font:12px sans-serif'>",
        f"<div><b>cell</b> {{cell}} <span style='opacity:.7'>(level {level_text})</span></div>",
    ]
    for tag, value in request.tags:
        lines.append(f"<div><b>{_label(tag)}</b> {_label(value)}</div>")
    for name in request.fields:
        key = columns[name]
        line = f"<div><b>{_label(name)}</b> {{{key}}}"
        if request.compare != "none" and name == request.color_field:
            line += f" <span style='opacity:.8'>({request.compare}: {{{key}__prev}}, change {{{key}__diff}})</span>"
        lines.append(line + "</div>")
    lines.append("</div>")
    return "".join(lines)


def _label(name: str) -> str:
    """Return ``name`` safe inside the HTML template (no markup, no template braces)."""
    import html

    return html.escape(name.replace("{", "(").replace("}", ")"))


def build_map(
    current: pd.DataFrame,
    request: MapRequest,
    geometry: CellGeometryCache,
    previous: pd.DataFrame | None = None,
) -> MapData:
    """Return the :class:`MapData` for the per-cell frames of :meth:`web_atlas.influx.InfluxReader.cells`.

    ``previous`` is the same window a day or a week earlier when ``request.compare`` is not
    ``"none"``. Cells outside ``request.area`` (when set) are left out.

    Raises:
        ValueError: ``request.color_field`` or ``request.elevation_field`` is not in ``request.fields``.
    """
    for name in (request.color_field, request.elevation_field):
        if name is not None and name not in request.fields:
            raise ValueError(f"field {name!r} is not one of {', '.join(request.fields)}")
    current, placed = _placed(current, request.area, geometry)
    if request.compare != "none" and previous is not None:
        previous = _placed(previous, request.area, geometry)[0]
    # no point at all in the baseline window: nothing to compare with (never a baseline of 0)
    comparing = request.compare != "none" and previous is not None and len(previous) > 0
    compare_note = f"no {request.compare} data" if request.compare != "none" and not comparing else ""
    centers = placed.centers
    if request.area is not None:
        view = view_for_area(request.area, request.width_px, request.height_px)
    else:
        view = view_for_cells(centers, request.width_px, request.height_px)
    finest = data_level(current) or 13
    level = min(request.level, finest) if request.level is not None else auto_level(view, finest)
    level_note = combine_note(level, finest, request.combine_rule(request.color_field))
    coarse = level < finest
    if coarse:
        how = {name: request.combine_rule(name) for name in request.fields}
        current = coarsen(current, level, how)
        if comparing and previous is not None:
            previous = coarsen(previous, level, how)
    frame = _merge(current, previous if comparing else None, request.fields)
    ids = frame["id"].to_numpy(dtype=np.uint64)
    if coarse or comparing:  # other cells than those placed above
        geo = geometry.lookup(ids)
        keep = np.isfinite(geo.centers).all(axis=1)
        if request.area is not None:
            keep &= in_area(geo.centers, request.area, margin_km=_area_margin_km(level))
        frame = frame[keep].reset_index(drop=True)
        ids, polygons = ids[keep], geo.polygons[keep]
    else:
        polygons = placed.polygons

    columns = {f: row_key(f) for f in request.fields}
    color_values = frame[request.color_field].to_numpy(dtype=np.float64)
    total = _summary(color_values, request.summary)
    previous_total: float | None = None
    new = gone = np.zeros(len(frame), dtype=bool)
    if comparing:
        prev_values = frame[f"{request.color_field}__prev"].to_numpy(dtype=np.float64)
        previous_total = _summary(prev_values, request.summary)
        now_in, then_in = (
            _present(frame, request.fields),
            _present(frame, [f"{f}__prev" for f in request.fields]),
        )
        new, gone = now_in & ~then_in, then_in & ~now_in
        color_values = np.where(new | gone, np.nan, color_values - prev_values)
        palette, title = DIVERGING, f"{request.color_field}: change against {request.compare}"
    else:
        palette, title = (DARK_SEQUENTIAL if request.dark else LIGHT_SEQUENTIAL), request.color_field
    scale = color_scale(
        color_values,
        request.scale,
        palette,
        diverging=comparing,
        integer=request.color_field in request.integer_fields,
    )
    extra: tuple[LegendEntry, ...] = ()
    if comparing:
        scale, extra = _mark_new_and_gone(scale, new, gone, request.compare)

    elevation: npt.NDArray[np.float64] | None = None
    if request.elevation_field is not None:
        elev = np.abs(np.nan_to_num(frame[request.elevation_field].to_numpy(dtype=np.float64), nan=0.0))
        top = float(elev.max()) if elev.size else 0.0
        elevation = elev / top * MAX_ELEVATION_M if top > 0 else elev
    values: list[tuple[str, npt.NDArray[np.float64] | list[Any]]] = [
        (columns[name], frame[name].to_numpy(dtype=np.float64)) for name in request.fields
    ]
    if comparing:
        key = columns[request.color_field]
        diff: npt.NDArray[np.float64] | list[Any] = color_values
        if (new | gone).any():  # the tooltip says "new" or "gone" instead of a change
            diff = [
                "new" if n else "gone" if g else v
                for v, n, g in zip(
                    _as_list(_json_column(color_values)), new.tolist(), gone.tolist(), strict=True
                )
            ]
        values += [
            (f"{key}__prev", frame[f"{request.color_field}__prev"].to_numpy(dtype=np.float64)),
            (f"{key}__diff", diff),
        ]
    levels = cell_level(ids)
    if elevation is not None:
        view = view.tilted(EXTRUDED_PITCH)
    uniform = int(levels[0]) if levels.size and (levels == levels[0]).all() else None
    return MapData(
        cells=frame["cell"].astype(str).tolist(),
        polygons=polygons,
        fills=scale.colors,
        elevation=elevation,
        levels=levels,
        values=tuple(values),
        decimals=coordinate_decimals(int(levels.max()) if levels.size else 13),
        scale=scale,
        legend_title=title,
        view=view,
        tooltip_html=_tooltip(
            request if comparing else dataclasses.replace(request, compare="none"), columns, uniform
        ),
        total=total,
        previous_total=previous_total,
        area_ring=request.area,
        columns=columns,
        level_note=level_note,
        compare_note=compare_note,
        legend_extra=extra,
    )


def _present(frame: pd.DataFrame, columns: Sequence[str]) -> npt.NDArray[np.bool_]:
    """Return, per row, whether any of ``columns`` has a value (the cell had a point in that window)."""
    present: npt.NDArray[np.bool_] = frame[list(columns)].notna().any(axis=1).to_numpy(dtype=bool)
    return present


def _as_list(column: Any) -> list[Any]:
    return column if isinstance(column, list) else column.tolist()


def _mark_new_and_gone(
    scale: ColorScale, new: npt.NDArray[np.bool_], gone: npt.NDArray[np.bool_], compare: str
) -> tuple[ColorScale, tuple[LegendEntry, ...]]:
    """Return ``scale`` with new and gone cells in their own colours (no longer "no data"), and their swatches."""
    colors = scale.colors.copy()
    colors[new] = (*NEW_RGB, DEFAULT_ALPHA)
    colors[gone] = (*GONE_RGB, DEFAULT_ALPHA)
    extra = ((LegendEntry(NEW_RGB, f"new: no point {compare}"),) if new.any() else ()) + (
        (LegendEntry(GONE_RGB, "gone: no point now"),) if gone.any() else ()
    )
    no_data = bool((colors[:, 3] != DEFAULT_ALPHA).any())
    return dataclasses.replace(scale, colors=colors, no_data=no_data), extra


def _placed(
    frame: pd.DataFrame, area: ServiceArea | None, geometry: CellGeometryCache
) -> tuple[pd.DataFrame, CellGeometry]:
    """Return the rows of ``frame`` whose cell has a valid centre inside ``area`` (when set), and their geometry."""
    geo = geometry.lookup(frame["id"].to_numpy(dtype=np.uint64))
    keep = np.isfinite(geo.centers).all(axis=1)
    if area is not None:
        keep &= in_area(geo.centers, area)
    if keep.all():
        return frame, geo
    return frame[keep].reset_index(drop=True), CellGeometry(geo.polygons[keep], geo.centers[keep])


def _area_margin_km(level: int) -> float:
    """Return how far outside an area a coarse cell's centre may lie (its children were inside)."""
    from web_atlas.areas import AREA_MARGIN_KM
    from web_atlas.coarsen import cell_edge_km

    return max(AREA_MARGIN_KM, cell_edge_km(level))


__all__ = [
    "COMPARE_MODES",
    "COMPARE_SHIFT_S",
    "EXTRUDED_PITCH",
    "GONE_RGB",
    "MAX_ELEVATION_M",
    "NEW_RGB",
    "NO_VALUE",
    "CompareMode",
    "MapData",
    "MapRequest",
    "build_map",
    "coordinate_decimals",
    "paused_gc",
    "row_key",
]
