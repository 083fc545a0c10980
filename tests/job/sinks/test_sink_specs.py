"""Sink settings in the spec, several sinks per dagger, the sink contract, and the PostgreSQL helpers."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from job.common.optional import MissingDependencyError
from job.errors import SinkError, SpecError
from job.sinks.base import Sink, backoff_s, default_key_columns, start_sinks
from job.sinks.kafka import KafkaSink
from job.sinks.postgres import PostgresSink, dedupe_last, pg_type
from job.sinks.registry import build_sinks
from job.spec import KafkaSinkSpec, LogSinkSpec, PostgresSinkSpec, parse_spec

HEAD = """name: bookings-per-s2
streams:
  - table: data_stream
    topics: [booking-log]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9092
    group: g1
sql: SELECT 1
"""

SINKS = (
    HEAD
    + """sinks:
  - type: influx
    database: daggers
    measurement: m
  - type: kafka
    bootstrap_servers: ${KAFKA:-127.0.0.1:9092}
    topic: booking-aggregates
    proto_class: daggers.aggregates.BookingAggregate
    key_columns: [tag_s2id]
    producer_config:
      sasl.password: ${SASL_PASSWORD:-hunter2}
  - type: postgres
    dsn: postgresql://daggers:pg-s3cret@127.0.0.1:5432/daggers
    table: analytics.bookings_per_s2
    batch_size: 500
  - type: kafka
    bootstrap_servers: 127.0.0.1:9092
    topic: booking-aggregates-json
    format: json
  - type: log
"""
)


def test_several_sinks_each_with_its_own_settings_and_a_distinct_name() -> None:
    spec = parse_spec(SINKS, "s.yaml")
    kinds = [type(s).__name__ for s in spec.sinks]
    assert kinds == ["InfluxSinkSpec", "KafkaSinkSpec", "PostgresSinkSpec", "KafkaSinkSpec", "LogSinkSpec"]
    kafka, pg = spec.sinks[1], spec.sinks[2]
    assert isinstance(kafka, KafkaSinkSpec) and kafka.format == "protobuf" and kafka.max_retries == 5
    assert kafka.producer_config["sasl.password"].get_secret_value() == "hunter2"
    assert isinstance(pg, PostgresSinkSpec) and pg.batch_size == 500 and pg.key_columns is None
    for secret in ("hunter2", "pg-s3cret"):
        assert secret not in repr(spec) and secret not in spec.model_dump_json()
    sinks = build_sinks(spec.sinks)
    assert [s.name for s in sinks] == ["influx", "kafka", "postgres", "kafka-2", "log"]
    assert (
        "pg-s3cret" not in repr(sinks[2])
        and repr(sinks[2]) == "PostgresSink(127.0.0.1:5432/daggers, table=analytics.bookings_per_s2)"
    )
    assert isinstance(sinks[1], KafkaSink) and isinstance(sinks[2], PostgresSink)


def test_bad_sink_settings_are_named_with_their_line() -> None:
    bad = (
        HEAD
        + """sinks:
  - type: kafka
    bootstrap_servers: localhost
    topic: t
  - type: postgres
    dsn: postgresql://x@h/db
    table: a.b.c
    key_columns: []
  - type: kafka
    bootstrap_servers: h:1
    topic: t
    format: json
    key_columns: [tag s2]
