"""The source's first step of COUNT, SUM, MIN, MAX and AVG gives exactly Spark's results: a dozen queries run
twice over the same bookings on a real broker, real Spark and real InfluxDB, once with the source
aggregating first (``partial_aggregation: source_simple``) and once with Spark aggregating every record
(``spark``); every row each writes (values and Arrow types) and every point read back are the same.

The bookings hold late records (a minute's, sent after the watermark passed it), records without an event
time (NULL: the window leaves them out), several keys, an S2 cell and a grid of numeric keys the source
computes (job.sql.numeric_keys), and values whose sums are exact in any
order (coordinates on a 1/64 grid, integer fares), so that the two groupings of the additions agree to the
bit, as they do for every integer."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from job.errors import DaggerError
from job.produce.generator import EventBatch
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import DaggerJob, run_foreground
from job.schema.registry import default_registry
from tests.helpers import make_spec, topic_and_db, unique
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a minute boundary
W = "TUMBLE(rowtime, INTERVAL '60' SECOND)"
END = "TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp"
QUERIES = {
    "count_star": f"SELECT city_id AS tag_city, COUNT(*) AS n, {END} FROM data_stream GROUP BY {W}, city_id",
    "count_column": f"SELECT status AS tag_status, COUNT(driver_id) AS n, {END} FROM data_stream "
    f"GROUP BY {W}, status",
    "sum_bigint": f"SELECT city_id AS tag_city, SUM(fare_idr) AS fares, {END} FROM data_stream "
    f"GROUP BY {W}, city_id",
    "sum_int": f"SELECT status AS tag_status, SUM(city_id) AS s, {END} FROM data_stream GROUP BY {W}, status",
    "min_max_bigint": f"SELECT vehicle_type AS tag_vehicle, MIN(fare_idr) AS lo, MAX(fare_idr) AS hi, {END} "
    f"FROM data_stream GROUP BY {W}, vehicle_type",
    "min_max_double": f"SELECT city_id AS tag_city, MIN(pickup_lat) AS south, MAX(pickup_lat) AS north, {END} "
    f"FROM data_stream GROUP BY {W}, city_id",
    "sum_avg_double": f"SELECT status AS tag_status, SUM(pickup_lat) AS s, AVG(pickup_long) AS a, {END} "
    f"FROM data_stream GROUP BY {W}, status",
    "avg_integers": f"SELECT city_id AS tag_city, AVG(fare_idr) AS fare, AVG(city_id) AS c, {END} "
    f"FROM data_stream GROUP BY {W}, city_id",
    "mixed_keys": "SELECT city_id AS tag_city, status AS tag_status, vehicle_type AS tag_vehicle, "
    "DistinctCount(driver_id) AS drivers, COUNT(*) AS n, SUM(fare_idr) AS fares, MAX(pickup_lat) AS north, "
    f"AVG(pickup_lat) AS lat, {END} FROM data_stream GROUP BY {W}, city_id, status, vehicle_type",
    "s2_key": "SELECT S2Id(pickup_lat, pickup_long, 13) AS tag_s2id, COUNT(*) AS n, SUM(fare_idr) AS fares, "
    f"MIN(pickup_long) AS west, {END} FROM data_stream GROUP BY {W}, S2Id(pickup_lat, pickup_long, 13)",
    "arithmetic": f"SELECT city_id AS tag_city, SUM(fare_idr) / COUNT(*) AS mean, "
    f"COUNT(*) * 2 + MAX(city_id) AS score, {END} FROM data_stream GROUP BY {W}, city_id",
    "grid_key": "SELECT CAST(FLOOR(pickup_lat * 8) AS BIGINT) AS tag_lat_bin, "
    "CAST(CEIL(-pickup_long / 0.125 + 0.5) AS BIGINT) AS tag_long_bin, COUNT(*) AS n, SUM(fare_idr) AS fares, "
    f"DistinctCount(driver_id) AS drivers, {END} FROM data_stream GROUP BY {W}, "
    "CAST(FLOOR(pickup_lat * 8) AS BIGINT), CAST(CEIL(-pickup_long / 0.125 + 0.5) AS BIGINT)",
    "no_key": f"SELECT COUNT(*) AS n, SUM(fare_idr) AS fares, MIN(pickup_lat) AS south, {END} "
    f"FROM data_stream GROUP BY {W}",
}
STATUSES = ["CREATED", "DRIVER_FOUND", "COMPLETED", "CANCELLED"]
_WRITE_ROWS, _ON_PROGRESS = DaggerJob.write_rows, DaggerJob._on_progress


def _bookings(rows: list[dict[str, Any]]) -> EventBatch:
    """The bookings ``rows`` (``event_timestamp`` None: no event time) as an EventBatch, in this order."""
    cls = default_registry().message_class("daggers.events.BookingLog")
    payloads, keys = [], []
    for row in rows:
        msg = cls(**{k: v for k, v in row.items() if k != "event_timestamp"})
        if row["event_timestamp"] is not None:
            msg.event_timestamp.FromDatetime(row["event_timestamp"])
        payloads.append(msg.SerializeToString())
        keys.append(row["order_number"].encode())
    # the Kafka timestamps (T0 for a booking without an event time)
    table = pa.table(
        {
            "event_timestamp": pa.array(
                [r["event_timestamp"] or T0 for r in rows], pa.timestamp("us", tz="UTC")
            )
        }
    )
    none = np.zeros(len(rows), dtype=bool)
    return EventBatch("booking_log", "BookingLog", table, payloads, keys, none, none)


def _data(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(on-time bookings over 8 minutes, one in 80 without an event time; late bookings of minute 1)."""
    rng = np.random.default_rng(seed)

    def booking(i: int, at: datetime | None) -> dict[str, Any]:
        return {
            "order_number": f"O{i:06d}",
            "driver_id": f"D{int(rng.integers(0, 40)):03d}",
            "city_id": int(rng.integers(0, 4)),
            "vehicle_type": str(rng.choice(["BIKE", "CAR"])),
            "status": str(rng.choice(STATUSES)),
            "pickup_lat": int(rng.integers(-420, -380)) / 64,  # on a 1/64 grid: sums exact in any order
            "pickup_long": int(rng.integers(6820, 6860)) / 64,
            "fare_idr": int(rng.choice([rng.integers(0, 200_000), rng.integers(-(2**50), 2**50)])),
            "event_timestamp": at,
        }

    on_time = [
        booking(i, None if i % 80 == 0 else T0 + timedelta(milliseconds=int(t)))
        for i, t in enumerate(np.sort(rng.integers(0, 480_000, 1600)))
    ]
    late = [booking(10_000 + i, T0 + timedelta(seconds=60 + int(rng.integers(0, 60)))) for i in range(40)]
    return on_time, late


