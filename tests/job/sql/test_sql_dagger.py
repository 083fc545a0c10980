"""Issue 3's must-show on windows and streams, as real daggers: the Kafka broker (tansu), Spark and
InfluxDB, with the points read back with InfluxQL and compared with ground truth computed in plain
Python from the generated events.

* HOP end to end, in Flink's argument order (slide, then size);
* TUMBLE_ROWTIME: a 5-minute window over a 1-minute windowed subquery;
* one table read from two topics (a union);
* an interval join of two streams, each with its own watermark.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.produce.generator import EventBatch, generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.spec import parse_spec
from tests.helpers import BOOKINGS_SQL, expected_bookings, influx_points, make_spec, streams_yaml, unique
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # an hour boundary
BOOKING = "daggers.events.BookingLog"
PING = "daggers.events.DriverLocationPing"


def _secs(value: datetime) -> float:
    return value.timestamp()


def _setup(tansu_broker: str, influxdb, topics: int = 1, partitions: int = 3):  # type: ignore[no-untyped-def]
    broker = BrokerHandle("tansu", tansu_broker)
    names = [unique("t") for _ in range(topics)]
    for name in names:
        broker.create_topic(name, partitions=partitions)
    db = unique("db").replace("-", "_")
    influxdb.create_database(db)
    return broker, names, db


def _closing(stream: str, seed: int, minutes: int = 40) -> EventBatch:
    """One event far ahead: the watermark passes every real window; its own window stays open."""
    return generate(stream, 1, seed=seed, start=T0 + timedelta(minutes=minutes), duration_s=1)  # type: ignore[arg-type]


def _run(spark, tmp_path: Path, spec_text: str):  # type: ignore[no-untyped-def]
    spec = parse_spec(spec_text, "spec.yaml")
    return run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)


def test_hop_windows_in_flink_argument_order(spark, tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker, (topic,), db = _setup(tansu_broker, influxdb)
    batch = generate("booking", 3000, seed=21, start=T0, duration_s=600, out_of_order_fraction=0.05)
    produce(broker.bootstrap, topic, [batch, _closing("booking", 22)], progress=False)
    sql = """SELECT city_id AS tag_city_id,
       count(1) AS bookings,
       CAST(HOP_START(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS BIGINT) AS window_start,
       HOP_END(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS window_timestamp
FROM data_stream
GROUP BY HOP(rowtime, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE), city_id"""
    spec, _ = make_spec(
        name=unique("hop"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class=BOOKING,
        sql=sql,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=1000,
    )
    assert plan(spec, tmp_path).translation.window == ("5 minutes", "1 minutes")
    progress = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)

    want: Counter[tuple[int, str]] = Counter()
    for row in batch.table.to_pylist():
        minute_end = int(_secs(row["event_timestamp"]) // 60) * 60 + 60
        for end in range(minute_end, minute_end + 300, 60):  # every 5-minute window, sliding by 1 minute
            want[(end, str(row["city_id"]))] += 1
    got = influx_points(influxdb, db, "m", "bookings", ["tag_city_id"])
    assert got == dict(want)
    starts = influx_points(influxdb, db, "m", "window_start", ["tag_city_id"])
    assert starts == {key: key[0] - 300 for key in want}  # HOP_START: the window is 5 minutes long
    assert len({end for end, _ in got}) == 14  # windows ending T0+1 min … T0+14 min
    assert progress.input_rows == 3001


def test_window_over_a_windowed_subquery(spark, tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker, (topic,), db = _setup(tansu_broker, influxdb)
    batch = generate("booking", 4000, seed=31, start=T0, duration_s=900, out_of_order_fraction=0.05)
    produce(broker.bootstrap, topic, [batch, _closing("booking", 32)], progress=False)
    sql = """SELECT TUMBLE_END(rt, INTERVAL '5' MINUTE) AS window_timestamp,
       SUM(bookings) AS bookings,
       COUNT(1) AS city_minutes,
       MAX(bookings) AS busiest_city_minute
FROM (
  SELECT TUMBLE_ROWTIME(rowtime, INTERVAL '1' MINUTE) AS rt,
         city_id,
         count(1) AS bookings
  FROM data_stream
  GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), city_id
) AS per_minute
GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE)"""
    spec, _ = make_spec(
        name=unique("nested"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class=BOOKING,
        sql=sql,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=1500,
    )
    run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)

    per_minute: Counter[tuple[int, int]] = Counter()
    for row in batch.table.to_pylist():
        per_minute[(int(_secs(row["event_timestamp"]) // 60), row["city_id"])] += 1
    bookings: Counter[int] = Counter()
    groups: Counter[int] = Counter()
    busiest: dict[int, int] = defaultdict(int)
    for (minute, _), n in per_minute.items():
        end = (minute // 5) * 300 + 300
        bookings[end] += n
        groups[end] += 1
        busiest[end] = max(busiest[end], n)
    assert len(bookings) == 3 and max(busiest.values()) > 1
    assert influx_points(influxdb, db, "m", "bookings", []) == {(end,): n for end, n in bookings.items()}
    assert influx_points(influxdb, db, "m", "city_minutes", []) == {(end,): n for end, n in groups.items()}
    assert influx_points(influxdb, db, "m", "busiest_city_minute", []) == {
        (e,): n for e, n in busiest.items()
    }


def test_one_table_from_two_topics(spark, tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker, (topic_a, topic_b), db = _setup(tansu_broker, influxdb, topics=2)
    first = generate("booking", 2500, seed=41, start=T0, duration_s=300)
    second = generate("booking", 2500, seed=42, start=T0, duration_s=300, first_index=2500)
    produce(broker.bootstrap, topic_a, [first, _closing("booking", 43)], progress=False)
    produce(broker.bootstrap, topic_b, [second, _closing("booking", 44)], progress=False)
    spec, _ = make_spec(
        name=unique("union"),
        bootstrap=broker.bootstrap,
        topic=f"{topic_a}, {topic_b}",
        proto_class=BOOKING,
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        max_records_per_batch=2000,
    )
    assert spec.streams[0].topics == [topic_a, topic_b]
    progress = run_foreground(plan(spec, tmp_path), available_now=True, spark=spark)
    want = expected_bookings([*first.table.to_pylist(), *second.table.to_pylist()])
    only_first = expected_bookings(first.table.to_pylist())
    got = influx_points(influxdb, db, "m", "num_of_bookings", ["tag_city_id", "tag_s2id", "tag_vehicle_type"])
    assert got == want
    assert got != only_first  # both topics count
    assert progress.input_rows == 5002


def _two_stream_spec(
    name: str, bootstrap: str, bookings: str, pings: str, influx: str, db: str, checkpoint: Path, sql: str
) -> str:
    sql_block = "\n".join("  " + line for line in sql.splitlines())
    streams = streams_yaml(
        name,
        bootstrap,
        [("bookings", bookings, BOOKING), ("pings", pings, PING)],
        "    max_records_per_batch: 1200\n",
    )
    return f"""name: {name}
