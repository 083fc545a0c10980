"""The spec model: valid specs load; each bad value is named with its field and line."""

from __future__ import annotations

import pytest

from job.errors import SpecError
from job.spec import DaggerSpec, InfluxSinkSpec, interpolate_env, load_spec, parse_spec

GOOD = """name: bookings-per-s2
streams:
  - table: data_stream
    topics: [booking-log]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9092
    group: g1
sql: SELECT 1
sink:
  type: influx
  database: daggers
  measurement: m
  password: ${INFLUX_PASSWORD:-s3cret}
"""


def test_good_spec_loads_with_defaults() -> None:
    spec = parse_spec(GOOD, "good.yaml")
    assert isinstance(spec, DaggerSpec)
    assert spec.streams[0].start_from == "earliest"
    assert spec.watermark_delay_ms == 10_000
    sink = spec.sinks[0]
    assert isinstance(sink, InfluxSinkSpec) and sink.api == "v1" and sink.batch_size == 5000
    assert sink.password is not None and sink.password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(spec) and "s3cret" not in spec.model_dump_json()


def test_every_bad_field_is_named_with_its_line() -> None:
    bad = (
        GOOD.replace("name: bookings-per-s2", "name: Bad_Name")
        .replace("topics: [booking-log]", "topics: []")
        .replace("127.0.0.1:9092", "localhost")
        .replace("group: g1", "group: g1\n    start_from: yesterday")
    )
    with pytest.raises(SpecError) as info:
        parse_spec(bad, "bad.yaml")
    assert str(info.value).splitlines() == [
        "bad.yaml:1: name: 'Bad_Name' must be 2-63 lower-case letters, digits or dashes, starting with a letter",
        "bad.yaml:4: streams[0].topics: List should have at least 1 item after validation, not 0",
        "bad.yaml:7: streams[0].bootstrap_servers: 'localhost' is not host:port",
        "bad.yaml:9: streams[0].start_from: start_from 'yesterday' is not earliest, latest, an ISO 8601 time or "
        "epoch ms",
    ]


def test_sink_errors_and_unknown_keys() -> None:
    bad = GOOD.replace("  database: daggers\n", "").replace(
        "  measurement: m", "  measurement: m\n  colour: red"
    )
    with pytest.raises(SpecError) as info:
        parse_spec(bad, "s.yaml")
    text = str(info.value)
    assert "s.yaml:13: sinks[0].colour: unknown field" in text


def test_v1_needs_database() -> None:
    with pytest.raises(SpecError, match="api v1 needs database"):
        parse_spec(GOOD.replace("  database: daggers\n", ""), "s.yaml")


def test_not_yaml_names_line_and_column() -> None:
    with pytest.raises(SpecError, match=r"^x.yaml:2:6: not valid YAML"):
        parse_spec("name: x\n  bad: [", "x.yaml")


def test_start_from_time_needs_zone() -> None:
    with pytest.raises(SpecError, match="has no time zone"):
        parse_spec(GOOD.replace("group: g1", "group: g1\n    start_from: 2026-01-01T00:00:00"), "t.yaml")
    spec = parse_spec(GOOD.replace("group: g1", "group: g1\n    start_from: 2026-01-01T00:00:00Z"), "t.yaml")
    assert spec.streams[0].start_from == "2026-01-01T00:00:00+00:00"


def test_env_interpolation() -> None:
    assert interpolate_env("a: ${X}\nb: ${Y:-d}\n", {"X": "1"}) == "a: 1\nb: d\n"
    with pytest.raises(SpecError, match=r"^f.yaml:2: environment variable NOPE is not set"):
        interpolate_env("a: 1\nb: ${NOPE}\n", {}, "f.yaml")


def test_a_set_but_empty_variable_gives_the_default_as_in_the_shell() -> None:
    assert interpolate_env("a: ${X:-d}\nb: ${X}|\nc: ${Y:-e}\n", {"X": ""}) == "a: d\nb: |\nc: e\n"
    assert interpolate_env("a: ${X:-d}\n", {"X": "v"}) == "a: v\n"
    spec = parse_spec(
        GOOD.replace("127.0.0.1:9092", "${BROKER:-127.0.0.1:9093}"), "t.yaml", env={"BROKER": ""}
    )
    assert spec.streams[0].bootstrap_servers == "127.0.0.1:9093"


