"""Transformers in a running dagger (tansu, Spark, InfluxDB): before the SQL, an invalid-record filter
and a de-duplication by order number within a TTL; after it, SHA-256 hashing of a tag. The points
read back equal the ground truth computed in plain Python."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.spec import parse_spec
from tests.helpers import influx_points, make_spec, unique
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
SQL = """SELECT city_id AS tag_city_id,
       count(1) AS bookings,
       DistinctCount(order_number) AS orders,
       DistinctCount(driver_id) AS drivers,
       SUM(fare_idr) AS fares,
       TUMBLE_END(rowtime, INTERVAL '5' MINUTE) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '5' MINUTE), city_id"""
TRANSFORMERS = """    transformers:
      - type: invalid_record_filter
        required: [driver_id]
        ranges: {fare_idr: [1, null]}
      - type: deduplicate
        keys: [order_number]
        ttl_s: 60
"""


def _valid(row: dict) -> bool:
    return bool(row["driver_id"]) and row["fare_idr"] >= 1


def test_filter_deduplicate_and_hash_in_a_dagger(spark, tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = unique("tr"), unique("db").replace("-", "_")
    broker.create_topic(topic, partitions=3)
    influxdb.create_database(db)
    first = generate("booking", 2000, seed=61, start=T0, duration_s=300)
    # the same bookings again (re-sent duplicates: same order numbers and times) ...
    # ... other bookings that move the watermark well past the first ones' TTL ...
    filler = generate(
        "booking", 3000, seed=62, start=T0 + timedelta(minutes=8), duration_s=300, first_index=10**6
    )
    # ... and the first order numbers again 20 minutes later: past the TTL, so they count again
    again = generate("booking", 2000, seed=61, start=T0 + timedelta(minutes=20), duration_s=300)
    closing = next(
        b
        for seed in range(100, 200)
        for b in [generate("booking", 1, seed=seed, duration_s=1, start=T0 + timedelta(minutes=60))]
        if _valid(b.table.to_pylist()[0])
    )  # a record the filter keeps closes the windows
    assert [r["order_number"] for r in first.table.to_pylist()] == [
        r["order_number"] for r in again.table.to_pylist()
    ]
    produce(broker.bootstrap, topic, [first, first, filler, again, closing], progress=False)

    _, text = make_spec(
        name=unique("tr"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=600,
    )
    text = text.replace("sql: |", TRANSFORMERS + "sql: |").replace(
        "sink:", "transformers:\n  - {type: hash, columns: [tag_city_id]}\nsink:"
    )
    spec = parse_spec(text, "tr.yaml")
    progress = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    assert progress.input_rows == 2 * 2000 + 3000 + 2000 + 1

    bookings: dict[tuple[int, str], int] = defaultdict(int)
    orders: dict[tuple[int, str], set[str]] = defaultdict(set)
    fares: dict[tuple[int, str], int] = defaultdict(int)
    for row in [*first.table.to_pylist(), *filler.table.to_pylist(), *again.table.to_pylist()]:
        if not _valid(row):
            continue
        key = (
            int(row["event_timestamp"].timestamp() // 300) * 300 + 300,
            hashlib.sha256(str(row["city_id"]).encode()).hexdigest(),
        )
        bookings[key] += 1
        orders[key].add(row["order_number"])
        fares[key] += row["fare_idr"]
    assert len({end for end, _ in bookings}) == 4  # windows of first (1), filler (2) and again (1)
    got = influx_points(influxdb, db, "m", "bookings", ["tag_city_id"])
    assert got == dict(bookings)  # each re-sent duplicate dropped, the later same keys kept, invalid ones out
    assert influx_points(influxdb, db, "m", "orders", ["tag_city_id"]) == {
        k: len(v) for k, v in orders.items()
    }
    assert influx_points(influxdb, db, "m", "fares", ["tag_city_id"]) == dict(fares)
