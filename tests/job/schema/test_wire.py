"""The compiled wire decoder against upb: the same batch and the same failures, on good, odd and bad wire data."""

from __future__ import annotations

import struct

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool
from hypothesis import given, settings
from hypothesis import strategies as st

from job.schema import default_registry, wire
from job.schema.arrow import ArrowDecoder, DecodeFailure

PING = "daggers.events.DriverLocationPing"
ALL_PING = [
    "driver_id",
    "lat",
    "long",
    "driver_status",
    "service_type",
    "event_timestamp",
    "accuracy_m",
    "speed_kmh",
]
BOOKING = "daggers.events.BookingLog"
ALL_BOOKING = [
    "order_number",
    "customer_id",
    "driver_id",
    "city_id",
    "vehicle_type",
    "status",
    "pickup_lat",
    "pickup_long",
    "event_timestamp",
    "fare_idr",
]


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def ld(number: int, data: bytes) -> bytes:
    return tag(number, 2) + varint(len(data)) + data


def ts(secs: int | None = None, nanos: int | None = None) -> bytes:
    return (b"" if secs is None else tag(1, 0) + varint(secs)) + (
        b"" if nanos is None else tag(2, 0) + varint(nanos)
    )


def upb(dec: ArrowDecoder, payloads: list[bytes | None]) -> tuple[pa.RecordBatch, list[DecodeFailure]]:
    messages, _, failures = dec.parse(payloads)
    return dec.to_batch(messages), failures


def assert_same(
    dec: ArrowDecoder, payloads: list[bytes | None]
) -> tuple[pa.RecordBatch, list[DecodeFailure]]:
    got = dec.decode(payloads)
    want = upb(dec, payloads)
    assert got[0].schema == want[0].schema
    assert repr(got[0].to_pylist()) == repr(
        want[0].to_pylist()
    )  # repr: NaN equals NaN, -0.0 differs from 0.0
    assert got[1] == want[1]
    return got


