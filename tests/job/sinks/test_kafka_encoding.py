"""Kafka sink, unit level: rows → protobuf/JSON values and keys, the schema check, and the delivery
retry loop (with a fake producer standing in for librdkafka)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError

from job.errors import SinkError
from job.schema import default_registry
from job.sinks.kafka import KafkaSink, encode_json, encode_keys, proto_encoder
from job.spec import KafkaSinkSpec

AGG = "daggers.aggregates.BookingAggregate"
W1 = datetime(2026, 3, 2, 8, 1, tzinfo=UTC)
W2 = datetime(2026, 3, 2, 8, 2, 0, 500, tzinfo=UTC)


def rows() -> pa.Table:
    return pa.table(
        {
            "tag_city_id": pa.array([1, None], pa.int32()),
            "tag_s2id": ["-7830489120239730688", "3344475382534373376"],
            "tag_vehicle_type": ["CAR", "BIKE"],
            "num_of_bookings": pa.array([3, 40], pa.int64()),
            "window_timestamp": pa.array([W1, W2], pa.timestamp("us", tz="UTC")),
        }
    )


def encoder(schema: pa.Schema):  # type: ignore[no-untyped-def]
    reg = default_registry()
    return proto_encoder(schema, reg.descriptor(AGG), reg.message_class(AGG))


def test_protobuf_values_decode_to_the_rows() -> None:
    cls = default_registry().message_class(AGG)
    decoded = [cls.FromString(b) for b in encoder(rows().schema).encode(rows())]
    first, second = decoded
    assert (first.tag_city_id, first.tag_s2id, first.tag_vehicle_type, first.num_of_bookings) == (
        1,
        "-7830489120239730688",
        2,
        3,
    )  # CAR = 2 in daggers.events.VehicleType
    assert first.window_timestamp.ToDatetime(tzinfo=UTC) == W1
    assert second.tag_city_id == 0  # a NULL leaves the field unset (proto3 default)
    assert (second.tag_vehicle_type, second.num_of_bookings) == (1, 40)
    assert (second.window_timestamp.seconds, second.window_timestamp.nanos) == (int(W2.timestamp()), 500_000)


def test_every_column_that_does_not_fit_is_named_at_once() -> None:
    bad = (
        rows()
        .set_column(3, "num_of_bookings", pa.array([1.5, 2.0]))
        .append_column("drivers", pa.array([1, 2], pa.int64()))
        .set_column(0, "tag_city_id", pa.array([1, 2], pa.int64()))
    )
    with pytest.raises(SinkError) as info:
        encoder(bad.schema)
    assert info.value.message == (
        "the query's output does not fit proto_class daggers.aggregates.BookingAggregate: "
        "column 'tag_city_id' is int64, which does not fit field 'tag_city_id' (int32); "
        "column 'num_of_bookings' is double, which does not fit field 'num_of_bookings' (int64); "
        "column 'drivers' has no field (fields: tag_city_id, tag_s2id, tag_vehicle_type, num_of_bookings, "
        "window_timestamp)"
    )
    assert "CAST" in (info.value.hint or "")


def test_unknown_enum_name_names_the_column_and_the_values() -> None:
    table = rows().set_column(2, "tag_vehicle_type", pa.array(["CAR", "TRUCK"]))
    with pytest.raises(
        SinkError,
        match=r"column 'tag_vehicle_type': 'TRUCK' is not a value of enum "
        r"daggers.events.VehicleType .*values: VEHICLE_TYPE_UNKNOWN, BIKE, CAR",
    ):
        encoder(table.schema).encode(table)


def test_widening_fits_narrowing_does_not() -> None:
    reg = default_registry()
    desc, cls = reg.descriptor(AGG), reg.message_class(AGG)
    ok = pa.schema([("tag_city_id", pa.int16()), ("num_of_bookings", pa.int32()), ("tag_s2id", pa.null())])
    proto_encoder(ok, desc, cls)
    for col, typ in [
        ("num_of_bookings", pa.uint64()),
        ("tag_s2id", pa.int64()),
        ("window_timestamp", pa.string()),
        ("tag_vehicle_type", pa.float64()),
    ]:
        with pytest.raises(SinkError, match=f"column '{col}' is {typ}, which does not fit"):
            proto_encoder(pa.schema([(col, typ)]), desc, cls)


def test_json_values_and_keys() -> None:
    table = rows().append_column("ratio", pa.array([float("nan"), 0.25]))
    assert encode_json(table) == [
        b'{"tag_city_id":1,"tag_s2id":"-7830489120239730688","tag_vehicle_type":"CAR","num_of_bookings":3,'
        b'"window_timestamp":"2026-03-02T08:01:00Z","ratio":null}',
        b'{"tag_city_id":null,"tag_s2id":"3344475382534373376","tag_vehicle_type":"BIKE","num_of_bookings":40,'
        b'"window_timestamp":"2026-03-02T08:02:00.000500Z","ratio":0.25}',
    ]
    assert encode_keys(table, ["tag_s2id"]) == [b"-7830489120239730688", b"3344475382534373376"]
    assert encode_keys(table, ["tag_city_id"]) == [b"1", b""]
    assert encode_keys(table, ["window_timestamp", "tag_city_id"]) == [
        b'{"window_timestamp":"2026-03-02T08:01:00Z","tag_city_id":1}',
        b'{"window_timestamp":"2026-03-02T08:02:00.000500Z","tag_city_id":null}',
    ]
    assert encode_keys(table, []) == [None, None]


# ---- the delivery loop, with a fake producer ------------------------------------------------------


class FakeProducer:
    """Delivers every record, except that the first ``fail_rounds`` flushes fail ``fail_keys`` with ``code``."""

    def __init__(self, code: int, fail_keys: set[bytes], fail_rounds: int) -> None:
        self.code, self.fail_keys, self.fail_rounds = code, fail_keys, fail_rounds
        self.queue: list[tuple[bytes | None, bytes, int | None, Any]] = []
        self.delivered: list[tuple[bytes | None, bytes, int | None]] = []
        self.rounds = 0

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        timestamp: int | None = None,
        on_delivery: Any = None,
    ) -> None:
        self.queue.append((key, value, timestamp, on_delivery))

    def poll(self, timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return len(self.queue)

    def flush(self, timeout: float = 0) -> int:
        failing = self.rounds < self.fail_rounds
        self.rounds += 1
        for key, value, ts, cb in self.queue:
            if failing and key in self.fail_keys:
                cb(KafkaError(self.code), None)
            else:
                self.delivered.append((key, value, ts))
                cb(None, None)
        self.queue = []
        return 0


def sink_with(producer: FakeProducer, max_retries: int = 3) -> tuple[KafkaSink, list[float]]:
    spec = KafkaSinkSpec(
        type="kafka",
        bootstrap_servers="127.0.0.1:1",
        topic="t",
        format="json",
        key_columns=["tag_s2id"],
        max_retries=max_retries,
    )
    sleeps: list[float] = []
    sink = KafkaSink(spec, producer_factory=lambda conf: producer, sleep=sleeps.append)
    sink._producer = producer  # open() needs a broker; the retry loop does not
    return sink, sleeps


def test_failed_deliveries_are_sent_again_until_delivered() -> None:
    producer = FakeProducer(KafkaError._MSG_TIMED_OUT, {b"3344475382534373376"}, fail_rounds=2)
    sink, sleeps = sink_with(producer)
    assert sink.write(rows(), 7) == 2
    assert [k for k, _, _ in producer.delivered] == [b"-7830489120239730688", b"3344475382534373376"]
    assert [ts for _, _, ts in producer.delivered] == [int(W1.timestamp() * 1000), int(W2.timestamp() * 1000)]
    assert sink.metrics.retries == 2 and len(sleeps) == 2 and sink.metrics.failures == 0
    assert sink.metrics.rows_written == 2 and sink.metrics.writes == 1


def test_deliveries_that_keep_failing_fail_the_batch_with_the_count() -> None:
    producer = FakeProducer(KafkaError._MSG_TIMED_OUT, {b"3344475382534373376"}, fail_rounds=99)
    sink, sleeps = sink_with(producer, max_retries=2)
    with pytest.raises(
        SinkError,
        match=r"^1 of 2 records of batch 7 were not delivered to topic 't' after 3 "
        r"attempts: _MSG_TIMED_OUT",
    ):
        sink.write(rows(), 7)
    assert sink.metrics.retries == 2 and sink.metrics.failures == 1 and sink.metrics.rows_written == 0


def test_an_error_retrying_cannot_fix_fails_at_once() -> None:
    producer = FakeProducer(KafkaError.TOPIC_AUTHORIZATION_FAILED, {b"-7830489120239730688"}, fail_rounds=99)
    sink, sleeps = sink_with(producer)
    with pytest.raises(SinkError, match="after 1 attempt: TOPIC_AUTHORIZATION_FAILED"):
        sink.write(rows(), 0)
    assert sleeps == [] and sink.metrics.retries == 0
