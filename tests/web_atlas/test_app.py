"""Streamlit AppTest tests of the Atlas: its controls, and the deck it sends to the browser (rows,
layer types, view state), against a REAL InfluxDB holding known dagger-shaped points.

Expected values are worked out from the points in conftest.py by hand; cell ids and polygons come
from s2sphere.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import s2sphere
from streamlit.testing.v1 import AppTest

from job.functions.s2 import cell_level, cell_parent, from_decimal_strings
from tests.web_atlas.conftest import DAY, JAKARTA, E, KnownCells
from web_atlas.mapdata import NEW_RGB

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "web_atlas" / "app.py"
TIMEOUT = 60


def _app(monkeypatch: pytest.MonkeyPatch, url: str, db: str) -> AppTest:
    monkeypatch.setenv("DAGGERS_INFLUX", url)
    monkeypatch.setenv("DAGGERS_ATLAS_DB", db)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _deck(at: AppTest) -> dict[str, Any]:
    charts = at.get("deck_gl_json_chart")
    assert len(charts) == 1
    return json.loads(charts[0].proto.json)


def _tooltip(at: AppTest) -> dict[str, Any]:
    return json.loads(at.get("deck_gl_json_chart")[0].proto.tooltip)


def _rows(deck: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cells = [layer for layer in deck["layers"] if layer["id"].startswith("cells-")]
    assert len(cells) == 1
    return {row["cell"]: row for row in cells[0]["data"]}


def _s2sphere_polygon(signed: str) -> list[float]:
    """The cell's corners from s2sphere, flat [lng0, lat0, ..., lng3, lat3], rounded to 4 places
    (about 10 m, what the rows carry for level-13 cells of about 1 km)."""
    cid = int(signed) % (1 << 64)
    cell = s2sphere.Cell(s2sphere.CellId(cid))
    out: list[float] = []
    for k in range(4):
        ll = s2sphere.LatLng.from_point(cell.get_vertex(k))
        out += [round(ll.lng().degrees, 4), round(ll.lat().degrees, 4)]
    return out


def _run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_controls_list_measurements_areas_tags_and_fields(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    assert at.selectbox(key="atlas_measurement").options == ["bookings_per_s2", "drivers_per_s2"]
    assert at.selectbox(key="atlas_area").options[:3] == ["All cities", "Jakarta", "Bandung"]
    assert at.selectbox(key="atlas_tag_bookings_per_s2_tag_city_id").options == ["all", "1", "2"]
    assert at.selectbox(key="atlas_tag_bookings_per_s2_tag_vehicle_type").options == ["all", "BIKE", "CAR"]
    # Integer fields first: the count is what the map is coloured by unless the user picks another.
    assert at.selectbox(key="atlas_color_bookings_per_s2").options == ["num_of_bookings", "avg_distance_km"]
    assert at.selectbox(key="atlas_elev_bookings_per_s2").options == [
        "none",
        "num_of_bookings",
        "avg_distance_km",
    ]
    assert at.radio(key="atlas_scale").options == ["quantile", "linear"]
    assert at.radio(key="atlas_style").options == ["light", "dark"]
    assert at.radio(key="atlas_compare").options == ["nothing", "D-1 (same window)", "D-7 (same window)"]
    # The slider steps through the 1-minute windows with data in the 6 hours before the newest point.
    slider = at.select_slider(key="atlas_window")
    assert slider.options == [
        "Sat 22 Nov 07:57–07:58 UTC",
        "Sat 22 Nov 07:58–07:59 UTC",
        "Sat 22 Nov 07:59–08:00 UTC",
    ]
    assert slider.value == E * 1000
    caption = next(c.value for c in at.caption if "map built in" in c.value)
    assert "Sat 22 Nov 07:59–08:00 UTC" in caption and "read 3 cells" in caption


def test_deck_rows_layers_and_view_for_all_cities(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    deck = _deck(at)
    assert [layer["@@type"] for layer in deck["layers"]] == ["PolygonLayer", "TextLayer"]
    assert deck["mapStyle"] == "/app/static/basemap-light.json"
    rows = _rows(deck)
    assert set(rows) == {known_db.k1, known_db.k2, known_db.k3}
    k1 = rows[known_db.k1]
    # 42 cars + 8 bikes in the window ending at E; "auto" sums the integer field and averages the
    # float one ((3.5 + 2.25) / 2).
    assert (k1["num_of_bookings"], k1["avg_distance_km"]) == (50, 2.875)
    assert set(k1) == {"cell", "polygon", "fill", "num_of_bookings", "avg_distance_km"}
    assert k1["polygon"] == _s2sphere_polygon(known_db.k1)
    assert rows[known_db.k2]["num_of_bookings"] == 10 and rows[known_db.k3]["num_of_bookings"] == 10
    # Quantile scale over (10, 10, 50): the busiest cell gets the palette's last colour.
    assert k1["fill"] == [177, 0, 38, 210]
    assert rows[known_db.k2]["fill"] == [255, 255, 178, 210]
    # The tooltip: the row's cell id and values; the level and the tags are the same for every cell.
    tooltip = _tooltip(at)["html"]
    assert "<b>cell</b> {cell} <span style='opacity:.7'>(level 13)</span>" in tooltip
    assert "<b>num_of_bookings</b> {num_of_bookings}" in tooltip and "<b>tag_vehicle_type</b> all" in tooltip
    assert "<b>tag_city_id</b> all" in tooltip
    # The view fits Jakarta and Bandung: centred between them, flat.
    view = deck["initialViewState"]
    assert -6.95 < view["latitude"] < -6.15 and 106.8 < view["longitude"] < 107.7
    assert view["pitch"] == 0 and 7 < view["zoom"] < 11


def test_service_area_flies_there_and_keeps_its_cells(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    at.selectbox(key="atlas_area").select("Jakarta")
    deck = _deck(_run(at))
    assert [layer["@@type"] for layer in deck["layers"]] == ["PolygonLayer", "PathLayer", "TextLayer"]
    assert set(_rows(deck)) == {known_db.k1, known_db.k2}
    view = deck["initialViewState"]
    assert (view["latitude"], view["longitude"]) == JAKARTA
    # Zoom that fits a 2 * (30 + 2) km * 1.1 circle in 640 px (512 px tiles at zoom 0).
    expected = math.log2(40075.016686 * math.cos(math.radians(JAKARTA[0])) / 512 * 640 / (2 * 32 * 1.1))
    assert view["zoom"] == pytest.approx(expected, abs=0.01)
    assert view["transitionDuration"] > 0
    ring = deck["layers"][1]["data"][0]
    assert ring["name"] == "Jakarta" and len(ring["path"]) == 97 and ring["path"][0] == ring["path"][-1]
    assert any(m.value == "### bookings_per_s2 · Jakarta" for m in at.markdown)


def test_tag_filter_window_and_aggregate(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    at.selectbox(key="atlas_tag_bookings_per_s2_tag_vehicle_type").select("CAR")
    rows = _rows(_deck(_run(at)))
    assert rows[known_db.k1]["num_of_bookings"] == 42
    assert "<b>tag_vehicle_type</b> CAR" in _tooltip(at)["html"]
    assert rows[known_db.k3]["num_of_bookings"] == 7

    at.selectbox(key="atlas_tag_bookings_per_s2_tag_vehicle_type").select("all")
    at.button(key="atlas_prev").click()
    rows = _rows(_deck(_run(at)))
    assert at.select_slider(key="atlas_window").value == (E - 60) * 1000
    assert set(rows) == {known_db.k1} and rows[known_db.k1]["num_of_bookings"] == 5

    # A 5-minute window ending at E holds the 1-minute windows ending E-240 .. E.
    at.selectbox(key="atlas_window_size").select("5 min")
    rows = _rows(_deck(_run(at)))
    # One 5-minute window has data: no slider, the window is named instead.
    assert not at.get("select_slider")
    assert any(c.value == "Sat 22 Nov 07:55–08:00 UTC" for c in at.caption)
    assert rows[known_db.k1]["num_of_bookings"] == 55 and rows[known_db.k3]["num_of_bookings"] == 11
    at.selectbox(key="atlas_aggregate").select("max")
    rows = _rows(_deck(_run(at)))
    assert rows[known_db.k1]["num_of_bookings"] == 42 and rows[known_db.k1]["avg_distance_km"] == 4
    at.selectbox(key="atlas_aggregate").select("sum")
    rows = _rows(_deck(_run(at)))
    assert rows[known_db.k1]["num_of_bookings"] == 55 and rows[known_db.k1]["avg_distance_km"] == 9.75


def test_compare_with_a_day_and_a_week_earlier(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    at.radio(key="atlas_compare").set_value("D-1")
    deck = _deck(_run(at))
    rows = _rows(deck)
    k1, k2, k3 = rows[known_db.k1], rows[known_db.k2], rows[known_db.k3]
    # D-1: 34 bookings (30 cars + 4 bikes) in the window ending E - 1 day; K2 and K3 had no point then: they
    # are new, in a colour of their own, not a rise from 0.
    assert (k1["num_of_bookings"], k1["num_of_bookings__prev"], k1["num_of_bookings__diff"]) == (50, 34, 16)
    assert (k2["num_of_bookings"], k2["num_of_bookings__prev"], k2["num_of_bookings__diff"]) == (
        10,
        "–",
        "new",
    )
    assert (k3["num_of_bookings"], k3["num_of_bookings__prev"], k3["num_of_bookings__diff"]) == (
        10,
        "–",
        "new",
    )
    assert k2["fill"] == k3["fill"] == [*NEW_RGB, 210] and k1["fill"] == [178, 24, 43, 210]  # DIVERGING[-1]
    assert "{num_of_bookings__prev}" in _tooltip(at)["html"]
    legend = next(m.value for m in at.markdown if "atlas-legend" in m.value)
    assert "num_of_bookings: change against D-1" in legend and "new: no point D-1" in legend
    assert "no data" not in legend
    metric = at.metric[1]
    # 50 + 10 + 10 bookings now against 34 a day earlier.
    assert (metric.label, metric.value, metric.delta) == ("num_of_bookings, all cells", "70", "36")
    assert metric.help == "against D-1: 34"

    at.radio(key="atlas_compare").set_value("D-7")
    rows = _rows(_deck(_run(at)))
    k1 = rows[known_db.k1]
    assert (k1["num_of_bookings__prev"], k1["num_of_bookings__diff"]) == (50, 0)
    # No change is the diverging palette's middle colour.
    assert k1["fill"] == [238, 238, 238, 210]


def test_elevation_scale_and_map_style(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    at.selectbox(key="atlas_elev_bookings_per_s2").select("num_of_bookings")
    at.radio(key="atlas_scale").set_value("linear")
    at.radio(key="atlas_style").set_value("dark")
    deck = _deck(_run(at))
    layer = deck["layers"][0]
    assert layer["extruded"] is True and layer["getElevation"] == "@@=elevation"
    rows = _rows(deck)
    # The busiest cell is 3000 m tall; the others in proportion.
    assert rows[known_db.k1]["elevation"] == 3000.0 and rows[known_db.k2]["elevation"] == 600.0
    assert deck["initialViewState"]["pitch"] == 45
    assert deck["mapStyle"] == "/app/static/basemap-dark.json"
    # Linear from 10 to 50 on the dark palette: ends at plasma's yellow, starts at its purple.
    assert rows[known_db.k1]["fill"][:3] == [240, 249, 33]
    assert rows[known_db.k2]["fill"][:3] == [59, 4, 154]


def test_other_measurement_with_negative_cell_ids(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    at.selectbox(key="atlas_measurement").select("drivers_per_s2")
    # Jakarta and Mexico City in one view: the world, where level-13 cells would be specks, so the
    # map draws coarse ancestors, each the sum of its cells, and the legend says so.
    coarse = _rows(_deck(_run(at)))
    assert sorted(row["drivers"] for row in coarse.values()) == [4, 17]
    level = int(cell_level(from_decimal_strings(list(coarse)))[0])
    assert 4 <= level <= 8
    assert set(coarse) == {
        str(np.uint64(cell_parent(from_decimal_strings([k]), level)[0]).astype(np.int64))
        for k in (known_db.k1, known_db.k4)
    }
    assert f"level-{level} S2 cells, each the sum of its level-13 cells" in at.markdown[-1].value
    at.selectbox(key="atlas_cell_size").select("13")
    deck = _deck(_run(at))
    rows = _rows(deck)
    assert known_db.k4.startswith("-")
    assert set(rows) == {known_db.k1, known_db.k4}
    assert rows[known_db.k1]["drivers"] == 17 and rows[known_db.k4]["drivers"] == 4
    assert rows[known_db.k4]["polygon"] == _s2sphere_polygon(known_db.k4)
    assert at.selectbox(key="atlas_tag_drivers_per_s2_tag_driver_status").options == [
        "all",
        "AVAILABLE",
        "BUSY",
    ]


def test_play_steps_and_live_follows_the_newest_window(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, known_db.db)
    assert at.button(key="atlas_play").label == "▶ Play"
    at.button(key="atlas_play").click()
    _run(at)
    assert at.button(key="atlas_play").label == "⏸ Pause"
    # Playing from the newest window wraps around to the first one.
    assert at.select_slider(key="atlas_window").value == (E - 120) * 1000
    rows = _rows(_deck(at))
    assert set(rows) == {known_db.k3} and rows[known_db.k3]["num_of_bookings"] == 1
    at.button(key="atlas_play").click()
    _run(at)
    assert at.button(key="atlas_play").label == "▶ Play"

    at.toggle(key="atlas_live").set_value(True)
    _run(at)
    assert at.select_slider(key="atlas_window").value == E * 1000
    assert at.button(key="atlas_play").disabled


def test_empty_database_and_unreachable_influx(monkeypatch: pytest.MonkeyPatch, influxdb: Any) -> None:
    influxdb.create_database("atlas_empty")
    at = _app(monkeypatch, influxdb.url, "atlas_empty")
    assert "No measurement in database **atlas_empty**" in at.warning[0].value
    assert not at.get("deck_gl_json_chart")

    from job.stack.ports import free_port

    at = _app(monkeypatch, f"http://127.0.0.1:{free_port()}", "daggers")
    assert "**Atlas error**: InfluxDB at http://127.0.0.1:" in at.error[0].value
    assert "cannot be reached" in at.error[0].value

    at = _app(monkeypatch, influxdb.url, "no_such_db")
    assert "database not found: no_such_db" in at.error[0].value and "--db" in at.error[0].value


def test_live_mode_rereads_and_follows_new_windows(monkeypatch: pytest.MonkeyPatch, influxdb: Any) -> None:
    from tests.web_atlas.conftest import write_known

    cells = write_known(influxdb)  # a database of its own: this test adds a window
    monkeypatch.setenv("DAGGERS_ATLAS_REFRESH_S", "1")
    at = _app(monkeypatch, influxdb.url, cells.db)
    at.toggle(key="atlas_live").set_value(True)
    _run(at)
    assert at.select_slider(key="atlas_window").value == E * 1000
    # A dagger writes the next window; after one refresh period the map follows it.
    influxdb.write(
        f"bookings_per_s2,tag_city_id=1,tag_s2id={cells.k1},tag_vehicle_type=CAR "
        f"num_of_bookings=77i,avg_distance_km=1.0 {E + 60}",
        cells.db,
        precision="s",
    )
    deadline = time.monotonic() + 15  # the refresh period is 1 s; a loaded machine may need a few
    while True:
        time.sleep(1.2)
        rows = _rows(_deck(_run(at)))
        if at.select_slider(key="atlas_window").value == (E + 60) * 1000 or time.monotonic() > deadline:
            break
    assert at.select_slider(key="atlas_window").value == (E + 60) * 1000
    assert set(rows) == {cells.k1} and rows[cells.k1]["num_of_bookings"] == 77


def test_compare_without_a_baseline_says_no_d1_data(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, known_db: KnownCells
) -> None:
    """The window ending E - 60 s has 5 bookings in K1 and its D-1 window no point at all: nothing is compared
    (it once read "↑ 5" and coloured the cell as a rise from 0)."""
    at = _app(monkeypatch, influxdb.url, known_db.db)
    at.button(key="atlas_prev").click()
    at.radio(key="atlas_compare").set_value("D-1")
    rows = _rows(_deck(_run(at)))
    assert at.select_slider(key="atlas_window").value == (E - 60) * 1000
    assert rows == {
        known_db.k1: {
            "cell": known_db.k1,
            "polygon": _s2sphere_polygon(known_db.k1),
            "fill": [177, 0, 38, 210],
            "num_of_bookings": 5,
            "avg_distance_km": 4,
        }
    }
    metric = at.metric[1]
    assert (metric.label, metric.value, metric.delta) == ("num_of_bookings, all cells", "5", "")
    assert [c.value for c in at.caption if "D-1" in c.value] == [
        "no D-1 data: cells coloured without a comparison"
    ]
    legend = next(m.value for m in at.markdown if "atlas-legend" in m.value)
    assert ">num_of_bookings</div>" in legend and "change against" not in legend
    assert "{num_of_bookings__prev}" not in _tooltip(at)["html"]


@pytest.fixture(scope="module")
def partial_db(influxdb: Any) -> KnownCells:
    """K1 has one booking a minute from 08:01 to 08:13 (the newest point: 13 of the 15 minutes of 08:00–08:15)
    and, a day earlier, one a minute from 08:01 to 08:15 (the whole window); K2 has 10 at 08:00."""
    from tests.web_atlas.conftest import known_lines

    _, cells = known_lines()
    db = f"atlas_partial_{uuid.uuid4().hex[:8]}"
    influxdb.create_database(db)

    def booking(cell: str, n: int, t: int) -> str:
        return f"bookings_per_s2,tag_city_id=1,tag_s2id={cell},tag_vehicle_type=CAR num_of_bookings={n}i {t}"

    lines = [booking(cells.k1, 1, E + 60 * k) for k in range(1, 14)]
    lines += [booking(cells.k1, 1, E - DAY + 60 * k) for k in range(1, 16)]
    lines.append(booking(cells.k2, 10, E))
    influxdb.write("\n".join(lines), db, precision="s")
    return replace(cells, db=db)


def test_a_partial_window_is_marked_partial(
    monkeypatch: pytest.MonkeyPatch, influxdb: Any, partial_db: KnownCells
) -> None:
    at = _app(monkeypatch, influxdb.url, partial_db.db)
    at.selectbox(key="atlas_window_size").select("15 min")
    _run(at)
    slider = at.select_slider(key="atlas_window")
    assert slider.options == ["Sat 22 Nov 07:45–08:00 UTC", "Sat 22 Nov 08:00–08:15 UTC (13 of 15 min)"]
    assert slider.value == (E + 900) * 1000
    metric = at.metric[1]
    assert (metric.label, metric.value) == ("num_of_bookings, all cells (13 of 15 min)", "13")
    caption = next(c.value for c in at.caption if "map built in" in c.value)
    assert caption.startswith("Sat 22 Nov 08:00–08:15 UTC (13 of 15 min) · read 1 cell ")
    # against the same 13 minutes a day earlier (13 bookings), not its whole window (15)
    at.radio(key="atlas_compare").set_value("D-1")
    rows = _rows(_deck(_run(at)))
    assert (rows[partial_db.k1]["num_of_bookings__prev"], rows[partial_db.k1]["num_of_bookings__diff"]) == (
        13,
        0,
    )
    metric = at.metric[1]
    assert (metric.label, metric.value, metric.delta) == (
        "num_of_bookings, all cells (13 of 15 min)",
        "13",
        "0",
    )
    assert metric.help == "against D-1 (its first 13 min): 13"
    # the window before is whole: no mark
    at.radio(key="atlas_compare").set_value("none")
    at.button(key="atlas_prev").click()
    _run(at)
    assert at.metric[1].label == "num_of_bookings, all cells" and at.metric[1].value == "10"
    # an hour: 08:00–09:00 holds 13 minutes of data
    at.selectbox(key="atlas_window_size").select("1 hour")
    _run(at)
    assert at.select_slider(key="atlas_window").options == [
        "Sat 22 Nov 07:00–08:00 UTC",
        "Sat 22 Nov 08:00–09:00 UTC (13 of 60 min)",
    ]
    at.button(key="atlas_next").click()
    _run(at)
    assert (at.metric[1].label, at.metric[1].value) == ("num_of_bookings, all cells (13 of 60 min)", "13")
