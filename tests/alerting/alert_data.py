"""The data the alerting tests alert on: bookings per city and minute, counted by a REAL dagger.

Over ten minutes from T0 every city is calm, then Jakarta, Bandung and Surabaya spike for three
minutes (windows ending T0+4m, +5m, +6m), then calm again. :func:`run_bookings_dagger` produces the
events to the broker, runs the dagger on Spark into InfluxDB and checks the points it wrote against
counts computed from the generated events.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from job.produce.cities import city_by_name
from job.produce.generator import EventBatch, generate
from job.produce.producer import corrupt, produce
from job.query.plan import plan
from job.query.runner import run_foreground
from job.schema import default_registry
from tests.helpers import influx_points, make_spec, unique, window_end_s

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MINUTES = 10
#: bookings per minute (minute 0 starts at T0), per city
SHAPE: dict[str, list[int]] = {
    "Jakarta": [20, 20, 20, 80, 80, 80, 20, 20, 20, 20],
    "Bandung": [10, 10, 10, 70, 70, 70, 10, 10, 10, 10],
    "Surabaya": [15, 15, 15, 60, 60, 60, 15, 15, 15, 15],
    "Medan": [5] * MINUTES,
}
CORRUPT_RECORDS = 25
CITY_SQL = """SELECT city_id AS tag_city_id,
       count(1) AS bookings,
       TUMBLE_END(rowtime, INTERVAL '60' SECOND) AS window_timestamp
FROM data_stream
GROUP BY TUMBLE(rowtime, INTERVAL '60' SECOND), city_id"""
MEASUREMENT = "bookings_per_city"


def city_id(name: str) -> str:
    """The tag value (city id as text) of a city."""
    return str(city_by_name(name).city_id)


def at_minute(k: float) -> float:
    """Epoch seconds of T0 + k minutes (an evaluation at minute k reads the window that ended then)."""
    return (T0 + timedelta(minutes=k)).timestamp()


@dataclass(frozen=True)
class DaggerOutput:
    """Where the dagger wrote, and what."""

    influx_url: str
    database: str
    measurement: str
    bootstrap: str
    topic: str
    spec_path: Path
    state_dir: Path
    checkpoint: Path
    good_records: int
    bad_records: int
    points: dict[tuple[int, str], int]  # (window end s, city id) -> bookings


def run_bookings_dagger(spark: Any, bootstrap: str, influxdb: Any, root: Path) -> DaggerOutput:
    """Run the bookings-per-city dagger once over the shaped data into a new database; check its output
    against the generated events; return where it is."""
    topic, db = unique("alert-bookings"), unique("alerts").replace("-", "_")
    influxdb.create_database(db)
    batches: list[EventBatch] = []
    seed = 100
    for name, counts in SHAPE.items():
        for minute, n in enumerate(counts):
            seed += 1
            batches.append(
                generate(
                    "booking",
                    n,
                    seed=seed,
                    start=T0 + timedelta(minutes=minute),
                    duration_s=60,
                    cities=[name],
                )
            )
    # undecodable records for the platform's bad-record check (not counted by the dagger)
    bad_batch = generate("booking", CORRUPT_RECORDS, seed=7, start=T0, duration_s=60, cities=["Medan"])
    cls = default_registry().message_class(bad_batch.message_name)
    payloads, _ = corrupt(bad_batch.payloads, 1.0, seed=7, message_class=cls)
    closing = generate("booking", 1, seed=8, start=T0 + timedelta(minutes=20), duration_s=1, cities=["Medan"])
    produce(
        bootstrap,
        topic,
        [*batches, dataclasses.replace(bad_batch, payloads=payloads), closing],
        partitions=2,
        progress=False,
    )

    spec, text = make_spec(
        name=unique("alerts-city"),
        bootstrap=bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=CITY_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement=MEASUREMENT,
        checkpoint=root / "ckpt",
    )
    spec_path = root / "bookings-per-city.yaml"
    spec_path.write_text(text)
    progress = run_foreground(plan(spec, root), available_now=True, spark=spark)

    want: Counter[tuple[int, str]] = Counter()
    for b in batches:
        for row in b.table.select(["event_timestamp", "city_id"]).to_pylist():
            want[
                (window_end_s(int(row["event_timestamp"].timestamp() * 1_000_000)), str(row["city_id"]))
            ] += 1
    got = influx_points(influxdb, db, MEASUREMENT, "bookings", ["tag_city_id"])
    diff = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
    assert not diff, f"the dagger's output differs from the generated counts: {diff}"
    assert got == {
        (int(T0.timestamp()) + 60 * (m + 1), city_id(name)): n
        for name, counts in SHAPE.items()
        for m, n in enumerate(counts)
    }
    good = sum(len(b) for b in batches) + 1
    assert (progress.input_rows, progress.bad_records) == (good, CORRUPT_RECORDS), progress
    return DaggerOutput(
        influxdb.url,
        db,
        MEASUREMENT,
        bootstrap,
        topic,
        spec_path,
        root,
        root / "ckpt",
        good,
        CORRUPT_RECORDS,
        got,
    )
