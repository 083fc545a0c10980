"""Property-based tests: any input to the spec, the SQL front end or the protobuf decoder gives a
result or a clear Daggers error, never a traceback."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from job.errors import DaggerError, SpecError, SqlError
from job.schema import default_registry
from job.schema.arrow import ArrowDecoder
from job.spec import DaggerSpec, parse_spec
from job.sql import translate

TABLES = {
    "data_stream": {
        "order_number",
        "driver_id",
        "city_id",
        "vehicle_type",
        "status",
        "pickup_lat",
        "pickup_long",
        "event_timestamp",
    }
}
VOCAB = [
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "AND",
    "OR",
    "AS",
    "(",
    ")",
    ",",
    "*",
    "=",
    "<",
    "'x'",
    "1",
    "13",
    "data_stream",
    "`data_stream`",
    "city_id",
    "status",
    "pickup_lat",
    "pickup_long",
    "rowtime",
    "driver_id",
    "count(1)",
    "S2Id",
    "DistinctCount",
    "TUMBLE",
    "TUMBLE_END",
    "HOP",
    "HOP_START",
    "INTERVAL",
    "'60'",
    "SECOND",
    "MINUTE",
    "JOIN",
    "ON",
    "LATERAL",
    "TABLE",
    "UNION",
    "ALL",
    "NULL",
    "CASE",
    "WHEN",
    "THEN",
    "END",
    "sum",
    "window",
    ";",
    "--",
    "/*",
    "*/",
    "\n",
    "`",
    "'",
]

settings.register_profile("daggers", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("daggers")


@given(st.text(max_size=300))
def test_any_text_as_sql(sql: str) -> None:
    try:
        t = translate(sql, TABLES)
    except SqlError as exc:
        assert exc.message
    else:
        assert isinstance(t.spark_sql, str)


@given(st.lists(st.sampled_from(VOCAB), max_size=40))
def test_token_soup_as_sql(tokens: list[str]) -> None:
    sql = " ".join(tokens)
    try:
        translate(sql, TABLES)
    except SqlError as exc:
        assert exc.message
        if exc.line is not None:
            assert exc.line >= 1 and (exc.col or 1) >= 1


@given(st.text(max_size=500))
def test_any_text_as_spec(text: str) -> None:
    try:
        parse_spec(text, "fuzz.yaml", env={})
    except SpecError as exc:
        assert exc.message.startswith("fuzz.yaml")


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = [
    "name",
    "streams",
    "sql",
    "sink",
    "sinks",
    "watermark_delay_ms",
    "parallelism",
    "checkpoint_dir",
    "trigger_interval_s",
    "table",
    "topics",
    "proto_class",
    "timestamp_field",
    "bootstrap_servers",
    "group",
    "start_from",
    "type",
    "url",
    "api",
    "database",
    "measurement",
    "batch_size",
    "bad_records",
]


@given(
    st.dictionaries(st.sampled_from(KEYS), values, max_size=10),
    st.lists(st.dictionaries(st.sampled_from(KEYS), values, max_size=8), max_size=3),
)
def test_structured_specs(top: dict, streams: list) -> None:  # type: ignore[type-arg]
    doc = dict(top)
    doc.setdefault("streams", streams)
    try:
        text = yaml.safe_dump(doc)
    except yaml.YAMLError:
        return
    try:
        spec = parse_spec(text, "s.yaml", env={})
    except SpecError as exc:
        assert "s.yaml" in exc.message
    else:
        assert isinstance(spec, DaggerSpec)


DECODER = ArrowDecoder(
    default_registry(),
    "daggers.events.BookingLog",
    ["order_number", "city_id", "status", "pickup_lat", "event_timestamp", "fare_idr"],
)
GOOD = (
    default_registry()
    .message_class("daggers.events.BookingLog")(
        order_number="o-1", city_id=3, status=4, pickup_lat=-6.2, fare_idr=15000
    )
    .SerializeToString()
)


@settings(max_examples=2000)
@given(st.lists(st.one_of(st.binary(max_size=64), st.none()), max_size=20))
def test_fuzz_decode_random_bytes(payloads: list[bytes | None]) -> None:
    batch, failures = DECODER.decode(payloads)
    assert batch.num_rows + len(failures) == len(payloads)
    assert all(0 <= f.index < len(payloads) for f in failures)


@settings(max_examples=2000)
@given(st.integers(0, len(GOOD) * 8 - 1), st.integers(0, len(GOOD)), st.binary(max_size=8))
def test_fuzz_decode_mutated_records(bit: int, cut: int, tail: bytes) -> None:
    flipped = bytearray(GOOD)
    flipped[bit // 8] ^= 1 << (bit % 8)
    payloads = [GOOD, bytes(flipped), GOOD[:cut] + tail, GOOD]
    batch, failures = DECODER.decode(payloads)
    assert batch.num_rows + len(failures) == 4
    assert 0 not in {f.index for f in failures} and 3 not in {f.index for f in failures}  # good ones kept
    rows = batch.to_pylist()
    assert rows[0]["order_number"] == "o-1" and rows[-1]["fare_idr"] == 15000


def test_errors_are_dagger_errors() -> None:
    assert issubclass(SqlError, DaggerError) and issubclass(SpecError, DaggerError)