def test_flat_messages_decode_from_the_wire_and_others_stay_on_upb() -> None:
    reg = default_registry()
    assert wire.tables(reg.descriptor(PING), ["lat"]) is not None
    assert ArrowDecoder(reg, BOOKING, ["city_id"])._wire is not None
    pool = descriptor_pool.DescriptorPool()
    f = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3")
    m = f.message_type.add(name="R")
    m.field.add(
        name="xs",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
    )
    m.field.add(
        name="y",
        number=2,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    pool.Add(f)
    assert wire.tables(pool.FindMessageTypeByName("t.R"), ["y"]) is None  # a repeated field: upb


def test_exact_values_of_every_kind() -> None:
    cls = default_registry().message_class(PING)
    msgs = [
        cls(
            driver_id="dřiver-1 ✓",
            lat=-6.123456789,
            long=106.8,
            driver_status=2,
            service_type=1,
            accuracy_m=3.25,
            speed_kmh=-0.5,
        ),
        cls(driver_id="", lat=0.0, driver_status=-7),  # a negative (unknown) enum value
        cls(),
    ]
    msgs[0].event_timestamp.seconds, msgs[0].event_timestamp.nanos = 1_700_000_000, 999_999_999
    msgs[1].event_timestamp.seconds, msgs[1].event_timestamp.nanos = -62_135_596_800, 1_000  # year 1
    dec = ArrowDecoder(default_registry(), PING, ALL_PING)
    batch, failures = assert_same(dec, [m.SerializeToString() for m in msgs])
    assert failures == []
    rows = batch.to_pylist()
    assert (
        rows[0]["driver_id"] == "dřiver-1 ✓"
        and rows[0]["accuracy_m"] == 3.25
        and rows[0]["speed_kmh"] == -0.5
    )
    assert rows[1]["driver_status"] == "-7" and rows[1]["event_timestamp"].year == 1
    assert rows[2] == {
        "driver_id": "",
        "lat": 0.0,
        "long": 0.0,
        "driver_status": "DRIVER_STATUS_UNKNOWN",
        "service_type": rows[2]["service_type"],
        "event_timestamp": None,
        "accuracy_m": 0.0,
        "speed_kmh": 0.0,
    }


def test_wire_oddities_upb_accepts() -> None:
    dec = ArrowDecoder(default_registry(), BOOKING, ALL_BOOKING)
    payloads: list[bytes | None] = [
        b"",  # every field unset
        ld(1, b"first") + ld(1, b"last") + tag(4, 0) + varint(3) + tag(4, 0) + varint(9),  # the last one wins
        tag(4, 0) + varint(-5) + tag(10, 0) + varint(-1 << 40),  # negative int32 (10-byte varint) and int64
        ld(9, ts(100)) + ld(9, ts(nanos=7)),  # a Timestamp given twice is merged
        ld(9, ts(5, 0) + tag(3, 0) + varint(1)),  # an unknown field inside the Timestamp
        tag(99, 0)
        + varint(1 << 63)
        + tag(98, 1)
        + b"\0" * 8
        + tag(97, 5)
        + b"\0" * 4
        + ld(96, b"\xff\xfe")
        + tag(4, 0)
        + varint(11),  # unknown fields of every wire type, then a known one
        tag(5000, 0) + varint(1) + tag(4, 0) + varint(12),  # a field number past the decoder's tables
        tag(4, 0) + b"\x85\x80\x80\x80\x00",  # a varint with redundant continuation bytes
        tag(7, 1) + struct.pack("<d", float("nan")) + tag(8, 1) + struct.pack("<d", -0.0),
    ]
    batch, failures = assert_same(dec, payloads)
    assert failures == [] and batch.num_rows == len(payloads)
    rows = batch.to_pylist()
    assert rows[1]["order_number"] == "last" and rows[1]["city_id"] == 9
    assert rows[2]["city_id"] == -5 and rows[2]["fare_idr"] == -1 << 40
    assert (
        rows[3]["event_timestamp"].second == 40 and rows[3]["event_timestamp"].microsecond == 0
    )  # 100 s, 7 ns
    assert [rows[i]["city_id"] for i in (5, 6, 7)] == [11, 12, 5]


def test_bad_payloads_are_named_and_the_good_ones_around_them_kept() -> None:
    dec = ArrowDecoder(default_registry(), BOOKING, ["order_number", "city_id"])
    good = ld(1, b"ok") + tag(4, 0) + varint(4)
    payloads: list[bytes | None] = [
        good,
        ld(1, b"\xc3\x28"),  # invalid UTF-8 in a string the query reads
        ld(3, b"\xed\xa0\x80"),  # a UTF-16 surrogate in a string it does not read (upb checks every string)
        ld(9, b"\x08"),  # a Timestamp cut off inside
        tag(4, 0) + b"\x80",  # a varint cut off
        ld(1, b"abc")[:-1],  # a length past the end
        tag(0, 0) + varint(1),  # field number 0
        tag(4, 7) + varint(1),  # wire type 7
        None,
        good,
    ]
    batch, failures = assert_same(dec, payloads)
    assert [f.index for f in failures] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert batch.to_pylist() == [{"order_number": "ok", "city_id": 4}] * 2


def test_what_the_wire_decoder_cannot_vouch_for_goes_to_upb() -> None:
    dec = ArrowDecoder(default_registry(), BOOKING, ["order_number", "city_id"])
    payloads: list[bytes | None] = [
        tag(4, 1) + b"\1" * 8 + ld(1, b"x"),  # a known field with another wire type: upb keeps it unknown
        tag(50, 3) + tag(1, 0) + varint(1) + tag(50, 4) + tag(4, 0) + varint(2),  # a group
        ld(1, b"y"),
    ]
    batch, failures = assert_same(dec, payloads)
    assert failures == [] and batch.to_pylist() == [
        {"order_number": "x", "city_id": 0},
        {"order_number": "", "city_id": 2},
        {"order_number": "y", "city_id": 0},
    ]


PIECES = st.one_of(
    st.builds(lambda n, s: ld(n, s.encode()), st.sampled_from([1, 2, 3]), st.text(max_size=12)),
    st.builds(
        lambda n, v: tag(n, 0) + varint(v),
        st.sampled_from([4, 5, 6, 10, 40]),
        st.integers(-(1 << 63), 1 << 64),
    ),
    st.builds(lambda n, v: tag(n, 1) + struct.pack("<d", v), st.sampled_from([7, 8, 41]), st.floats()),
    st.builds(
        lambda s, ns: ld(9, ts(s, ns)),
        st.none() | st.integers(-62_135_596_000, 253_402_300_000),
        st.none() | st.integers(-(1 << 31), (1 << 31) - 1),
    ),
    st.binary(max_size=6),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.lists(PIECES, max_size=8).map(b"".join) | st.none(), max_size=12))
