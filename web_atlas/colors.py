"""Colour scales for the choropleth, and their legends.

* **linear**: the colour moves evenly along the palette from the lowest to the highest value;
* **quantile**: the values are cut into classes holding about as many cells each (robust when a
  few cells are far busier than the rest), one palette colour per class.

A *diverging* scale (for differences against D-1 or D-7) is centred on zero: losses are blue,
gains red, no change light grey; linear is symmetric (``-max|v| .. +max|v|``) and quantile cuts
gains and losses separately by size. Cells without a value (NaN) are drawn translucent grey.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

ScaleKind = Literal["linear", "quantile"]
SCALE_KINDS: Final[tuple[ScaleKind, ...]] = ("quantile", "linear")

Rgb = tuple[int, int, int]

#: Light map: yellow (few) to dark red (many), ColorBrewer YlOrRd.
LIGHT_SEQUENTIAL: Final = ("#ffffb2", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#b10026")
#: Dark map: deep purple (few) to bright yellow (many), matplotlib's plasma.
DARK_SEQUENTIAL: Final = ("#3b049a", "#7201a8", "#a92395", "#d5546e", "#f48849", "#fdc328", "#f0f921")
#: Differences: blue (fewer) through light grey (same) to red (more), ColorBrewer RdBu reversed.
DIVERGING: Final = ("#2166ac", "#67a9cf", "#d1e5f0", "#eeeeee", "#fddbc7", "#ef8a62", "#b2182b")
NO_DATA_RGBA: Final = (150, 150, 150, 70)
DEFAULT_ALPHA: Final = 210


def hex_to_rgb(color: str) -> Rgb:
    """Return ``(r, g, b)`` of a ``#rrggbb`` colour.

    Raises:
        ValueError: ``color`` is not ``#`` and six hex digits.
    """
    text = color.strip().lstrip("#")
    if len(text) != 6:
        raise ValueError(f"{color!r} is not a #rrggbb colour")
    return int(text[0:2], 16), int(text[2:4], 16), int(text[4:6], 16)


def format_value(value: float) -> str:
    """Return ``value`` for people: whole numbers with thousands separators, else 3 significant digits."""
    if value is None or not math.isfinite(value):
        return "–"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}" if magnitude >= 0.001 else f"{value:.2e}"


def _signed(value: float) -> str:
    return ("+" if value > 0 else "") + format_value(value)


@dataclass(frozen=True)
class LegendEntry:
    """One swatch of a legend: its colour and the values it stands for."""

    color: Rgb
    label: str


@dataclass(frozen=True)
class ColorScale:
    """Colours for a set of values and the legend that explains them.

    ``colors`` is ``(n, 4)`` uint8 RGBA, one row per value; ``entries`` lists the legend from the
    lowest to the highest value; ``gradient`` says the legend is a continuous bar (linear scale)
    rather than classes; ``domain`` is the value range the colours span.
    """

    kind: ScaleKind
    diverging: bool
    colors: npt.NDArray[np.uint8]
    entries: tuple[LegendEntry, ...]
    domain: tuple[float, float]
    gradient: bool
    no_data: bool


def _palette(palette: Sequence[str]) -> npt.NDArray[np.float64]:
    return np.array([hex_to_rgb(c) for c in palette], dtype=np.float64)


def _interpolate(stops: npt.NDArray[np.float64], t: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Return RGB at positions ``t`` in [0, 1] along the evenly spaced ``stops``."""
    pos = np.clip(t, 0.0, 1.0) * (len(stops) - 1)
    lo = np.minimum(np.floor(pos).astype(np.int64), len(stops) - 2)
    frac = (pos - lo)[:, None]
    rgb: npt.NDArray[np.float64] = stops[lo] * (1 - frac) + stops[lo + 1] * frac
    return rgb


def _rgba(rgb: npt.NDArray[np.float64], finite: npt.NDArray[np.bool_], alpha: int) -> npt.NDArray[np.uint8]:
    out = np.empty((finite.size, 4), dtype=np.uint8)
    out[:, :3] = np.rint(rgb).astype(np.uint8)
    out[:, 3] = alpha
    out[~finite] = NO_DATA_RGBA
    return out


def _to_rgb(row: npt.NDArray[np.float64]) -> Rgb:
    r, g, b = (int(round(float(x))) for x in row[:3])
    return r, g, b


