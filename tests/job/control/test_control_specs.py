"""Unit tests: checkpoint compatibility of spec versions, the console's form, run files, crash messages."""

from __future__ import annotations

from pathlib import Path

from job.control.compat import compatibility, state_signature
from job.control.controller import backoff_delay
from job.control.processes import last_error
from job.control.specs import DaggerForm, raw_spec, with_kafka_sink
from job.control.udf_carry import run_text
from job.spec import parse_spec
from tests.job.control.control_seed import bookings_spec

ENV = {"DAGGERS_BOOTSTRAP": "127.0.0.1:9092", "DAGGERS_INFLUX": "http://127.0.0.1:8086"}


def spec(text: str):  # type: ignore[no-untyped-def]
    return parse_spec(text, "t", ENV)


BASE = bookings_spec("cc")


def test_filters_and_sinks_resume_but_a_new_aggregation_does_not() -> None:
    where = compatibility(spec(BASE), spec(BASE.replace("'COMPLETED'", "'CANCELLED'")))
    assert where.resume and where.notes == [
        "the query changed outside its aggregation (filters, projections): open windows keep what they "
        "counted under the old query"
    ]
    key = compatibility(spec(BASE), spec(BASE.replace("), city_id", "), city_id, vehicle_type")))
    assert not key.resume and key.reasons[0].startswith("the aggregation changed")
    agg = compatibility(spec(BASE), spec(BASE.replace("count(1)", "sum(fare_idr)")))
    assert not agg.resume
    window = compatibility(spec(BASE), spec(BASE.replace("'60' SECOND", "'120' SECOND")))
    assert not window.resume
    # keyword case and layout are not changes of state
    same = compatibility(
        spec(BASE), spec(BASE.replace("count(1)", "COUNT(1)").replace("GROUP BY", "GROUP  BY"))
    )
    assert same.resume


def test_sources_that_change_the_checkpoint() -> None:
    proto = compatibility(
        spec(BASE), spec(BASE.replace("daggers.events.BookingLog", "daggers.events.DriverLocationPing"))
    )
    assert not proto.resume and proto.reasons == [
        "streams[0].proto_class changed (daggers.events.BookingLog -> daggers.events.DriverLocationPing): the "
        "source's schema is part of the checkpoint"
    ]
    other = BASE.replace("${DAGGERS_BOOTSTRAP}", "10.0.0.1:9092")
    moved = compatibility(spec(BASE), spec(other))
    assert not moved.resume and "another Kafka cluster" in moved.reasons[0]
    topics = compatibility(spec(BASE), spec(BASE.replace("[booking-log]", "[booking-log, booking-log-2]")))
    assert topics.resume and topics.notes == [
        "streams[0] adds topic(s) booking-log-2, read from their first record"
    ]
    para = compatibility(
        spec(BASE),
        spec(BASE.replace("watermark_delay_ms: 10000", "watermark_delay_ms: 10000\nparallelism: 4")),
    )
    assert para.resume and para.notes == ["parallelism stays 2: the checkpoint fixes the shuffle partitions"]


def test_state_signature_shape() -> None:
    sig = state_signature(
        "SELECT city_id, count(1) AS n FROM s GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id"
    )
    assert sig == [("aggregate", "TUMBLE(rowtime, INTERVAL '1' MINUTE)", "city_id", "|", "COUNT(1)")]
    assert state_signature("SELECT a FROM s WHERE b > 1") == []


def test_form_round_trip_keeps_what_it_does_not_show() -> None:
    form = DaggerForm(
        name="fresh",
        proto_class="daggers.events.BookingLog",
        topics=["booking-log"],
        timestamp_field="event_timestamp",
        bootstrap_servers="127.0.0.1:9092",
        sql="SELECT city_id AS tag_city_id, count(1) AS n,\n"
        "  TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp\n"
        "FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id",
        influx_url="http://127.0.0.1:8086",
        measurement="m1",
        watermark_delay_ms=5000,
    )
    text = form.to_text()
    parsed = spec(text)
    assert (parsed.name, parsed.streams[0].group, parsed.watermark_delay_ms, parsed.sinks[0].measurement) == (
        "fresh",
        "dagger-fresh",
        5000,
        "m1",
    )
    assert "sql: |\n" in text  # the SQL stays readable in the registry and in diffs
    assert DaggerForm.from_text(text) == DaggerForm(
        **{**form.__dict__, "group": "dagger-fresh", "sql": form.sql + "\n"}
    )
    base = with_kafka_sink(
        BASE.replace(
            "    start_from: earliest\n", "    start_from: earliest\n    consumer_config: {client.rack: r1}\n"
        ),
        "out",
        "127.0.0.1:9092",
    )
    edited = DaggerForm.from_text(base)
    edited.measurement = "renamed"
    data = raw_spec(edited.to_text(base))
    assert data["streams"][0]["consumer_config"] == {"client.rack": "r1"}
    assert [s["type"] for s in data["sinks"]] == ["influx", "kafka"]
    assert data["sinks"][0]["measurement"] == "renamed" and data["sinks"][0]["url"] == "${DAGGERS_INFLUX}"


def test_form_isolation_and_light_are_written_only_when_set_or_already_there() -> None:
    plain = DaggerForm.from_text(BASE)
    assert (plain.isolation, plain.light) == ("shared", False)
    assert "isolation" not in raw_spec(plain.to_text(BASE)) and "light" not in raw_spec(plain.to_text(BASE))
    plain.isolation, plain.light = "dedicated", True
    text = plain.to_text(BASE)
    assert (raw_spec(text)["isolation"], raw_spec(text)["light"]) == ("dedicated", True)
    assert (spec(text).isolation, spec(text).light) == ("dedicated", True)
    back = DaggerForm.from_text(text)
    assert (back.isolation, back.light) == ("dedicated", True)
    back.isolation, back.light = "shared", False  # switched off again: written, so the edit shows in the diff
    assert {k: raw_spec(back.to_text(text))[k] for k in ("isolation", "light")} == {
        "isolation": "shared",
        "light": False,
    }


def test_run_text_sets_the_checkpoint_and_keeps_variables(tmp_path: Path) -> None:
    text = run_text(BASE, tmp_path / "ck")
    assert raw_spec(text)["checkpoint_dir"] == str(tmp_path / "ck")
    assert "${DAGGERS_BOOTSTRAP}" in text and "${DAGGERS_INFLUX}" in text
    assert spec(text).resolved_checkpoint(Path("/x")) == tmp_path / "ck"


def test_crash_messages_and_backoff() -> None:
    log = (
        "=== start\n26/03/02 WARN NativeCodeLoader: blah\n"
        "Sink error: cannot reach InfluxDB at http://127.0.0.1:9/write: connection refused\n"
        "hint: is influxd running?\n"
    )
    assert last_error(log) == (
        "Sink error: cannot reach InfluxDB at http://127.0.0.1:9/write: connection refused\n"
        "hint: is influxd running?"
    )
    assert last_error("Traceback (most recent call last):\n  x\nValueError: boom\n") == "ValueError: boom"
    assert last_error("just noise\n") is None
    assert [backoff_delay(n, 2.0, 30.0) for n in (1, 2, 3, 4, 5, 6)] == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
