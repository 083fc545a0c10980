"""The Atlas's InfluxQL layer: statements and parsing (unit), and window and cell reads against a
REAL InfluxDB (the ``influxdb`` fixture)."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from tests.helpers import s2_signed
from tests.web_atlas.conftest import E
from web_atlas.errors import AtlasError
from web_atlas.influx import (
    CellQuery,
    InfluxReader,
    cells_frame,
    pick_s2_tag,
    quote_ident,
    quote_literal,
    window_end_ms,
)
from web_atlas.settings import AtlasSettings


def test_quoting_and_s2_tag_choice() -> None:
    assert quote_ident('a"b\\c') == '"a\\"b\\\\c"'
    assert quote_literal("it's \\ ok") == "'it\\'s \\\\ ok'"
    assert pick_s2_tag(["tag_city_id", "tag_s2id"]) == "tag_s2id"
    assert pick_s2_tag(["S2ID", "x"]) == "S2ID"
    assert pick_s2_tag(["city", "pickup_s2_cell"]) == "pickup_s2_cell"
    assert pick_s2_tag(["city"]) is None


def test_window_ends_are_right_closed() -> None:
    assert window_end_ms(E * 1000, 60) == E * 1000
    assert window_end_ms(E * 1000 + 1, 60) == (E + 60) * 1000
    assert window_end_ms(E * 1000 + 1, 300) == (E + 300) * 1000


def test_cell_query_statement() -> None:
    q = CellQuery(
        "bookings",
        "tag_s2id",
        ("n", "avg km"),
        1000,
        61_000,
        "auto",
        (("tag_vehicle_type", "CAR"), ("tag_note", "it's")),
        mean_fields=("avg km",),
    )
    assert q.influxql() == (
        'SELECT sum("n") AS "n", mean("avg km") AS "avg km" FROM "bookings" WHERE time > 1000ms AND '
        'time <= 61000ms AND "tag_vehicle_type" = \'CAR\' AND "tag_note" = \'it\\\'s\' GROUP BY "tag_s2id"'
    )
    assert q.aggregate_of("n") == "sum" and q.aggregate_of("avg km") == "mean"
    assert CellQuery("m", "s", ("n",), 0, 1, "max").influxql().startswith('SELECT max("n") AS "n"')
    shifted = q.shifted(86_400)
    assert (shifted.start_ms, shifted.end_ms) == (1000 - 86_400_000, 61_000 - 86_400_000)
    with pytest.raises(AtlasError, match="no field of 'm' to read"):
        CellQuery("m", "s", (), 0, 1).influxql()
    with pytest.raises(AtlasError, match="empty time range: end 5 is not after start 5"):
        CellQuery("m", "s", ("n",), 5, 5).influxql()
    with pytest.raises(AtlasError, match="aggregate 'median' is not one of auto, sum"):
        CellQuery("m", "s", ("n",), 0, 1, "median").influxql()  # type: ignore[arg-type]


def test_cells_frame_parses_signed_ids_and_drops_bad_tags() -> None:
    neg, pos = s2_signed(19.4326, -99.1332), s2_signed(-6.2088, 106.8456)
    series: list[dict[str, Any]] = [
        {"tags": {"tag_s2id": pos}, "columns": ["time", "n", "d"], "values": [[0, 5, 1.5]]},
        {"tags": {"tag_s2id": neg}, "columns": ["time", "n", "d"], "values": [[0, 2, None]]},
        {"tags": {"tag_s2id": "abc"}, "columns": ["time", "n", "d"], "values": [[0, 9, 9.0]]},
        {
            "tags": {"tag_s2id": "99999999999999999999"},
            "columns": ["time", "n", "d"],
            "values": [[0, 9, 9.0]],
        },
        {"tags": {"tag_s2id": "0"}, "columns": ["time", "n", "d"], "values": [[0, 9, 9.0]]},
        {"tags": {"tag_s2id": "12"}, "columns": ["time", "n", "d"], "values": []},
    ]
    frame = cells_frame(series, "tag_s2id", ["n", "d"])
    assert frame["cell"].tolist() == [pos, neg]  # sorted by unsigned id: face 1 before face 4
    assert frame["id"].tolist() == [int(pos), int(neg) + (1 << 64)]
    assert frame["n"].tolist() == [5.0, 2.0] and frame["d"].tolist()[0] == 1.5 and np.isnan(frame["d"][1])
    empty = cells_frame([], "tag_s2id", ["n"])
    assert list(empty.columns) == ["cell", "id", "n"] and len(empty) == 0


def test_settings_from_environment() -> None:
    s = AtlasSettings.from_env({})
    assert (s.influx_url, s.database, s.username, s.password, s.refresh_s) == (
        "http://127.0.0.1:8086",
        "daggers",
        None,
        None,
        10.0,
    )
    s = AtlasSettings.from_env(
        {
            "DAGGERS_INFLUX": "https://influx.example:8086/",
            "DAGGERS_ATLAS_DB": "prod",
            "DAGGERS_INFLUX_USERNAME": "atlas",
            "DAGGERS_INFLUX_PASSWORD": "hunter2",
            "DAGGERS_ATLAS_REFRESH_S": "30",
        }
    )
    assert (s.influx_url, s.database, s.username, s.refresh_s) == (
        "https://influx.example:8086",
        "prod",
        "atlas",
        30,
    )
    assert s.password is not None and s.password.get_secret_value() == "hunter2"
    assert "hunter2" not in repr(s) and "hunter2" not in str(s)
    with pytest.raises(AtlasError, match="DAGGERS_INFLUX: 'localhost:8086' is not an http"):
        AtlasSettings.from_env({"DAGGERS_INFLUX": "localhost:8086"})
    with pytest.raises(AtlasError, match="not the URL"):
        AtlasSettings.from_env({"DAGGERS_INFLUX": "http://u:p@h:8086"})
    with pytest.raises(AtlasError, match="DAGGERS_ATLAS_REFRESH_S: 0 is not a number from 1 to 3600"):
        AtlasSettings.from_env({"DAGGERS_ATLAS_REFRESH_S": "0"})


def test_credentials_go_in_a_header_not_the_url() -> None:
    reader = InfluxReader(
        AtlasSettings.from_env({"DAGGERS_INFLUX_USERNAME": "atlas", "DAGGERS_INFLUX_PASSWORD": "hunter2"})
    )
    assert reader.session.auth == ("atlas", "hunter2")
    request = reader.session.prepare_request(
        __import__("requests").Request(
            "GET", "http://127.0.0.1:1/query", params={"q": "SHOW DATABASES"}, auth=reader.session.auth
        )
    )
    assert "hunter2" not in (request.url or "") and request.headers["Authorization"].startswith("Basic ")


@pytest.mark.integration
def test_windows_and_cells_against_influxdb(influxdb: Any) -> None:
    db = f"atlas_{uuid.uuid4().hex[:8]}"
    influxdb.create_database(db)
    cell = s2_signed(-6.2088, 106.8456)
    # Points at E - 300 s, E - 1 s, E and E + 1 s: in 5-minute windows (end - 300, end] they fall
    # in the windows ending E - 300, E, E and E + 300.
    lines = [
        f"m,tag_s2id={cell},tag_k=a n={n}i,f={n / 2} {t}"
        for n, t in ((1, E - 300), (2, E - 1), (3, E), (4, E + 1))
    ]
    lines.append("plain,host=a value=1 0")  # no S2 tag: not offered
    influxdb.write("\n".join(lines), db, precision="s")
    reader = InfluxReader(AtlasSettings(influx_url=influxdb.url, database=db))
    assert reader.measurements() == ["m", "plain"]
    infos = reader.s2_measurements()
    assert [(i.name, i.s2_tag, i.tags, i.fields, i.float_fields) for i in infos] == [
        ("m", "tag_s2id", ("tag_k",), ("n", "f"), ("f",))
    ]
    assert reader.tag_values("m", "tag_k") == ["a"]
    last = reader.last_time_ms("m", "n")
    assert last == (E + 1) * 1000
    end = window_end_ms(last, 300)
    assert end == (E + 300) * 1000
    assert reader.windows("m", "n", 300, 3600, end) == [(E - 300) * 1000, E * 1000, (E + 300) * 1000]
    assert reader.windows("m", "n", 60, 3600, end) == [(E - 300) * 1000, E * 1000, (E + 60) * 1000]
    frame = reader.cells(
        CellQuery("m", "tag_s2id", ("n", "f"), (E - 300) * 1000, E * 1000, mean_fields=("f",))
    )
    assert frame["cell"].tolist() == [cell] and frame["n"].tolist() == [5.0] and frame["f"].tolist() == [1.25]
    assert reader.cells(CellQuery("m", "tag_s2id", ("n",), (E + 1) * 1000, (E + 60) * 1000)).empty
    with pytest.raises(AtlasError, match="InfluxDB rejected 'SELECT nonsense': error parsing query"):
        reader.query("SELECT nonsense")
    with pytest.raises(
        AtlasError, match=r"database not found: nope \(databases at http://127.0.0.1:\d+: .*atlas_"
    ):
        InfluxReader(AtlasSettings(influx_url=influxdb.url, database="nope")).s2_measurements()
