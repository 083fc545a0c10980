"""The Atlas: a Streamlit page that draws a dagger's per-S2-cell aggregates on a map.

Run it with ``daggers atlas`` (which starts ``streamlit run`` on this file with static serving on,
so the offline base map at ``/app/static/`` is served by the app itself; a deployment can point the
Atlas at its own MapLibre style or XYZ tiles instead, :mod:`web_atlas.basemap`). Settings come from the
environment (:mod:`web_atlas.settings`).

Layout: the sidebar holds the data controls (dagger output, service area, tag filters, the fields
for colour and elevation, colour scale, map style, window size, look-back, comparison); above the
map are play/pause and live; the time slider, the map and its legend are a fragment, so moving
through time re-runs only them (and, while playing or live, the fragment re-runs on a timer).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

try:
    import web_atlas  # noqa: F401  - importable when the project is installed or run from its root
except ModuleNotFoundError:  # `streamlit run web_atlas/app.py` puts only web_atlas/ on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st

from job.common.words import counted
from job.errors import DaggerError
from web_atlas.areas import ALL_AREAS, area_by_name, area_names
from web_atlas.coarsen import cell_edge_km
from web_atlas.colors import SCALE_KINDS, format_value, legend_html
from web_atlas.deck import MAP_STYLES, build_deck
from web_atlas.geometry import CellGeometryCache
from web_atlas.influx import AGGREGATES, CellQuery, InfluxReader, MeasurementInfo, window_end_ms
from web_atlas.mapdata import COMPARE_MODES, COMPARE_SHIFT_S, MapRequest, build_map
from web_atlas.settings import AtlasSettings

WINDOW_SIZES: dict[str, int] = {"1 min": 60, "5 min": 300, "15 min": 900, "1 hour": 3600}
LOOK_BACK: dict[str, int] = {"1 hour": 3600, "6 hours": 6 * 3600, "24 hours": 86_400, "7 days": 7 * 86_400}
ALL_VALUES = "all"
CELL_SIZES: list[str] = ["auto", *(str(level) for level in range(16, 3, -1))]
MAP_HEIGHT = 640


def _fail(exc: DaggerError) -> None:
    """Show a known error (title, message, hint) instead of the map, and stop this run."""
    st.error(f"**{exc.title}**: {exc.message}" + (f"\n\n*hint:* {exc.hint}" if exc.hint else ""))
    st.stop()


st.set_page_config(page_title="Daggers Atlas", layout="wide", initial_sidebar_state="expanded")
# Less empty space above the map (Streamlit's default top padding is sized for a toolbar). A metric's label
# wraps in the narrow column beside the map instead of being cut ("num_of_bookings, all …").
st.markdown(
    "<style>.block-container{padding-top:2.2rem;padding-bottom:1rem}"
    '[data-testid="stMetricLabel"],[data-testid="stMetricLabel"] *{white-space:normal!important;'
    "overflow:visible!important;text-overflow:clip!important;overflow-wrap:anywhere;height:auto!important}"
    "</style>",
    unsafe_allow_html=True,
)

try:
    SETTINGS = AtlasSettings.from_env()
except DaggerError as exc:
    _fail(exc)
    raise  # unreachable: st.stop() ends the run

CONN = (SETTINGS.influx_url, SETTINGS.database, SETTINGS.username)


@st.cache_resource(show_spinner=False)
def _reader(url: str, database: str, username: str | None) -> InfluxReader:
    """One InfluxDB reader per connection (the password comes from the environment, not the key)."""
    return InfluxReader(SETTINGS)


@st.cache_resource(show_spinner=False)
def _geometry() -> CellGeometryCache:
    """The process-wide cache of S2 cell polygons."""
    return CellGeometryCache()


@st.cache_data(ttl=60, show_spinner=False)
def _measurements(url: str, database: str, username: str | None) -> list[MeasurementInfo]:
    return _reader(url, database, username).s2_measurements()


@st.cache_data(ttl=300, show_spinner=False)
def _tag_values(url: str, database: str, username: str | None, measurement: str, tag: str) -> list[str]:
    return _reader(url, database, username).tag_values(measurement, tag)


@st.cache_data(ttl=SETTINGS.refresh_s, show_spinner=False)
def _windows(
    url: str, database: str, username: str | None, measurement: str, field: str, size_s: int, span_s: int
) -> tuple[list[int], int | None]:
    """Return the ends (epoch ms) of the windows with data, and the time of the newest point (None: none)."""
    reader = _reader(url, database, username)
    last = reader.last_time_ms(measurement, field)
    if last is None:
        return [], None
    return reader.windows(measurement, field, size_s, span_s, window_end_ms(last, size_s)), last


@st.cache_data(ttl=120, show_spinner=False, max_entries=64)
def _cells(url: str, database: str, username: str | None, query: CellQuery) -> Any:
    """Cells of a window, kept two minutes (stepping back and forth through time reads nothing)."""
    return _reader(url, database, username).cells(query)


@st.cache_data(ttl=SETTINGS.refresh_s, show_spinner=False, max_entries=8)
def _cells_live(url: str, database: str, username: str | None, query: CellQuery) -> Any:
    """Cells of a window while following live data: re-read every refresh period."""
    return _reader(url, database, username).cells(query)


def _window_label(end_ms: int, size_s: int, last_ms: int | None = None) -> str:
    """Return ``"Sun 22 Nov 08:00–08:05 UTC"`` for the window that ends at ``end_ms``, with ``" (13 of 15 min)"``
    when the newest point (``last_ms``) is before its end: a window the data has not filled yet."""
    end = datetime.fromtimestamp(end_ms / 1000, UTC)
    start = datetime.fromtimestamp(end_ms / 1000 - size_s, UTC)
    part = _partial(end_ms, size_s, last_ms)
    return f"{start:%a %d %b %H:%M}–{end:%H:%M} UTC" + (f" ({part})" if part else "")


def _covered_ms(end_ms: int, size_s: int, last_ms: int | None) -> int:
    """Return how much of the window ending at ``end_ms`` the data covers: up to the newest point."""
    start_ms = end_ms - size_s * 1000
    return size_s * 1000 if last_ms is None or last_ms >= end_ms else max(last_ms - start_ms, 0)


def _partial(end_ms: int, size_s: int, last_ms: int | None) -> str:
    """Return ``"13 of 15 min"`` for a window the data covers only in part, else ``""``."""
    covered = _covered_ms(end_ms, size_s, last_ms)
    if covered >= size_s * 1000:
        return ""
    return f"{_minutes(covered)} of {_minutes(size_s * 1000)} min"


def _minutes(ms: float) -> str:
    """Return a duration in minutes, short: ``13``, ``2.5``."""
    return f"{round(ms / 60_000, 1):g}"


def _toggle_play() -> None:
    """Start or stop stepping through the windows (the Play / Pause button)."""
    st.session_state["atlas_playing"] = not st.session_state.get("atlas_playing", False)
    st.session_state["atlas_last_step"] = 0.0


def _step(windows: list[int], delta: int) -> None:
    """Move the time slider ``delta`` windows (wrapping around)."""
    current = st.session_state.get("atlas_window")
    index = windows.index(current) if current in windows else len(windows) - 1
    st.session_state["atlas_window"] = windows[(index + delta) % len(windows)]


# ---- sidebar: what to show ----------------------------------------------------------------------

st.sidebar.title("Daggers Atlas")
try:
    infos = _measurements(*CONN)
except DaggerError as exc:
    _fail(exc)
    raise
if not infos:
    st.warning(
        f"No measurement in database **{SETTINGS.database}** at {SETTINGS.influx_url} has an S2 tag "
        "(such as `tag_s2id`) and a numeric field yet.\n\nRun a dagger whose SQL selects "
        "`S2Id(lat, long, 13) AS tag_s2id`, or pick another database with `daggers atlas --db`."
    )
    st.stop()

by_name = {info.name: info for info in infos}
measurement = st.sidebar.selectbox(
    "Dagger output",
    list(by_name),
    key="atlas_measurement",
    help="An InfluxDB measurement with an S2 tag, written by a dagger.",
)
info = by_name[measurement]
area_name = st.sidebar.selectbox(
    "Service area", area_names(), key="atlas_area", help="Flies the map to the city and keeps its cells only."
)
filters: list[tuple[str, str]] = []
shown_tags: list[tuple[str, str]] = []
for tag in info.tags:
    try:
        values = _tag_values(*CONN, measurement, tag)
    except DaggerError as exc:
        _fail(exc)
        raise
    choice = st.sidebar.selectbox(tag, [ALL_VALUES, *values], key=f"atlas_tag_{measurement}_{tag}")
    shown_tags.append((tag, choice))
    if choice != ALL_VALUES:
        filters.append((tag, choice))
color_field = st.sidebar.selectbox("Colour by", list(info.fields), key=f"atlas_color_{measurement}")
elevation_choice = st.sidebar.selectbox(
    "Elevation (3D)", ["none", *info.fields], key=f"atlas_elev_{measurement}"
)
scale_kind = st.sidebar.radio("Colour scale", SCALE_KINDS, key="atlas_scale", horizontal=True)
aggregate = st.sidebar.selectbox(
    "Combine points by",
    AGGREGATES,
    key="atlas_aggregate",
    help="How the points of a cell in one window are combined: across the tags "
    "not filtered and the dagger windows inside a longer window. auto sums "
    "integer fields (counts) and averages float fields.",
)
cell_size = st.sidebar.selectbox(
    "Cell size",
    CELL_SIZES,
    key="atlas_cell_size",
    format_func=lambda s: s if s == "auto" else f"level {s} (~{cell_edge_km(int(s)):.3g} km)",
    help="auto: the finest S2 level whose cells are readable at the map's zoom; coarser cells combine their "
    "children as 'Combine points by' says (counts add up).",
)
map_style = st.sidebar.radio("Map style", list(MAP_STYLES), key="atlas_style", horizontal=True)
size_label = st.sidebar.selectbox("Window", list(WINDOW_SIZES), key="atlas_window_size")
span_label = st.sidebar.selectbox(
    "Look back",
    list(LOOK_BACK),
    index=1,
    key="atlas_span",
    help="How far before the newest point the time slider reaches.",
)
compare = st.sidebar.radio(
    "Compare with",
    COMPARE_MODES,
    key="atlas_compare",
    horizontal=True,
    format_func=lambda m: "nothing" if m == "none" else f"{m} (same window)",
)
size_s, span_s = WINDOW_SIZES[size_label], LOOK_BACK[span_label]
area = area_by_name(area_name)

# ---- header: play / live --------------------------------------------------------------------------

st.markdown(f"### {measurement} · {area_name if area is not None else ALL_AREAS}")
head = st.columns([1, 1, 4])
playing = bool(st.session_state.get("atlas_playing", False))
live = head[1].toggle(
    "Live",
    key="atlas_live",
    help=f"Follow the newest window, re-read every {format_value(SETTINGS.refresh_s)} s.",
)
head[0].button(
    "⏸ Pause" if playing else "▶ Play",
    key="atlas_play",
    on_click=_toggle_play,
    disabled=live,
    help="Step through the windows of the look-back period.",
)
playing = playing and not live
run_every = SETTINGS.refresh_s if live else (SETTINGS.play_interval_s if playing else None)

base_request = MapRequest(
    color_field=color_field,
    fields=tuple(info.fields),
    elevation_field=None if elevation_choice == "none" else elevation_choice,
    scale=scale_kind,
    dark=map_style == "dark",
    compare=compare,
    area=area,
    tags=tuple(shown_tags),
    level=None if cell_size == "auto" else int(cell_size),
)


@st.fragment(run_every=run_every)
def timeline_and_map() -> None:
    """The time slider, the map and its legend (re-run alone when time moves)."""
    try:
        windows, last_ms = _windows(*CONN, measurement, color_field, size_s, span_s)
    except DaggerError as exc:
        _fail(exc)
        return
    if not windows:
        st.info(f"**{measurement}** has no points in the {span_label} before its newest point.")
        return
    if live or st.session_state.get("atlas_window") not in windows:
        st.session_state["atlas_window"] = windows[-1]
    if (
        playing
        and time.monotonic() - st.session_state.get("atlas_last_step", 0.0) >= 0.9 * SETTINGS.play_interval_s
    ):
        _step(windows, +1)
        st.session_state["atlas_last_step"] = time.monotonic()
    # Set on every run, so Streamlit sends the slider its value: after a change of window size its options
    # change, and a slider whose value was not set again showed its first option while the map drew this one.
    st.session_state["atlas_window"] = st.session_state["atlas_window"]

    nav = st.columns([1, 1, 10])
    nav[0].button(
        "◀",
        key="atlas_prev",
        on_click=_step,
        args=(windows, -1),
        disabled=live or len(windows) < 2,
        help="Previous window",
    )
    nav[1].button(
        "▶",
        key="atlas_next",
        on_click=_step,
        args=(windows, +1),
        disabled=live or len(windows) < 2,
        help="Next window",
    )
    if len(windows) > 1:
        window_end = nav[2].select_slider(
            "Time",
            options=windows,
            key="atlas_window",
            disabled=live,
            format_func=lambda end: _window_label(end, size_s, last_ms),
            label_visibility="collapsed",
        )
    else:
        window_end = windows[0]
        nav[2].caption(_window_label(window_end, size_s, last_ms))
    partial, covered_ms = _partial(window_end, size_s, last_ms), _covered_ms(window_end, size_s, last_ms)

    query = CellQuery(
        measurement,
        info.s2_tag,
        tuple(info.fields),
        window_end - size_s * 1000,
        window_end,
        aggregate,
        tuple(filters),
        info.float_fields,
    )
    color_aggregate = query.aggregate_of(color_field)
    started = time.perf_counter()
    try:
        current = (_cells_live if live else _cells)(*CONN, query)
        # a partial window is compared with the same part of the baseline's (its first 13 of 15 minutes)
        baseline = replace(query, end_ms=query.start_ms + covered_ms)
        previous = _cells(*CONN, baseline.shifted(COMPARE_SHIFT_S[compare])) if compare != "none" else None
    except DaggerError as exc:
        _fail(exc)
        return
    read_s = time.perf_counter() - started
    started = time.perf_counter()
    summary: Literal["sum", "mean"] = "sum" if color_aggregate == "sum" else "mean"
    combine = tuple((f, query.aggregate_of(f)) for f in info.fields)
    whole = tuple(f for f in info.fields if f not in info.float_fields and query.aggregate_of(f) != "mean")
    data = build_map(
        current,
        replace(base_request, summary=summary, combine=combine, integer_fields=whole),
        _geometry(),
        previous,
    )
    basemap = SETTINGS.base_map(dark=map_style == "dark")
    shown = repr(
        (query, color_field, base_request, map_style)
    )  # what the map is of: a change draws a new layer
    deck = build_deck(
        data, style=map_style, height=MAP_HEIGHT, fly_ms=SETTINGS.fly_ms, basemap=basemap, shown=shown
    )
    built_s = time.perf_counter() - started

    map_col, side = st.columns([5, 1])
    with map_col:
        st.pydeck_chart(deck, height=MAP_HEIGHT)
    with side:
        st.metric("cells", f"{data.count:,}")
        delta = None if data.previous_total is None else format_value(data.total - data.previous_total)
        label = f"{color_field}, all cells" if summary == "sum" else f"{color_field}, mean of cells"
        against = f"against {compare}" + (f" (its first {_minutes(covered_ms)} min)" if partial else "")
        st.metric(
            label + (f" ({partial})" if partial else ""),
            format_value(data.total),
            delta=delta,
            help=None if delta is None else f"{against}: {format_value(data.previous_total or 0)}",
        )
        if data.compare_note:
            st.caption(f"{data.compare_note}: cells coloured without a comparison")
        st.markdown(
            legend_html(data.scale, data.legend_title, data.level_note, data.legend_extra),
            unsafe_allow_html=True,
        )
    credit = f" · base map: {basemap.attribution}" if basemap.attribution else ""
    st.caption(
        f"{_window_label(window_end, size_s, last_ms)} · read {counted(len(current), 'cell', fmt=',')} in {read_s:.2f} s · "
        f"map built in {built_s:.2f} s · InfluxDB {SETTINGS.influx_url}, database {SETTINGS.database}"
        f"{credit}"
    )


timeline_and_map()