def linear_scale(
    values: npt.ArrayLike,
    palette: Sequence[str] = LIGHT_SEQUENTIAL,
    *,
    diverging: bool = False,
    alpha: int = DEFAULT_ALPHA,
    ticks: int = 5,
    integer: bool = False,
) -> ColorScale:
    """Return a linear :class:`ColorScale` for ``values`` (see the module docstring); with ``integer``
    (a count) the legend's ticks are whole numbers."""
    v = np.asarray(values, dtype=np.float64).ravel()
    finite = np.isfinite(v)
    integer = integer and _whole(v[finite])
    stops = _palette(palette)
    if finite.any():
        lo, hi = float(v[finite].min()), float(v[finite].max())
    else:
        lo = hi = 0.0
    if diverging:
        m = max(abs(lo), abs(hi))
        lo, hi = -m, m
    span = hi - lo
    t = (np.where(finite, v, lo) - lo) / span if span > 0 else np.full(v.size, 0.5 if diverging else 1.0)
    colors = _rgba(_interpolate(stops, t), finite, alpha)
    positions = np.linspace(0.0, 1.0, ticks)
    tick_rgb = _interpolate(stops, positions)
    entries = (
        tuple(
            LegendEntry(
                _to_rgb(tick_rgb[k]),
                (_signed if diverging else format_value)(
                    float(round(lo + p * span)) if integer else lo + p * span
                ),
            )
            for k, p in enumerate(positions)
        )
        if span > 0
        else (
            LegendEntry(
                _to_rgb(_interpolate(stops, np.array([0.5 if diverging else 1.0]))[0]), format_value(lo)
            ),
        )
    )
    return ColorScale("linear", diverging, colors, entries, (lo, hi), span > 0, not finite.all())


def _whole(values: npt.NDArray[np.float64]) -> bool:
    """Return whether every value is a whole number (a mean of counts is not, and keeps its decimals)."""
    return bool(np.all(np.mod(values, 1.0) == 0.0))


def _quantile_breaks(
    v: npt.NDArray[np.float64], classes: int, integer: bool = False
) -> npt.NDArray[np.float64]:
    """Return the distinct class boundaries (``lo .. hi``) cutting ``v`` into ``classes`` quantiles; with
    ``integer`` (whole values) the inner boundaries are rounded up to whole numbers."""
    q = np.quantile(v, np.linspace(0.0, 1.0, classes + 1))
    if integer and q.size > 2:
        q = np.concatenate(([q[0]], np.ceil(q[1:-1]), [q[-1]]))
    return np.unique(q)


def _class_bounds(breaks: npt.NDArray[np.float64], k: int, integer: bool) -> tuple[float, float]:
    """Return the lowest and highest value of class ``k`` (``breaks[k]`` up to ``breaks[k + 1]``, the last
    one included); for whole values a class ends one below the next class's start."""
    lo, hi = float(breaks[k]), float(breaks[k + 1])
    if integer and k + 2 < len(breaks):
        hi = max(hi - 1.0, lo)
    return lo, hi


def _range_label(lo: float, hi: float, signed: bool = False) -> str:
    fmt = _signed if signed else format_value
    return fmt(lo) if lo == hi else f"{fmt(lo)} – {fmt(hi)}"


def quantile_scale(
    values: npt.ArrayLike,
    palette: Sequence[str] = LIGHT_SEQUENTIAL,
    *,
    diverging: bool = False,
    alpha: int = DEFAULT_ALPHA,
    integer: bool = False,
) -> ColorScale:
    """Return a quantile :class:`ColorScale` for ``values``: one class per palette colour at most
    (fewer when many values are equal), or, when ``diverging``, up to ``len(palette) // 2`` classes
    for gains and as many for losses, with the middle colour for no change. With ``integer`` (a count)
    the classes have whole bounds that do not overlap: ``20 – 34``, ``35 – 50``."""
    v = np.asarray(values, dtype=np.float64).ravel()
    finite = np.isfinite(v)
    stops = _palette(palette)
    rgb = np.zeros((v.size, 3), dtype=np.float64)
    entries: list[LegendEntry] = []
    data = v[finite]
    integer = integer and _whole(data)
    if not diverging:
        if data.size:
            breaks = _quantile_breaks(data, len(stops), integer)
            classes = max(len(breaks) - 1, 1)
            cls = np.clip(
                np.searchsorted(breaks[1:-1], np.where(finite, v, breaks[0]), side="right"), 0, classes - 1
            )
            # Spread the classes over the whole palette when there are fewer than colours.
            picks = (
                np.rint(np.linspace(0, len(stops) - 1, classes)).astype(np.int64)
                if classes > 1
                else np.array([len(stops) - 1])
            )
            rgb = stops[picks[cls]]
            if len(breaks) == 1:
                entries = [LegendEntry(_to_rgb(stops[picks[0]]), format_value(breaks[0]))]
            else:
                entries = [
                    LegendEntry(_to_rgb(stops[picks[k]]), _range_label(*_class_bounds(breaks, k, integer)))
                    for k in range(classes)
                ]
        domain = (float(data.min()), float(data.max())) if data.size else (0.0, 0.0)
        return ColorScale(
            "quantile", False, _rgba(rgb, finite, alpha), tuple(entries), domain, False, not finite.all()
        )
    mid = len(stops) // 2
    side = mid  # classes per side
    rgb[:] = stops[mid]
    neg_entries: list[LegendEntry] = []
    pos_entries: list[LegendEntry] = []
    for sign in (-1.0, 1.0):
        mask = finite & (np.sign(v) == sign)
        mags = np.abs(v[mask])
        if not mags.size:
            continue
        breaks = _quantile_breaks(mags, side, integer)
        classes = max(len(breaks) - 1, 1)
        cls = np.clip(np.searchsorted(breaks[1:-1], mags, side="right"), 0, classes - 1)
        offsets = np.rint(np.linspace(1, side, classes)).astype(np.int64) if classes > 1 else np.array([side])
        step = int(sign)
        rgb[mask] = stops[mid + step * offsets[cls]]
        side_entries = []
        for k in range(classes):
            lo, hi = _class_bounds(breaks, k, integer) if len(breaks) > 1 else (breaks[0], breaks[0])
            label = _range_label(lo, hi, True) if step > 0 else _range_label(-hi, -lo, True)
            side_entries.append(LegendEntry(_to_rgb(stops[mid + step * offsets[k]]), label))
        if step < 0:
            neg_entries = side_entries[::-1]
        else:
            pos_entries = side_entries
    zero = finite & (v == 0)
    entries = neg_entries + ([LegendEntry(_to_rgb(stops[mid]), "0")] if zero.any() else []) + pos_entries
    m = float(np.abs(data).max()) if data.size else 0.0
    return ColorScale(
        "quantile", True, _rgba(rgb, finite, alpha), tuple(entries), (-m, m), False, not finite.all()
    )


