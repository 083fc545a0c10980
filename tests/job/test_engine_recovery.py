"""Issue 2's must-show on recovery: a SIGKILLed dagger resumes from its checkpoint with exact totals,
and late events count within the watermark delay and are dropped (and counted) after it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.schema import default_registry
from tests.helpers import (
    BOOKINGS_SQL,
    bookings_to_influx,
    expected_bookings,
    influx_points,
    make_spec,
    topic_and_db,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]


def _status(checkpoint: Path) -> dict:
    try:
        return json.loads((checkpoint / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def _start_dagger(spec_path: Path, state: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "job.cli", "run", str(spec_path), "--state-dir", str(state)],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    proc.wait(timeout=60)


@pytest.mark.fault
@pytest.mark.slow
def test_sigkill_mid_stream_then_resume_gives_exact_totals(tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "bookings", 3)
    checkpoint = tmp_path / "ckpt"
    spec, text = make_spec(
        name=unique("kill"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=checkpoint,
        max_records_per_batch=600,
        trigger_interval_s=0.5,
    )
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(text)
    log = tmp_path / "dagger.log"
    chunks = [
        generate(
            "booking",
            3000,
            seed=30 + i,
            start=T0 + timedelta(seconds=100 * i),
            duration_s=100,
            out_of_order_fraction=0.05,
        )
        for i in range(3)
    ]
    closing = generate("booking", 1, seed=99, start=T0 + timedelta(minutes=20), duration_s=1)
    produce(broker.bootstrap, topic, chunks[0], progress=False)

    proc = _start_dagger(spec_path, tmp_path, log)
    try:
        wait_until(
            "the first batches",
            lambda: _status(checkpoint).get("input_rows", 0) >= 1200,
            300,
            proc=proc,
            log=log,
        )
        _kill_group(proc, signal.SIGKILL)  # mid-stream: 3000 records wait in the topic
        read_before_kill = _status(checkpoint)["input_rows"]
        assert 0 < read_before_kill < 3000
        produce(broker.bootstrap, topic, chunks[1], progress=False)

        proc = _start_dagger(spec_path, tmp_path, log)
        wait_until(
            "the restarted dagger",
            lambda: _status(checkpoint).get("input_rows", 0) >= 4500,
            300,
            proc=proc,
            log=log,
        )
        produce(broker.bootstrap, topic, [chunks[2], closing], progress=False)
        want = expected_bookings(row for c in chunks for row in c.table.to_pylist())
        wait_until(
            "InfluxDB to equal the ground truth",
            lambda: influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want,
            300,
            proc=proc,
            log=log,
        )
    finally:
        _kill_group(proc, signal.SIGTERM)
    got = influx_points(influxdb, db, "m", "num_of_bookings", TAGS)
    assert got == want
    assert sum(got.values()) == sum(
        1 for c in chunks for r in c.table.to_pylist() if r["status"] == "COMPLETED"
    )


def _booking(order: str, city: int, lat: float, lng: float, at: datetime, status: int = 4) -> bytes:
    cls = default_registry().message_class("daggers.events.BookingLog")
    msg = cls(
        order_number=order, city_id=city, vehicle_type=2, status=status, pickup_lat=lat, pickup_long=lng
    )
    msg.event_timestamp.FromDatetime(at)
    return msg.SerializeToString()


def _row(city: int, lat: float, lng: float, at: datetime) -> dict:
    return {
        "status": "COMPLETED",
        "city_id": city,
        "pickup_lat": lat,
        "pickup_long": lng,
        "vehicle_type": "CAR",
        "event_timestamp": at,
    }


def test_late_events_within_delay_count_and_later_ones_are_dropped(
    spark, tansu_broker, influxdb, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import Producer

    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = unique("late"), unique("db").replace("-", "_")
    broker.create_topic(topic, partitions=2)
    influxdb.create_database(db)
    spec, _ = bookings_to_influx(
        "late", broker.bootstrap, topic, influxdb.url, db, tmp_path / "ckpt", watermark_delay_ms=30_000
    )
    phase_a = generate("booking", 1500, seed=5, start=T0, duration_s=120)
    produce(broker.bootstrap, topic, phase_a, progress=False)
    first = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert first.late_rows_dropped == 0
    # The watermark is now (latest event ≈ T0+120 s) - 30 s ≈ T0+90 s: [T0, T0+60) is closed, [T0+60, T0+120) is not.
    in_time = [(1, -6.2, 106.8, T0 + timedelta(seconds=100))]
    too_late = [
        (2, -6.9, 107.6, T0 + timedelta(seconds=10)),
        (3, -7.25, 112.75, T0 + timedelta(seconds=20)),
        (4, -7.79, 110.37, T0 + timedelta(seconds=30)),
    ]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, (city, lat, lng, at) in enumerate(in_time + too_late):
        producer.produce(topic, _booking(f"x{i}", city, lat, lng, at), partition=0)
    # two more late records: one of a key already late (Spark's state operator sees one row for both), one
    # the WHERE drops (not late: never kept)
    producer.produce(topic, _booking("x8", *too_late[0][:3], T0 + timedelta(seconds=11)), partition=0)
    producer.produce(
        topic, _booking("x9", *too_late[1][:3], T0 + timedelta(seconds=21), status=5), partition=0
    )
    producer.flush()
    produce(
        broker.bootstrap,
        topic,
        generate("booking", 1, seed=6, start=T0 + timedelta(minutes=20), duration_s=1),
        progress=False,
    )
    second = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)

    want = expected_bookings(list(phase_a.table.to_pylist()) + [_row(*e) for e in in_time])
    got = influx_points(influxdb, db, "m", "num_of_bookings", TAGS)
    assert got == want
    assert second.late_rows_dropped == 4  # records the WHERE keeps, counted per window (job.query.late)


def test_watermark_follows_every_event_not_only_those_the_query_keeps(
    spark, tansu_broker, influxdb, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """The closing event is CANCELLED, so WHERE status='COMPLETED' drops it; it must still close the windows."""
    from confluent_kafka import Producer

    from tests.services import BrokerHandle

    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = unique("wm"), unique("db").replace("-", "_")
    broker.create_topic(topic, partitions=1)
    influxdb.create_database(db)
    spec, _ = make_spec(
        name=unique("wm"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=10_000,
    )
    events = [(1, -6.2, 106.8, T0 + timedelta(seconds=s)) for s in (5, 65, 70, 125)]
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i, e in enumerate(events):
        producer.produce(topic, _booking(f"o{i}", *e))
    cls = default_registry().message_class("daggers.events.BookingLog")
    closing = cls(order_number="close", city_id=1, status=5)  # CANCELLED
    closing.event_timestamp.FromDatetime(T0 + timedelta(minutes=10))
    producer.produce(topic, closing.SerializeToString())
    producer.flush()
    run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    got = influx_points(influxdb, db, "m", "num_of_bookings", TAGS)
    assert got == expected_bookings(_row(*e) for e in events)
    assert sorted(t for t, *_ in got) == [
        int((T0 + timedelta(seconds=s)).timestamp()) for s in (60, 120, 180)
    ]