def test_an_error_about_a_substituted_value_names_its_variable() -> None:
    text = GOOD.replace("  measurement: m", "  measurement: m\n  batch_size: ${BATCH}")
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "t.yaml", env={"BATCH": "lots"})
    assert caught.value.message == (
        "t.yaml:14: sinks[0].batch_size: lots is not a whole number from 1 to 1000000 (the value comes from ${BATCH})"
    )
    with pytest.raises(
        SpecError,
        match=r"^t.yaml:7: streams\[0\].bootstrap_servers: .*\(the value comes from \$\{BROKER\}\)$",
    ):
        parse_spec(GOOD.replace("127.0.0.1:9092", "${BROKER}"), "t.yaml", env={"BROKER": "localhost"})
    with pytest.raises(SpecError) as unset:
        parse_spec(GOOD.replace("127.0.0.1:9092", "${BROKER}"), "t.yaml", env={})
    assert unset.value.message == "t.yaml:7: environment variable BROKER is not set (and has no :-default)"
    assert unset.value.hint is not None and "BROKER" in unset.value.hint


def test_a_runtime_error_about_a_substituted_value_names_its_variable() -> None:
    text = GOOD.replace("127.0.0.1:9092", "${BROKER}").replace(
        "password: ${INFLUX_PASSWORD:-s3cret}", "password: ${PW}"
    )
    spec = parse_spec(text, "t.yaml", env={"BROKER": "10.1.2.3:9092", "PW": "hunter2"})
    assert (
        spec.name_variables("cannot reach the Kafka broker at 10.1.2.3:9092")
        == "cannot reach the Kafka broker at 10.1.2.3:9092 (from ${BROKER})"
    )
    assert spec.model_copy().name_variables("at 10.1.2.3:9092") == "at 10.1.2.3:9092 (from ${BROKER})"
    assert spec.name_variables("something else") == "something else"


@pytest.mark.parametrize(
    ("before", "typo", "message"),
    [
        (
            "  password:",
            "  measurment: m2",
            "t.yaml:14: sinks[0].measurment: unknown field; did you mean measurement?",
        ),
        (
            "sql: SELECT 1",
            "watermark_delay: 5",
            "t.yaml:9: watermark_delay: unknown field; did you mean watermark_delay_ms?",
        ),
        ("    group: g1", "    grup: g", "t.yaml:8: streams[0].grup: unknown field; did you mean group?"),
    ],
)
def test_an_unknown_field_gets_did_you_mean(before: str, typo: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(GOOD.replace(before, typo + "\n" + before), "t.yaml")
    assert caught.value.message == message


def test_an_unknown_field_far_from_any_gets_no_guess() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(GOOD + "zzzqqq: 1\n", "t.yaml")
    assert caught.value.message == "t.yaml:15: zzzqqq: unknown field"


def test_missing_file() -> None:
    with pytest.raises(SpecError, match="no spec file at /nonexistent.yaml"):
        load_spec("/nonexistent.yaml")


def test_examples_are_valid() -> None:
    for name in ("examples/bookings-per-s2.yaml", "examples/drivers-per-s2.yaml"):
        assert load_spec(name).name in name


def test_spark_conf_takes_spark_settings_only() -> None:
    spec = parse_spec(
        GOOD + "spark_conf:\n  spark.sql.shuffle.partitions: 4\n  spark.sql.ansi.enabled: false\n", "c.yaml"
    )
    assert spec.spark_conf == {"spark.sql.shuffle.partitions": "4", "spark.sql.ansi.enabled": "false"}
    with pytest.raises(SpecError) as info:
        parse_spec(GOOD + "spark_conf:\n  shuffle.partitions: 4\n", "c.yaml")
    assert str(info.value) == "c.yaml:16: spark_conf: 'shuffle.partitions' is not a Spark setting (spark.…)"
    with pytest.raises(SpecError) as info:
        parse_spec(GOOD + "spark_conf:\n  spark.master: local[8]\n", "c.yaml")
    assert "spark.master is the cluster's, not the dagger's" in str(info.value)


def test_isolation_defaults_to_shared_and_names_a_bad_value_with_its_line() -> None:
    assert parse_spec(GOOD, "a.yaml").isolation == "shared"
    assert parse_spec(GOOD + "isolation: dedicated\n", "a.yaml").isolation == "dedicated"
    with pytest.raises(SpecError) as err:
        parse_spec(GOOD + "isolation: private\n", "b.yaml")
    line = len(GOOD.splitlines()) + 1
    assert f"b.yaml:{line}: isolation: Input should be 'shared', 'fused' or 'dedicated'" in err.value.message