def test_same_as_upb_on_random_wire_data(payloads: list[bytes | None]) -> None:
    assert_same(ArrowDecoder(default_registry(), BOOKING, ALL_BOOKING), payloads)


def _flat_registry():  # type: ignore[no-untyped-def]
    """A proto3 message with the kinds the daggers' own schemas lack: bool, bytes and a negative int32."""
    from job.schema.registry import SchemaRegistry

    t = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="flat.proto", package="t", syntax="proto3")
    m = f.message_type.add(name="Flat")
    for number, (name, kind) in enumerate(
        [("flag", t.TYPE_BOOL), ("blob", t.TYPE_BYTES), ("n", t.TYPE_INT32), ("s", t.TYPE_STRING)], start=1
    ):
        m.field.add(name=name, number=number, type=kind, label=t.LABEL_OPTIONAL)
    return SchemaRegistry(descriptor_pb2.FileDescriptorSet(file=[f]).SerializeToString())


def test_bool_bytes_and_int32_from_the_wire() -> None:
    dec = ArrowDecoder(_flat_registry(), "t.Flat", ["flag", "blob", "n", "s"])
    assert dec._wire is not None
    payloads: list[bytes | None] = [
        tag(1, 0) + varint(1) + ld(2, b"\x00\xff\x80") + tag(3, 0) + varint(-5) + ld(4, b"ok"),
        tag(1, 0) + varint(2) + ld(2, b""),  # any non-zero varint is true
        b"",
        ld(2, b"\xc3"),  # bytes need not be UTF-8
    ]
    assert dec._decode_wire(payloads) is not None  # decoded from the wire, not handed to upb
    batch, failures = assert_same(dec, payloads)
    assert failures == []
    assert batch.schema.field("blob").type == pa.binary()
    assert batch.to_pylist() == [
        {"flag": True, "blob": b"\x00\xff\x80", "n": -5, "s": "ok"},
        {"flag": True, "blob": b"", "n": 0, "s": ""},
        {"flag": False, "blob": b"", "n": 0, "s": ""},
        {"flag": False, "blob": b"\xc3", "n": 0, "s": ""},
    ]


FLAT_PIECES = st.one_of(
    st.builds(lambda v: tag(1, 0) + varint(v), st.integers(0, 1 << 64)),
    st.builds(lambda b: ld(2, b), st.binary(max_size=8)),
    st.builds(lambda v: tag(3, 0) + varint(v), st.integers(-(1 << 63), 1 << 64)),
    st.builds(lambda s: ld(4, s.encode()), st.text(max_size=6)),
    st.binary(max_size=4),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(FLAT_PIECES, max_size=6).map(b"".join) | st.none(), max_size=8))
def test_bool_bytes_and_int32_same_as_upb_on_random_wire_data(payloads: list[bytes | None]) -> None:
    assert_same(ArrowDecoder(_flat_registry(), "t.Flat", ["flag", "blob", "n", "s"]), payloads)
