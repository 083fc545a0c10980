"""The Kafka sink against the real brokers (tansu and noida-db): a protobuf round trip decoded by a
consumer, JSON records, what a replay does to the topic, delivery failures surfaced, and clear errors
at start."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from job.errors import SinkError
from job.schema import default_registry
from job.sinks.kafka import KafkaSink
from job.spec import KafkaSinkSpec
from job.stack.broker import TansuBroker
from job.stack.ports import free_port
from tests.helpers import unique
from tests.job.sinks.kafka_records import consume_all

pytestmark = pytest.mark.integration

AGG = "daggers.aggregates.BookingAggregate"
W0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)


def aggregates(n: int) -> pa.Table:
    """``n`` rows over 3 windows, 4 cities, 2 vehicle types (city 4 is NULL: a NULL tag)."""
    return pa.table(
        {
            "tag_city_id": pa.array([None if i % 4 == 3 else i % 4 + 1 for i in range(n)], pa.int32()),
            "tag_s2id": [str(-7830489120239730688 + 4096 * i) for i in range(n)],
            "tag_vehicle_type": ["CAR" if i % 2 else "BIKE" for i in range(n)],
            "num_of_bookings": pa.array([i * 7 + 1 for i in range(n)], pa.int64()),
            "window_timestamp": pa.array(
                [W0 + timedelta(minutes=1 + i % 3) for i in range(n)], pa.timestamp("us", tz="UTC")
            ),
        }
    )


def spec(bootstrap: str, topic: str, **settings: object) -> KafkaSinkSpec:
    return KafkaSinkSpec.model_validate(
        {"type": "kafka", "bootstrap_servers": bootstrap, "topic": topic, "proto_class": AGG, **settings}
    )


def decoded(records) -> list[tuple]:  # type: ignore[no-untyped-def]
    cls = default_registry().message_class(AGG)
    out = []
    for r in records:
        m = cls.FromString(r.value)
        out.append(
            (
                r.key.decode(),
                m.tag_city_id,
                m.tag_s2id,
                cls.DESCRIPTOR.fields_by_name["tag_vehicle_type"]
                .enum_type.values_by_number[m.tag_vehicle_type]
                .name,
                m.num_of_bookings,
                m.window_timestamp.ToDatetime(tzinfo=UTC),
                r.timestamp_ms,
            )
        )
    return out


def expected(table: pa.Table) -> list[tuple]:
    out = []
    for r in table.to_pylist():
        ts = r["window_timestamp"]
        city = "null" if r["tag_city_id"] is None else r["tag_city_id"]
        key = (
            f'{{"window_timestamp":"{ts:%Y-%m-%dT%H:%M:%SZ}","tag_city_id":{city},'
            f'"tag_s2id":"{r["tag_s2id"]}","tag_vehicle_type":"{r["tag_vehicle_type"]}"}}'
        )
        out.append(
            (
                key,
                r["tag_city_id"] or 0,
                r["tag_s2id"],
                r["tag_vehicle_type"],
                r["num_of_bookings"],
                ts,
                int(ts.timestamp() * 1000),
            )
        )
    return out


def test_protobuf_round_trip_and_what_a_replay_does(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("agg")
    broker.create_topic(topic, partitions=3)
    sink = KafkaSink(spec(broker.bootstrap, topic))
    sink.open()
    table = aggregates(60)
    assert sink.write(table, 0) == 60
    records = consume_all(broker.bootstrap, topic, 60)
    assert sorted(decoded(records)) == sorted(expected(table))
    assert len({r.partition for r in records}) == 3  # keys spread over the partitions

    assert sink.write(table, 0) == 60  # Spark replays batch 0: the same records are appended again
    again = consume_all(broker.bootstrap, topic, 120)
    assert sorted(decoded(again)) == sorted(expected(table) * 2)
    by_record = Counter((r.partition, r.key, r.value) for r in again)
    assert set(by_record.values()) == {2}  # each copy has the same key, value and partition
    latest = {}
    for r in again:  # sorted by (partition, offset), and one key is always in one partition
        latest[r.key] = r
    assert sorted(decoded(latest.values())) == sorted(
        expected(table)
    )  # a consumer keeping the latest per key
    assert sink.metrics.rows_written == 120 and sink.metrics.retries == 0
    sink.close()


def test_json_records_keyed_by_a_chosen_column(tansu_broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("agg-json")
    sink = KafkaSink(
        KafkaSinkSpec(
            type="kafka",
            bootstrap_servers=tansu_broker,
            topic=topic,
            format="json",
            key_columns=["tag_s2id"],
            create_topic=True,
            partitions=2,
        )
    )
    sink.open()  # creates the topic
    table = aggregates(2)
    sink.write(table, 0)
    got = sorted((r.key, r.value) for r in consume_all(tansu_broker, topic, 2))
    assert got == [
        (
            b"-7830489120239726592",
            b'{"tag_city_id":2,"tag_s2id":"-7830489120239726592","tag_vehicle_type":"CAR",'
            b'"num_of_bookings":8,"window_timestamp":"2026-03-02T08:02:00Z"}',
        ),
        (
            b"-7830489120239730688",
            b'{"tag_city_id":1,"tag_s2id":"-7830489120239730688","tag_vehicle_type":"BIKE",'
            b'"num_of_bookings":1,"window_timestamp":"2026-03-02T08:01:00Z"}',
        ),
    ]
    sink.close()


def test_clear_errors_at_start(tansu_broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("agg")
    with pytest.raises(
        SinkError,
        match=r"^proto_class: unknown proto_class 'daggers.aggregates.Nope'; known "
        r"classes: daggers.aggregates.BookingAggregate",
    ):
        KafkaSink(spec(tansu_broker, topic, proto_class="daggers.aggregates.Nope")).open()
    with pytest.raises(SinkError) as info:
        KafkaSink(spec(tansu_broker, topic)).open()
    assert info.value.message == f"topic {topic!r} does not exist on {tansu_broker}"
    assert info.value.hint == "create it, or set create_topic: true on the sink"
    port = free_port()
    with pytest.raises(
        SinkError, match=f"cannot reach the Kafka broker at 127.0.0.1:{port}: Connection refused"
    ):
        KafkaSink(spec(f"127.0.0.1:{port}", topic)).open()

    sink = KafkaSink(spec(tansu_broker, topic, create_topic=True))
    sink.open()
    wrong = (
        aggregates(1)
        .append_column("drivers", pa.array([3], pa.int64()))
        .set_column(3, "num_of_bookings", pa.array([2.5]))
    )
    with pytest.raises(
        SinkError,
        match=r"column 'num_of_bookings' is double, which does not fit field "
        r"'num_of_bookings' \(int64\); column 'drivers' has no field",
    ):
        sink.bind(wrong.schema)
    with pytest.raises(SinkError, match=r"key_columns \['tag_city'\] are not columns"):
        KafkaSink(spec(tansu_broker, topic, key_columns=["tag_city"])).bind(aggregates(1).schema)
    sink.close()


def test_failed_deliveries_are_retried_then_surfaced(tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker = TansuBroker(tmp_path / "tansu", free_port())
    broker.process.die_with_parent = True
    broker.start()
    try:
        topic = unique("agg")
        broker.create_topic(topic, partitions=1)
        sink = KafkaSink(
            spec(broker.bootstrap, topic, delivery_timeout_ms=1500, max_retries=1), sleep=lambda s: None
        )
        sink.open()
        assert sink.write(aggregates(3), 0) == 3
        retries = sink.metrics.retries  # (a first write to a new topic may need one on a busy machine)
        broker.stop()  # the broker goes away mid-stream
        with pytest.raises(
            SinkError,
            match=rf"^3 of 3 records of batch 1 were not delivered to topic '{topic}' "
            r"after 2 attempts: _(MSG_TIMED_OUT|TRANSPORT|ALL_BROKERS_DOWN)",
        ):
            sink.write(aggregates(3), 1)
        assert sink.metrics.retries - retries == 1 and sink.metrics.failures == 1
        assert sink.metrics.rows_written == 3
        sink._producer = None  # nothing left to flush into a stopped broker
    finally:
        broker.stop()
