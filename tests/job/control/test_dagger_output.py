"""``daggers dagger output``: a dagger's own output read back from its sink, with known points written
at known times to a real InfluxDB, PostgreSQL and Elasticsearch (noida-db); the exact values in text and
JSON, now and compared with the day (D-1) and the week (D-7) before, for all rows or one tag."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from job.control import ControlPlane, Registry
from job.output import OutputError, OutputQuery, default_step, parse_duration
from job.sinks.elasticsearch import ElasticsearchSink
from job.sinks.influx import InfluxSink
from job.sinks.postgres import PostgresSink
from job.spec import ElasticsearchSinkSpec, InfluxSinkSpec, PostgresSinkSpec
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_control_cli import cli

pytestmark = pytest.mark.integration

UNTIL = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
D1, D7 = timedelta(days=1), timedelta(days=7)


def known_rows() -> pa.Table:
    """Rows at known times around the 15 minutes up to UNTIL (09:45:00, 10:00:00], the day and week before."""
    at = lambda h, m, s=0: datetime(2026, 3, 2, h, m, s, tzinfo=UTC)  # noqa: E731
    rows = [  # (window, city, bookings)
        (at(9, 45), 1, 100),  # the range's start is left out
        (at(9, 50), 1, 3),
        (at(9, 50), 2, 4),
        (at(9, 50, 20), 1, 5),  # one 30 s step: 12 (city 1: 8)
        (at(9, 59, 30), 1, 7),
        (at(10, 0), 2, 2),  # the range's end is in
        (at(10, 0, 30), 1, 1000),  # after the range
        (at(9, 50) - D1, 1, 10),
        (at(9, 50) - D1, 2, 1),
        (at(9, 59, 30) - D7, 2, 6),
    ]
    return pa.table(
        {
            "tag_city_id": pa.array([r[1] for r in rows], pa.int32()),
            "bookings": pa.array([r[2] for r in rows], pa.int64()),
            "window_timestamp": pa.array([r[0] for r in rows], pa.timestamp("us", tz="UTC")),
        }
    )


def with_sink(name: str, sink_yaml: str) -> str:
    head, _, _ = bookings_spec(name).partition("sink:\n")
    return head + "sink:\n" + sink_yaml


@pytest.fixture(scope="module")
def world(influxdb, postgres, elasticsearch, tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """A registry whose team-a has three daggers, each writing the known rows to one kind of sink."""
    tag = uuid.uuid4().hex[:8]
    db, table, index = f"out_{tag}", f"out_{tag}", f"out-{tag}-{{window:%Y.%m}}"
    registry = Registry(f"sqlite:///{tmp_path_factory.mktemp('out') / 'registry.db'}")
    seed(registry, influx=influxdb.url)
    alice = ControlPlane(registry, "alice")
    alice.create("a-jkt", bookings_spec("out-influx", db=db, measurement="bookings"))
    alice.create("a-jkt", with_sink("out-pg", f"  type: postgres\n  dsn: {postgres.dsn}\n  table: {table}\n"))
    alice.create(
        "a-jkt",
        with_sink("out-es", f'  type: elasticsearch\n  hosts: {elasticsearch.url}\n  index: "{index}"\n'),
    )
    alice.create("a-jkt", with_sink("out-log", "  type: log\n"))
    rows = known_rows()
    influxdb.create_database(db)
    sinks = [
        InfluxSink(InfluxSinkSpec(type="influx", url=influxdb.url, database=db, measurement="bookings")),
        PostgresSink(PostgresSinkSpec(type="postgres", dsn=postgres.dsn, table=table)),
        ElasticsearchSink(
            ElasticsearchSinkSpec(type="elasticsearch", hosts=[elasticsearch.url], index=index, refresh=True),
            "team-a/out-es",
        ),
    ]
    for sink in sinks:
        sink.open()
        assert sink.write(rows, 0) == rows.num_rows
        sink.close()
    yield {
        "registry": registry,
        "db": db,
        "table": table,
        "index": index,
        "influx": influxdb,
        "es": elasticsearch,
    }
    registry.close()


def run(world: dict[str, Any], *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(
        cli(),
        ["dagger", "output", *args, "--registry", world["registry"].url],
        env={"DAGGERS_USER": "alice", "COLUMNS": "200"},
    )
    assert result.exit_code == code, result.output
    return json.loads(result.output) if "--json" in args else result.output


TABLE = """\
┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━┳━━━━━┳━━━━━┓
┃ time (UTC)          ┃ now ┃ D-1 ┃ D-7 ┃
┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━╇━━━━━╇━━━━━┩
│ 2026-03-02 09:50:00 │  12 │  11 │   - │
│ 2026-03-02 09:59:30 │   7 │   - │   6 │
│ 2026-03-02 10:00:00 │   2 │   - │   - │
└─────────────────────┴─────┴─────┴─────┘
"""


@pytest.mark.parametrize(
    ("dagger", "source"),
    [
        ("out-influx", "measurement bookings in database {db} at {influx}"),
        ("out-pg", "table public.{table} at 127.0.0.1:"),
        ("out-es", "index out-{tag}-* at {es}"),
    ],
)
def test_the_sum_per_30s_now_and_the_day_and_week_before(
    world: dict[str, Any], dagger: str, source: str
) -> None:
    text = run(
        world,
        dagger,
        "--since",
        "15m",
        "--field",
        "bookings",
        "--compare",
        "D-1",
        "--compare",
        "D-7",
        "--until",
        "2026-03-02T10:00:00",
    )
    want_source = source.format(
        db=world["db"],
        influx=world["influx"].url,
        table=world["table"],
        tag=world["index"].split("-")[1],
        es=world["es"].url,
    )
    first, _, table = text.partition("\n")
    assert first.startswith(
        f"team-a/{dagger}: sum of bookings every 30s, 2026-03-02 09:45:00 to 2026-03-02 "
        f"10:00:00 UTC, from {want_source}"
    ), first
    assert table == TABLE

    data = run(
        world,
        dagger,
        "--since",
        "15m",
        "--field",
        "bookings",
        "--compare",
        "D-1,D-7",
        "--until",
        "2026-03-02T10:00:00",
        "--tag",
        "tag_city_id=1",
        "--json",
    )
    assert f"{data['source']} at {data['server']}".startswith(want_source)
    assert {k: data[k] for k in ("dagger", "field", "aggregate", "step_s", "start", "end", "tag")} == {
        "dagger": f"team-a/{dagger}",
        "field": "bookings",
        "aggregate": "sum",
        "step_s": 30,
        "start": "2026-03-02T09:45:00Z",
        "end": "2026-03-02T10:00:00Z",
        "tag": {"key": "tag_city_id", "value": "1"},
    }
    assert data["series"] == [
        {
            "label": "now",
            "offset_s": 0,
            "points": [["2026-03-02T09:50:00Z", 8.0], ["2026-03-02T09:59:30Z", 7.0]],
        },
        {"label": "D-1", "offset_s": 86400, "points": [["2026-03-02T09:50:00Z", 10.0]]},
        {"label": "D-7", "offset_s": 604800, "points": []},
    ]


def test_an_hour_in_two_minute_steps(world: dict[str, Any]) -> None:
    data = run(
        world,
        "out-influx",
        "--since",
        "1h",
        "--field",
        "bookings",
        "--until",
        "2026-03-02T10:00:30",
        "--json",
    )
    assert data["step_s"] == 120 and data["start"] == "2026-03-02T09:00:30Z"
    # 09:45:00 (100) is in this range; the 2-minute steps start on even minutes
    assert data["series"][0]["points"] == [
        ["2026-03-02T09:44:00Z", 100.0],
        ["2026-03-02T09:50:00Z", 12.0],
        ["2026-03-02T09:58:00Z", 7.0],
        ["2026-03-02T10:00:00Z", 1002.0],
    ]


def test_clear_errors(world: dict[str, Any]) -> None:
    bad = run(world, "out-influx", "--field", "fare", "--until", "2026-03-02T10:00:00", "--json", code=2)
    assert bad["error"] == {
        "title": "Cannot read the dagger's output",
        "message": "measurement bookings has no numeric field 'fare'",
        "hint": "choose one of: bookings",
    }
    bad = run(world, "out-pg", "--field", "fare", "--json", code=2)
    assert bad["error"]["message"] == f"table public.{world['table']} has no numeric column 'fare'"
    assert bad["error"]["hint"] == "choose one of: bookings"
    bad = run(world, "out-log", "--field", "bookings", "--json", code=2)
    assert bad["error"]["message"] == (
        "dagger out-log writes to log: its output can be read from an influx, "
        "postgres or elasticsearch sink only"
    )
    text = run(world, "out-influx", "--field", "bookings", "--since", "soon", code=2)
    assert "--since 'soon' is not a duration" in text and "hint: write e.g. 30s, 15m, 1h or 1d" in text
    text = run(world, "out-influx", "--field", "bookings", "--compare", "D-2", code=2)
    assert "--compare 'D-2' is not a comparison" in text
    text = run(world, "out-influx", "--field", "bookings", "--until", "2026-03-02T11:00:00")
    assert "No rows in this range." in text
    bad = run(world, "out-influx", "--field", "bookings", "--sink", "postgres", "--json", code=2)
    assert (bad["error"]["message"], bad["error"]["hint"]) == (
        "dagger out-influx has no sink 'postgres'",
        "its sinks: influx",
    )


def test_a_step_and_a_sink_named(world: dict[str, Any]) -> None:
    data = run(
        world,
        "out-pg",
        "--field",
        "bookings",
        "--since",
        "15m",
        "--step",
        "5m",
        "--sink",
        "postgres",
        "--until",
        "2026-03-02T10:00:00",
        "--compare",
        "d-1",
        "--json",
    )
    assert data["step_s"] == 300 and [s["label"] for s in data["series"]] == ["now", "D-1"]
    assert data["series"][0]["points"] == [
        ["2026-03-02T09:50:00Z", 12.0],
        ["2026-03-02T09:55:00Z", 7.0],
        ["2026-03-02T10:00:00Z", 2.0],
    ]
    assert data["series"][1]["points"] == [["2026-03-02T09:50:00Z", 11.0]]


def test_steps_and_durations() -> None:
    assert [default_step(parse_duration(s)) for s in ("15m", "1h", "1d", "900s", "5m")] == [
        30,
        120,
        3600,
        30,
        10,
    ]
    with pytest.raises(OutputError):
        parse_duration("0m")
    assert OutputQuery("f", until=datetime(2026, 3, 2, 10, 0, 0, 500_000)).end() == UNTIL  # naive = UTC


def test_influx_tag_filter_uses_the_tag_name_of_a_label_column() -> None:
    from job.output.influx import tag_key

    assert tag_key("label_city") == "city" and tag_key("tag_city_id") == "tag_city_id"


def test_the_output_through_the_server_is_the_embedded_one(world, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The console's Output tab through ``daggers server``: the same series, fields and errors as embedded."""
    from job.control.remote import RemoteControlPlane
    from tests.job.server.server_world import running_server

    registry: Registry = world["registry"]
    embedded = ControlPlane(registry, "alice")
    _, token = ControlPlane(registry, "root").create_token("alice")
    query = OutputQuery(
        field="bookings", since_s=900, until=UNTIL, tag=("tag_city_id", "1"), compare=("D-1", "D-7")
    )
    with running_server(str(registry.url), tmp_path / "server.log") as base:
        remote = RemoteControlPlane(base, token)
        assert (
            remote.output("team-a/out-influx", query).to_dict()
            == embedded.output("team-a/out-influx", query).to_dict()
        )
        assert (
            remote.output_fields("team-a/out-influx")
            == embedded.output_fields("team-a/out-influx")
            == ["bookings"]
        )
        with pytest.raises(Exception, match="bookingz") as info:
            remote.output("team-a/out-influx", OutputQuery(field="bookingz", until=UNTIL))
        assert "Traceback" not in str(info.value)
