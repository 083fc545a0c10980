"""Transformers: the spec's fields (errors name the field and line) and each step on real Spark frames."""

from __future__ import annotations

import hashlib
from datetime import datetime

import pytest

from job.errors import SpecError
from job.spec import (
    DeduplicateTransformer,
    HashTransformer,
    InvalidRecordFilter,
    parse_spec,
    transformer_columns,
)
from job.transform import apply, apply_output_transformers, apply_stream_transformers

SPEC = """name: tr
streams:
  - table: data_stream
    topics: [booking-log]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9092
    group: g
    transformers:
{stream}
sql: SELECT order_number FROM data_stream
transformers:
{output}
sink:
  type: log
"""


def spec(stream: str, output: str = "  - {type: hash, columns: [order_number]}"):  # type: ignore[no-untyped-def]
    return parse_spec(SPEC.format(stream=stream, output=output), "t.yaml")


def test_transformers_parse_in_order() -> None:
    s = spec("""      - {type: invalid_record_filter, required: [order_number], ranges: {pickup_lat: [-90, 90]}}
      - {type: deduplicate, keys: [order_number, status], ttl_s: 3600}
      - {type: hash, columns: [customer_id]}""")
    kinds = [type(t) for t in s.streams[0].transformers]
    assert kinds == [InvalidRecordFilter, DeduplicateTransformer, HashTransformer]
    assert s.streams[0].transformer_columns() == {"order_number", "pickup_lat", "status", "customer_id"}
    assert transformer_columns(s.transformers) == {"order_number"}
    assert s.streams[0].transformers[0].ranges == {"pickup_lat": (-90.0, 90.0)}


@pytest.mark.parametrize(
    ("stream", "needle"),
    [
        (
            "      - {type: deduplicate, keys: [], ttl_s: 10}",
            "t.yaml:10: streams[0].transformers[0].keys: List should have at least 1 item",
        ),
        (
            "      - {type: deduplicate, keys: [a], ttl_s: 0}",
            "t.yaml:10: streams[0].transformers[0].ttl_s: 0 is not a whole number from 1 to 2592000",
        ),
        (
            "      - {type: invalid_record_filter}",
            "streams[0].transformers[0].where: give at least one of required, ranges or where",
        ),
        (
            "      - {type: invalid_record_filter, where: 'a >'}",
            "streams[0].transformers[0].where: cannot read the condition 'a >'",
        ),
        (
            "      - {type: invalid_record_filter, ranges: {lat: [5, 1]}}",
            "streams[0].transformers[0].ranges: Value error, lat: the minimum 5.0 is above the maximum 1.0",
        ),
        (
            "      - {type: hash, columns: [a, a]}",
            "streams[0].transformers[0].columns: a column is named twice",
        ),
        (
            "      - {type: hash, columns: ['x y']}",
            "streams[0].transformers[0].columns: 'x y' is not a column name",
        ),
        (
            "      - {type: shuffle}",
            "streams[0].transformers[0]: Input tag 'shuffle' found using 'type' does not match",
        ),
    ],
)
def test_bad_transformers_name_field_and_line(stream: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        spec(stream)
    assert needle.replace("Value error, ", "") in str(info.value)


def test_udf_file_is_relative_to_the_spec(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from job.spec import load_spec

    folder = tmp_path / "daggers"
    folder.mkdir()
    text = SPEC.format(stream="      - {type: hash, columns: [a]}", output="  []").replace(
        "sink:", "udf_file: functions.py\nsink:"
    )
    (folder / "d.yaml").write_text(text)
    assert load_spec(folder / "d.yaml").udf_file == str(folder / "functions.py")


@pytest.fixture(scope="module")
def frame(spark):  # type: ignore[no-untyped-def]
    rows = [
        ("a", "x", 1.0, 10, datetime(2026, 3, 2, 8, 0)),
        ("b", "", 2.0, 20, datetime(2026, 3, 2, 8, 1)),
        ("c", None, float("nan"), 30, datetime(2026, 3, 2, 8, 2)),
        ("d", "y", 95.0, None, datetime(2026, 3, 2, 8, 3)),
        ("e", "z", -3.0, 50, datetime(2026, 3, 2, 8, 4)),
    ]
    return spark.createDataFrame(rows, "id string, s string, lat double, n int, rowtime timestamp")


def _ids(df) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(r["id"] for r in df.collect())


@pytest.mark.integration
@pytest.mark.parametrize(
    ("t", "kept"),
    [
        (InvalidRecordFilter(type="invalid_record_filter", required=["s"]), ["a", "d", "e"]),
        (InvalidRecordFilter(type="invalid_record_filter", required=["lat"]), ["a", "b", "d", "e"]),
        (InvalidRecordFilter(type="invalid_record_filter", required=["n"]), ["a", "b", "c", "e"]),
        (InvalidRecordFilter(type="invalid_record_filter", ranges={"lat": (-90, 90)}), ["a", "b", "e"]),
        (InvalidRecordFilter(type="invalid_record_filter", ranges={"n": (None, 20)}), ["a", "b"]),
        (InvalidRecordFilter(type="invalid_record_filter", where="n % 20 = 10"), ["a", "c", "e"]),
        (
            InvalidRecordFilter(
                type="invalid_record_filter", required=["s"], ranges={"lat": (0, None)}, where="n > 5"
            ),
            ["a"],
        ),
    ],
)
def test_invalid_record_filter(frame, t: InvalidRecordFilter, kept: list[str]) -> None:  # type: ignore[no-untyped-def]
    assert _ids(apply(frame, [t], "streams[s].transformers")) == kept


@pytest.mark.integration
def test_hash_replaces_columns_by_sha256(frame) -> None:  # type: ignore[no-untyped-def]
    out = apply(frame, [HashTransformer(type="hash", columns=["s", "n"])], "transformers")
    got = {r["id"]: (r["s"], r["n"]) for r in out.collect()}

    def sha(v: str) -> str:
        return hashlib.sha256(v.encode()).hexdigest()

    assert got == {
        "a": (sha("x"), sha("10")),
        "b": (sha(""), sha("20")),
        "c": (None, sha("30")),
        "d": (sha("y"), None),
        "e": (sha("z"), sha("50")),
    }


@pytest.mark.integration
def test_unknown_columns_and_missing_event_time_are_spec_errors(frame) -> None:  # type: ignore[no-untyped-def]
    s = spec("      - {type: hash, columns: [nope]}", "  - {type: deduplicate, keys: [id], ttl_s: 5}")
    with pytest.raises(SpecError, match=r"streams\[data_stream\].transformers\[0\] \(hash\): no column nope"):
        apply_stream_transformers(frame, s.streams[0])
    with pytest.raises(
        SpecError, match=r"transformers\[0\] \(deduplicate\): deduplicate needs the event time"
    ):
        apply_output_transformers(frame, s)
    bad_where = InvalidRecordFilter(type="invalid_record_filter", where="no_such_column > 1")
    with pytest.raises(Exception, match="no_such_column"):
        apply(frame, [bad_where], "transformers").collect()