def color_scale(
    values: npt.ArrayLike,
    kind: ScaleKind,
    palette: Sequence[str],
    *,
    diverging: bool = False,
    alpha: int = DEFAULT_ALPHA,
    integer: bool = False,
) -> ColorScale:
    """Return the ``kind`` scale (``"linear"`` or ``"quantile"``) of ``values`` (``integer``: whole numbers,
    such as counts, get whole legend bounds).

    Raises:
        ValueError: ``kind`` is neither.
    """
    if kind == "linear":
        return linear_scale(values, palette, diverging=diverging, alpha=alpha, integer=integer)
    if kind == "quantile":
        return quantile_scale(values, palette, diverging=diverging, alpha=alpha, integer=integer)
    raise ValueError(f"colour scale {kind!r} is not one of {', '.join(SCALE_KINDS)}")


def _swatch(entry: LegendEntry) -> str:
    return (
        "<div style='display:flex;align-items:center;gap:6px'>"
        f"<span style='display:inline-block;width:14px;height:14px;background:rgb{entry.color}'></span>"
        f"<span>{html.escape(entry.label)}</span></div>"
    )


def legend_html(scale: ColorScale, title: str, note: str = "", extra: Sequence[LegendEntry] = ()) -> str:
    """Return an HTML legend (title, then a gradient bar with ticks or one swatch per class, then the
    ``extra`` swatches (cells outside the scale, such as new ones in a comparison), then ``note``: what the
    cells are, e.g. coarser cells summing their children); its text takes the page's colour, so it reads on
    a light or a dark Streamlit theme."""
    parts = [
        '<div class="atlas-legend" style="font:13px sans-serif;color:inherit">',
        f"<div style='font-weight:600;margin-bottom:4px'>{html.escape(title)}</div>",
    ]
    if scale.gradient:
        stops = ", ".join(f"rgb{e.color}" for e in scale.entries)
        parts.append(
            f"<div style='height:12px;border-radius:2px;background:linear-gradient(to right, {stops})'></div>"
        )
        parts.append(
            "<div style='display:flex;justify-content:space-between'>"
            + "".join(f"<span>{html.escape(e.label)}</span>" for e in scale.entries)
            + "</div>"
        )
    else:
        parts += [_swatch(e) for e in scale.entries]
    parts += [_swatch(e) for e in extra]
    if scale.no_data:
        r, g, b, _ = NO_DATA_RGBA
        parts.append(
            "<div style='display:flex;align-items:center;gap:6px'>"
            f"<span style='display:inline-block;width:14px;height:14px;background:rgba({r},{g},{b},0.4)'>"
            "</span><span>no data</span></div>"
        )
    if note:
        parts.append(
            f"<div class='atlas-legend-note' style='font-size:11px;opacity:.75;margin-top:6px'>"
            f"{html.escape(note)}</div>"
        )
    parts.append("</div>")
    return "".join(parts)


__all__ = [
    "DARK_SEQUENTIAL",
    "DIVERGING",
    "LIGHT_SEQUENTIAL",
    "NO_DATA_RGBA",
    "SCALE_KINDS",
    "ColorScale",
    "LegendEntry",
    "ScaleKind",
    "color_scale",
    "format_value",
    "hex_to_rgb",
    "legend_html",
    "linear_scale",
    "quantile_scale",
]