def _run(
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    broker: BrokerHandle,
    influxdb: Any,
    topic: str,
    db: str,
    sql: str,
    engine: str,
    measurement: str,
) -> tuple[list[pa.Table], Any, Any]:
    """Run ``sql`` over ``topic`` with ``partial_aggregation: engine`` into ``measurement`` of ``db``; return the
    tables it wrote (as the sinks got them), its plan and its final progress."""
    spec, _ = make_spec(
        name=unique(f"golden-{engine}".replace("_", "-")),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=sql,
        influx_url=influxdb.url,
        db=db,
        measurement=measurement,
        checkpoint=tmp_path / measurement,
        max_records_per_batch=500,
    )
    written: list[pa.Table] = []
    original, on_progress = _WRITE_ROWS, _ON_PROGRESS  # not an earlier run's wrappers
    spark_late = [0]  # Spark's own count of the rows its state operator dropped as late

    def write_rows(self: DaggerJob, table: pa.Table, batch_id: int) -> None:
        written.append(table)
        original(self, table, batch_id)

    def progressed(self: DaggerJob, p: dict[str, Any]) -> None:
        spark_late[0] += sum(
            int(s.get("numRowsDroppedByWatermark") or 0) for s in p.get("stateOperators") or []
        )
        on_progress(self, p)

    monkeypatch.setattr(DaggerJob, "write_rows", write_rows)
    monkeypatch.setattr(DaggerJob, "_on_progress", progressed)
    # with Spark aggregating every record, Spark computes numeric keys too (job.sql.numeric_keys)
    numeric = "spark" if engine == "spark" else "source"
    planned = plan(spec, tmp_path, features={"partial_aggregation": engine, "numeric_keys": numeric})
    progress = run_foreground(planned, available_now=True, spark=spark)
    progress.spark_late = spark_late[0]  # type: ignore[attr-defined]
    return written, planned, progress


