"""rows/s of a batch (issue 36: the console showed "rows/s: 0 (max 0)" after a first batch of 100,000
rows): Spark reports no input rate for the first batch of a run, so it is measured over the batch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import DaggerJob, Progress, batch_rows_per_s
from tests.helpers import BOOKINGS_SQL, make_spec, unique


def test_the_rate_of_a_batch_from_its_progress_report() -> None:
    first = {
        "batchId": 0,
        "numInputRows": 100_000,
        "inputRowsPerSecond": 0.0,
        "processedRowsPerSecond": 12_500.0,
        "durationMs": {"triggerExecution": 8000, "addBatch": 7000},
    }
    assert batch_rows_per_s(first) == 12_500.0  # 100,000 rows in 8 s
    later = first | {"batchId": 1, "numInputRows": 2000, "inputRowsPerSecond": 1000.0}
    assert batch_rows_per_s(later) == 1000.0  # Spark's own: over the time since the previous batch began
    assert batch_rows_per_s(first | {"numInputRows": 0}) == 0.0
    assert batch_rows_per_s(first | {"durationMs": {}}) == 0.0
    assert batch_rows_per_s({}) == 0.0


@pytest.mark.integration
def test_the_first_batch_of_a_real_run_has_a_rate(spark, tansu_broker: str, influxdb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.services import BrokerHandle

    topic, db = unique("rate"), unique("db").replace("-", "_")
    BrokerHandle("tansu", tansu_broker).create_topic(topic, partitions=1)
    influxdb.create_database(db)
    produce(
        tansu_broker,
        topic,
        generate("booking", 2000, seed=3, start=datetime(2026, 3, 2, 8, tzinfo=UTC), duration_s=60),
        progress=False,
    )
    spec, _ = make_spec(
        name=unique("rate"),
        bootstrap=tansu_broker,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
    )
    job = DaggerJob(plan(spec, tmp_path), spark)
    seen: list[tuple[int, int, float]] = []

    def on_batch(p: Progress) -> None:
        seen.append((p.last_input_rows, p.batch_duration_ms, p.input_rows_per_s))

    job.batch_listeners.append(on_batch)
    try:
        job.start(available_now=True).awaitTermination(300)
    finally:
        job.stop()
    rows, duration_ms, rate = seen[0]
    assert rows == 2000 and duration_ms > 0
    assert rate == 2000 * 1000.0 / duration_ms
