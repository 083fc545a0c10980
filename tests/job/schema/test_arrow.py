"""Protobuf → Arrow decoding: exact values, schemas Spark accepts, and bad payloads reported by index."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from job.errors import SchemaError
from job.schema import default_registry
from job.schema.arrow import ArrowDecoder

PING = "daggers.events.DriverLocationPing"


def ping(driver: str, lat: float, status: int, secs: int, nanos: int = 0) -> bytes:
    cls = default_registry().message_class(PING)
    msg = cls(driver_id=driver, lat=lat, long=106.8, driver_status=status)
    if secs or nanos:
        msg.event_timestamp.seconds = secs
        msg.event_timestamp.nanos = nanos
    return msg.SerializeToString()


def test_decode_exact_values_and_failures() -> None:
    dec = ArrowDecoder(default_registry(), PING, ["driver_id", "lat", "driver_status", "event_timestamp"])
    payloads = [
        ping("d1", -6.2, 1, 1_700_000_000, 5_000),
        b"\xff\xff",
        None,
        ping("d2", -6.3, 2, 0),
        ping("d3", 1.0, 99, 1_700_000_001),
    ]
    batch, failures = dec.decode(payloads)
    assert [f.index for f in failures] == [1, 2]
    assert "DecodeError" in failures[0].reason and failures[1].reason == "empty (null) value"
    assert batch.schema == to_arrow_schema(dec.spark_schema, timezone="UTC")
    assert batch.to_pylist() == [
        {
            "driver_id": "d1",
            "lat": -6.2,
            "driver_status": "AVAILABLE",
            "event_timestamp": datetime(2023, 11, 14, 22, 13, 20, 5, tzinfo=UTC),
        },
        {"driver_id": "d2", "lat": -6.3, "driver_status": "ON_TRIP", "event_timestamp": None},
        {
            "driver_id": "d3",
            "lat": 1.0,
            "driver_status": "99",
            "event_timestamp": datetime(2023, 11, 14, 22, 13, 21, tzinfo=UTC),
        },
    ]


def test_schema_types() -> None:
    dec = ArrowDecoder(
        default_registry(),
        "daggers.events.BookingLog",
        ["city_id", "fare_idr", "pickup_lat", "status", "event_timestamp"],
    )
    assert dec.arrow_schema.types == [
        pa.int32(),
        pa.int64(),
        pa.float64(),
        pa.string(),
        pa.timestamp("us", tz="UTC"),
    ]


def test_unknown_column_and_class() -> None:
    with pytest.raises(SchemaError, match="has no field 'nope'"):
        ArrowDecoder(default_registry(), PING, ["nope"])
    with pytest.raises(
        SchemaError,
        match="unknown proto_class 'x.Y'; known classes: daggers.aggregates.BookingAggregate, daggers.events.ApiLog",
    ):
        default_registry().descriptor("x.Y")


def test_registry_round_trips_through_base64() -> None:
    from job.schema.registry import SchemaRegistry

    reg = default_registry()
    again = SchemaRegistry.from_b64(reg.to_b64())
    assert again.message_names() == [
        "daggers.aggregates.BookingAggregate",
        "daggers.events.ApiLog",
        "daggers.events.BookingLog",
        "daggers.events.DriverLocationPing",
        "nexmark.Auction",
        "nexmark.Bid",
        "nexmark.Person",
    ]