"""
    )
    with pytest.raises(SpecError) as info:
        parse_spec(bad, "b.yaml")
    assert str(info.value).splitlines() == [
        "b.yaml:12: sinks[0].bootstrap_servers: 'localhost' is not host:port",
        "b.yaml:16: sinks[1].table: 'a.b.c' is not a table name (name or schema.name; letters, digits, _)",
        "b.yaml:17: sinks[1].key_columns: an upsert needs at least one key column (leave key_columns out for the "
        "default)",
        "b.yaml:22: sinks[2].key_columns: 'tag s2' is not a column name (letters, digits, _)",
    ]
    with pytest.raises(SpecError, match=r"b.yaml:11: sinks\[0\]: format protobuf needs proto_class"):
        parse_spec(HEAD + "sink:\n  type: kafka\n  bootstrap_servers: h:1\n  topic: t\n", "b.yaml")


def test_default_key_and_dedupe() -> None:
    names = ["tag_city_id", "n", "window_timestamp", "label_city"]
    assert default_key_columns(names) == ["window_timestamp", "tag_city_id", "label_city"]
    assert default_key_columns(["n"]) == []
    table = pa.table({"k": ["a", None, "a", None, "b"], "v": [1, 2, 3, 4, 5]})
    assert dedupe_last(table, ["k"]).to_pylist() == [
        {"k": "a", "v": 3},
        {"k": None, "v": 4},
        {"k": "b", "v": 5},
    ]


def test_postgres_types() -> None:
    assert [
        pg_type(t)
        for t in (
            pa.int32(),
            pa.int64(),
            pa.uint32(),
            pa.float64(),
            pa.string(),
            pa.bool_(),
            pa.timestamp("us", tz="UTC"),
            pa.timestamp("us"),
            pa.decimal128(20, 2),
        )
    ] == [
        "integer",
        "bigint",
        "bigint",
        "double precision",
        "text",
        "boolean",
        "timestamptz",
        "timestamp",
        "numeric(20, 2)",
    ]
    assert pg_type(pa.list_(pa.int32())) is None


class _Recorder(Sink):
    name = "rec"

    def __init__(self, fail_open: bool = False, raises: BaseException | None = None) -> None:
        super().__init__()
        self.fail_open, self.raises, self.events = fail_open, raises, []

    def open(self) -> None:
        self.events.append("open")
        if self.raises is not None:
            raise self.raises
        if self.fail_open:
            raise SinkError("cannot reach it", hint="is it up?")

    def bind(self, schema: pa.Schema) -> None:
        self.events.append(f"bind {schema.names}")
        super().bind(schema)

    def _write(self, table: pa.Table, batch_id: int) -> int:
        return table.num_rows

    def close(self) -> None:
        self.events.append("close")


def test_start_sinks_binds_at_start_and_closes_the_opened_ones_when_one_fails() -> None:
    schema = pa.schema([("n", pa.int64())])
    a, b = _Recorder(), _Recorder(fail_open=True)
    b.name = "kafka"
    with pytest.raises(SinkError) as info:
        start_sinks([a, b], schema)
    assert (info.value.message, info.value.hint) == ("sink 'kafka': cannot reach it", "is it up?")
    assert isinstance(info.value.__cause__, SinkError) and info.value.__cause__.message == "cannot reach it"
    assert a.events == ["open", "bind ['n']", "close"] and b.events == ["open"]
    c = _Recorder()
    start_sinks([c], schema)
    c.write(pa.table({"n": [1, 2]}), 0)
    c.write(pa.table({"m": [1]}), 1)  # a new schema is bound before it is written
    assert c.events == ["open", "bind ['n']", "bind ['m']"]
    assert c.metrics.rows_written == 3 and c.metrics.writes == 2 and c.metrics.to_dict()["sink_type"] == "rec"


@pytest.mark.parametrize(
    "raised",
    [RuntimeError("a bug in open"), KeyboardInterrupt(), MissingDependencyError("psycopg", "postgres")],
)
def test_start_sinks_closes_the_opened_ones_whatever_the_error(raised: BaseException) -> None:
    a, b, c = _Recorder(), _Recorder(raises=raised), _Recorder()
    with pytest.raises(type(raised)) as info:
        start_sinks([a, b, c])
    assert info.value is raised  # not renamed: only a SinkError is the sink's own
    assert (a.events, b.events, c.events) == (["open", "close"], ["open"], [])


def test_log_sink_keeps_working() -> None:
    from rich.console import Console

    from job.sinks.log import LogSink

    console = Console(record=True, width=120)
    sink = LogSink(LogSinkSpec(type="log", max_rows=1), console=console)
    sink.open()
    assert sink.write(pa.table({"tag_s2id": ["-1", "2"], "n": [3, 4]}), 5) == 2
    text = console.export_text()
    assert "batch 5: 2 rows" in text and "-1" in text and "... 1 more row" in text


def test_the_back_off_doubles_from_half_a_second_up_to_the_cap_with_jitter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("job.sinks.base.random.random", lambda: 0.5)  # the jitter's middle: x1
    assert [backoff_s(n, 30.0) for n in range(1, 10)] == [0.5, 1, 2, 4, 8, 16, 30, 30, 30]
    assert [backoff_s(n, 2.0) for n in range(1, 5)] == [0.5, 1, 2, 2]
    monkeypatch.setattr("job.sinks.base.random.random", lambda: 0.0)
    assert backoff_s(9, 2.0) == 1.0
    assert [backoff_s(n, 30.0) for n in range(1, 10)] == [0.25, 0.5, 1, 2, 4, 8, 15, 15, 15]
    monkeypatch.setattr("job.sinks.base.random.random", lambda: 0.999)
    assert backoff_s(9, 2.0) == 2.0  # the jitter's top (x1.499) would be 2.998: the cap wins
    assert backoff_s(3, 30.0) == pytest.approx(2.998)  # below the cap the jitter is whole


def test_max_backoff_s_is_the_longest_wait_whatever_the_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    # the wild: waits of 44.8 s with max_backoff_s 30 (the cap was taken before the jitter)
    monkeypatch.setattr("job.sinks.base.random.random", lambda: 0.999999)
    assert [backoff_s(n, 30.0) for n in range(1, 21)] == [
        pytest.approx(w) for w in [0.749999, 1.499999, 2.999998, 5.999996, 11.999992, 23.999984] + [30.0] * 14
    ]
    rng = random.Random(51)
    monkeypatch.setattr("job.sinks.base.random.random", rng.random)
    for cap in (0.3, 2.0, 30.0, 45.5):
        waits = {n: [backoff_s(n, cap) for _ in range(50)] for n in range(1, 21)}
        assert max(max(w) for w in waits.values()) == cap  # reached, never passed
        assert all(min(w) >= min(cap, 0.5 * 2 ** (n - 1)) / 2 for n, w in waits.items())  # jittered down only
    assert backoff_s(5000, 30.0) <= 30.0  # no float overflow for a retry count past any real one


def test_max_backoff_s_is_a_setting_of_every_sink_that_retries() -> None:
    spec = parse_spec(
        SINKS.replace("    measurement: m\n", "    measurement: m\n    max_backoff_s: 2\n", 1), "s.yaml"
    )
    assert [getattr(s, "max_backoff_s", None) for s in spec.sinks] == [2.0, 30.0, 30.0, 30.0, None]
    with pytest.raises(SpecError) as info:
        parse_spec(
            SINKS.replace(
                "    table: analytics.bookings_per_s2\n",
                "    table: analytics.bookings_per_s2\n    max_backoff_s: 0\n",
            ),
            "s.yaml",
        )
    assert str(info.value) == "s.yaml:24: sinks[2].max_backoff_s: 0 is not a number over 0 and up to 3600"