def _rows(tables: list[pa.Table]) -> tuple[pa.Schema | None, list[tuple]]:
    rows = [tuple(r.values()) for t in tables for r in t.to_pylist()]
    schemas = {t.schema for t in tables if t.num_rows}
    assert len(schemas) <= 1
    return (schemas.pop() if schemas else None), sorted(rows, key=repr)


def _points(influxdb: Any, db: str, measurement: str) -> list[tuple]:
    series = influxdb.query(f'SELECT * FROM "{measurement}"', db)
    return sorted((tuple(v) for s in series for v in s["values"]), key=repr)


@pytest.fixture(scope="module")
def bookings(tansu_broker: str, influxdb: Any) -> tuple[BrokerHandle, str, str, list[dict[str, Any]]]:
    """A topic of 3 partitions with the on-time bookings, then the late ones, then one far ahead that moves
    the watermark past every window of the others; a fresh InfluxDB database. Returns (broker, topic, db,
    the on-time bookings)."""
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "golden", 3)
    on_time, late = _data(5)
    closer = dict(on_time[1], order_number="CLOSER", event_timestamp=T0 + timedelta(minutes=20))
    produce(
        broker.bootstrap, topic, [_bookings(on_time), _bookings(late), _bookings([closer])], progress=False
    )
    return broker, topic, db, on_time


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_source_aggregating_first_writes_exactly_sparks_rows(  # type: ignore[no-untyped-def]
    spark, monkeypatch, tmp_path, influxdb, bookings, name: str
) -> None:
    broker, topic, db, on_time = bookings
    sql = QUERIES[name]
    first, first_plan, first_progress = _run(
        spark, monkeypatch, tmp_path, broker, influxdb, topic, db, sql, "source_simple", f"{name}_source"
    )
    spark_rows, spark_plan, spark_progress = _run(
        spark, monkeypatch, tmp_path, broker, influxdb, topic, db, sql, "spark", f"{name}_spark"
    )
    assert first_plan.streams[0].source.partial is not None  # the source did aggregate first
    assert spark_plan.streams[0].source.partial is None
    assert bool(first_plan.streams[0].source.derived) == (name in ("s2_key", "grid_key"))
    assert not any("__dagger_key_" in str(d) for d in spark_plan.streams[0].source.derived or [])
    schema, rows = _rows(first)
    assert rows
    assert _rows(spark_rows) == (schema, rows)
    assert _points(influxdb, db, f"{name}_source") == _points(influxdb, db, f"{name}_spark")
    # both read every record and dropped the late minute's 40, counted as records (job.query.late)
    assert first_progress.input_rows == spark_progress.input_rows == len(on_time) + 40 + 1
    assert first_progress.late_rows_dropped == spark_progress.late_rows_dropped == 40
    # where Spark's own count of them was (key, window) rows, the same with the source's first step or not
    assert first_progress.spark_late == spark_progress.spark_late
    if name == "count_star":  # and what they agree on is right: records with a time, none of the late ones
        want = Counter(
            (b["city_id"], int(b["event_timestamp"].timestamp()) // 60 * 60 + 60)
            for b in on_time
            if b["event_timestamp"] is not None
        )
        got = {(city, int(end.timestamp())): n for city, n, end in rows}
        assert got == dict(want)
        assert 0 < spark_progress.spark_late < 40  # Spark's figure: a row per city and batch


def test_a_sum_past_bigint_stops_the_dagger_either_way(  # type: ignore[no-untyped-def]
    spark, monkeypatch, tmp_path, tansu_broker, influxdb
) -> None:
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "golden-overflow", 1)
    rows = [
        dict(_data(1)[0][1], order_number=f"B{i}", fare_idr=2**62, event_timestamp=T0 + timedelta(seconds=i))
        for i in range(3)
    ]
    closer = dict(rows[0], order_number="CLOSER", fare_idr=1, event_timestamp=T0 + timedelta(minutes=5))
    produce(broker.bootstrap, topic, [_bookings(rows), _bookings([closer])], progress=False)
    sql = QUERIES["sum_bigint"]
    for engine in ("source_simple", "spark"):
        with pytest.raises(DaggerError, match=r"\[ARITHMETIC_OVERFLOW\] overflow"):
            _run(spark, monkeypatch, tmp_path, broker, influxdb, topic, db, sql, engine, engine)
