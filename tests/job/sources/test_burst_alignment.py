"""A burst on one partition under a read limit drops no on-time record (issue 51's undercount).

Spark's watermark is the newest event time read on any partition, less the delay. A micro-batch capped by
``max_records_per_batch`` that shares the cap in proportion to what each partition has pending reads a
partition whose backlog holds a burst far ahead in event time of one that holds only the steady feed: the
watermark then passes the other partitions' records still waiting, and they are dropped as late although
each partition was written in event-time order (Flink's per-partition watermarks drop none of them).

Real tansu, Spark and InfluxDB; the windows are compared exactly with counts from the records produced.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from job.produce.generator import EventBatch, generate
from job.query.plan import plan
from job.query.runner import run_foreground
from job.stack.broker import create_topic
from tests.helpers import BOOKINGS_SQL, expected_bookings, influx_points, make_spec, send_one, unique

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a minute boundary
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]
PARTITIONS = 4
CAP = 1000  # max_records_per_batch: the backlog takes 15 micro-batches or more
#: every window of the records before minute 15 is closed by the booking at minute 15 (a 30-s delay)
CLOSES_AT_S = (T0 + timedelta(minutes=15) - timedelta(seconds=30)).timestamp()


def rows_in_time_order(batches: list[EventBatch]) -> list[tuple[int, bytes, bytes, dict[str, Any]]]:
    """Every event of ``batches`` as (Kafka time ms, key, payload, row), by event time."""
    out = []
    for b in batches:
        rows = b.table.to_pylist()
        for stamp, key, payload, row in zip(b.timestamps_ms(), b.keys, b.payloads, rows, strict=True):
            out.append((stamp, key, payload, row))
    return sorted(out, key=lambda e: e[0])


def produce_skewed(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Each partition in event-time order: 600 bookings over minutes 0-6 on every partition, and a burst of
    12,000 over minutes 1-4 on partition 0 only; then one booking at minute 15 on every partition, which
    closes every window. Return the rows produced."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    rows: list[dict[str, Any]] = []
    for p in range(PARTITIONS):
        parts = [generate("booking", 600, seed=100 + p, start=T0, duration_s=360, first_index=10_000 * p)]
        if p == 0:
            parts.append(
                generate(
                    "booking",
                    12_000,
                    seed=7,
                    start=T0 + timedelta(minutes=1),
                    duration_s=180,
                    first_index=50_000,
                )
            )
        parts.append(
            generate(
                "booking",
                1,
                seed=200 + p,
                start=T0 + timedelta(minutes=15),
                duration_s=1,
                first_index=90_000 + p,
            )
        )
        for stamp, key, payload, row in rows_in_time_order(parts):
            send_one(producer, topic, payload, key, p, stamp)
            rows.append(row)
    assert producer.flush(60) == 0
    return rows


def capped_run(broker: str, influxdb, db: str, tmp_path: Path, spark, name: str, produce_into):  # type: ignore[no-untyped-def]
    """Make a topic of ``PARTITIONS`` partitions and the InfluxDB database ``db``, fill the topic with
    ``produce_into(broker, topic)``, then read it all with a dagger capped at ``CAP`` records a batch;
    return what ``produce_into`` returned and the run's progress."""
    topic = unique(name)
    create_topic(broker, topic, PARTITIONS)
    influxdb.create_database(db)
    produced = produce_into(broker, topic)
    spec, _ = make_spec(
        name=unique(name),
        bootstrap=broker,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=CAP,
    )
    return produced, run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)


def assert_windows(influxdb, db: str, rows: list[dict[str, Any]], closes_at_s: float) -> None:  # type: ignore[no-untyped-def]
    """Assert ``db`` holds exactly the bookings of ``rows`` in every window closed by ``closes_at_s``: first
    minute by minute (the readable difference), then point by point."""
    want = {k: v for k, v in expected_bookings(rows).items() if k[0] <= closes_at_s}
    got = influx_points(influxdb, db, "m", "num_of_bookings", TAGS)
    ends = sorted({k[0] for k in want})
    per_minute = {end: sum(v for k, v in got.items() if k[0] == end) for end in ends}
    assert per_minute == {end: sum(v for k, v in want.items() if k[0] == end) for end in ends}
    assert got == want


def test_a_burst_on_one_partition_drops_no_on_time_record(
    spark, tansu_broker: str, influxdb, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    db = unique("db").replace("-", "_")
    rows, progress = capped_run(tansu_broker, influxdb, db, tmp_path, spark, "burst", produce_skewed)

    assert_windows(influxdb, db, rows, CLOSES_AT_S)
    assert progress.input_rows == len(rows) == 4 * 601 + 12_000
    assert progress.late_rows_dropped == 0


def produce_old_tail(bootstrap: str, topic: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each partition in event-time order: 2,000 bookings over minutes 0-10; then partition 0's first 1,500
    copied onto the end of partition 2 (a tail far older than its middle: truly late); then one booking at
    minute 20 on every partition, which closes every window. Return the rows produced but the copies, and
    the copies."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    rows: list[dict[str, Any]] = []
    runs = [
        rows_in_time_order(
            [generate("booking", 2000, seed=300 + p, start=T0, duration_s=600, first_index=10_000 * p)]
        )
        for p in range(PARTITIONS)
    ]
    copies = runs[0][:1500]
    for p in range(PARTITIONS):
        closer = generate(
            "booking", 1, seed=400 + p, start=T0 + timedelta(minutes=20), duration_s=1, first_index=90_000 + p
        )
        for n, (stamp, key, payload, row) in enumerate(
            runs[p] + (copies if p == 2 else []) + rows_in_time_order([closer])
        ):
            send_one(producer, topic, payload, key, p, stamp)
            if not (p == 2 and 2000 <= n < 2000 + len(copies)):
                rows.append(row)
    assert producer.flush(60) == 0
    return rows, [row for _, _, _, row in copies]


def test_a_partition_that_ends_in_older_records_drops_no_on_time_record(
    spark, tansu_broker: str, influxdb, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The alignment looked up the first unread record of partition 2 in its old tail, took the tail's time
    for the horizon, and read partition 2 through minute 10 while the others stayed behind: the watermark
    passed their records still unread (the tester's 46,473 on-time records dropped at cap 100,000)."""
    db = unique("db").replace("-", "_")
    (rows, copies), progress = capped_run(
        tansu_broker, influxdb, db, tmp_path, spark, "tail", produce_old_tail
    )

    assert_windows(influxdb, db, rows, (T0 + timedelta(minutes=20) - timedelta(seconds=30)).timestamp())
    assert progress.input_rows == len(rows) + len(copies) == 4 * 2001 + 1500
    # every copy is late (the completed ones reach the window's state); no other record is
    assert progress.late_rows_dropped == sum(r["status"] == "COMPLETED" for r in copies) == 844