streams:
{streams}sql: |
{sql_block}
watermark_delay_ms: 30000
checkpoint_dir: {checkpoint}
sink:
  type: influx
  url: {influx}
  database: {db}
  measurement: m
"""


def test_interval_join_of_two_streams(spark, tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broker, (bookings_topic, pings_topic), db = _setup(tansu_broker, influxdb, topics=2)
    bookings = generate("booking", 400, seed=51, start=T0, duration_s=600, drivers=40, cities=["Jakarta"])
    pings = generate(
        "driver_location",
        4000,
        seed=51,
        start=T0,
        duration_s=900,
        drivers=40,
        cities=["Jakarta"],
        out_of_order_fraction=0.05,
    )
    produce(broker.bootstrap, bookings_topic, [bookings, _closing("booking", 52, 60)], progress=False)
    produce(broker.bootstrap, pings_topic, [pings, _closing("driver_location", 53, 60)], progress=False)
    sql = """SELECT b.vehicle_type AS tag_vehicle_type,
       count(1) AS pings_after_booking,
       DistinctCount(b.order_number) AS bookings_with_pings,
       TUMBLE_END(b.rowtime, INTERVAL '5' MINUTE) AS window_timestamp
FROM bookings AS b
JOIN pings AS p
  ON b.driver_id = p.driver_id
 AND p.rowtime BETWEEN b.rowtime AND b.rowtime + INTERVAL '5' MINUTE
WHERE p.driver_status = 'ON_TRIP'
GROUP BY TUMBLE(b.rowtime, INTERVAL '5' MINUTE), b.vehicle_type"""
    text = _two_stream_spec(
        unique("join"),
        broker.bootstrap,
        bookings_topic,
        pings_topic,
        influxdb.url,
        db,
        tmp_path / "ckpt",
        sql,
    )
    p = plan(parse_spec(text, "join.yaml"), tmp_path)
    assert (
        "JOIN pings AS p ON b.driver_id = p.driver_id AND p.rowtime BETWEEN b.rowtime AND b.rowtime + "
        "INTERVAL '5' MINUTE" in p.translation.spark_sql
    )
    assert (
        "b.__dagger_wm >= 0 AND p.__dagger_wm >= 0" in p.translation.spark_sql
    )  # both watermarks follow every event
    progress = run_foreground(p, available_now=True, spark=spark)

    by_driver: dict[str, list[float]] = defaultdict(list)
    for ping in pings.table.to_pylist():
        if ping["driver_status"] == "ON_TRIP":
            by_driver[ping["driver_id"]].append(_secs(ping["event_timestamp"]))
    count: Counter[tuple[int, str]] = Counter()
    orders: dict[tuple[int, str], set[str]] = defaultdict(set)
    for booking in bookings.table.to_pylist():
        t = _secs(booking["event_timestamp"])
        matches = sum(1 for pt in by_driver.get(booking["driver_id"], []) if t <= pt <= t + 300)
        if matches:
            key = (int(t // 300) * 300 + 300, booking["vehicle_type"])
            count[key] += matches
            orders[key].add(booking["order_number"])
    assert sum(count.values()) > 1000 and len(count) >= 4
    assert influx_points(influxdb, db, "m", "pings_after_booking", ["tag_vehicle_type"]) == dict(count)
    assert influx_points(influxdb, db, "m", "bookings_with_pings", ["tag_vehicle_type"]) == {
        k: len(v) for k, v in orders.items()
    }
    assert progress.input_rows == 4402
