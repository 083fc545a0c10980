"""Kafka failover with two real brokers: the primary (noida-db) is stopped while a dagger runs, the
dagger moves to the secondary (tansu, a mirror with the same records and timestamps at other
offsets) and InfluxDB ends up exactly equal to the ground truth: no gap, nothing counted twice."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.produce.generator import EventBatch, generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import DaggerJob
from job.spec import parse_spec
from job.stack.broker import NoidaBroker, TansuBroker, create_topic
from job.stack.ports import free_port
from tests.helpers import BOOKINGS_SQL, expected_bookings, influx_points, make_spec, unique, wait_until
from tests.job.test_engine_recovery import _status
from tests.services import _serving

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

T0 = datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]


def _chunk(i: int, count: int = 2000) -> EventBatch:
    return generate(
        "booking",
        count,
        seed=120 + i,
        start=T0 + timedelta(seconds=90 * i),
        duration_s=90,
        out_of_order_fraction=0.05,
        first_index=2000 * i,
    )


def _how_it_moved(checkpoint: Path) -> str:
    """How the primary was left: "reader" (a range planned on it was read on the secondary), "driver"
    (the driver switched before all of its 4000 records were planned) or "at-end" (all were read)."""
    moved = [
        json.loads(p.read_text()).get("moved")
        for p in (checkpoint / "positions" / "data_stream").glob("*-*.json")
    ]
    if any(moved):
        return "reader"
    logs = sorted((checkpoint / "spark" / "offsets").glob("[0-9]*"), key=lambda p: int(p.name))
    offsets = [json.loads(p.read_text().splitlines()[-1]) for p in logs]
    on_primary = [o for o in offsets if o.get("@cluster") == "primary"][-1]
    # "@cluster" and "@tick" are the source's own keys ("@" starts no topic name)
    planned = sum(int(v) for t, ps in on_primary.items() if not t.startswith("@") for v in ps.values())
    return "driver" if planned < 4000 else "at-end"


@pytest.mark.parametrize(
    ("stop_at", "batch"), [(4000, 1500), (600, 300)], ids=["between-batches", "mid-stream"]
)
def test_primary_lost_mid_run_moves_to_the_secondary_with_no_gap(
    spark,
    influxdb,
    tmp_path: Path,  # type: ignore[no-untyped-def]
    stop_at: int,
    batch: int,
) -> None:
    """``between-batches``: the primary is stopped once all of its 4000 records are read (the driver
    fails over). ``mid-stream``: it is stopped after 600 of them, while micro-batches of 300 are
    planned and read on it (readers move their ranges to the secondary, or the driver fails over
    first); either way the rest comes from the secondary."""
    with (
        _serving(lambda: NoidaBroker(tmp_path / "primary", free_port())) as primary,
        _serving(lambda: TansuBroker(tmp_path / "secondary", free_port())) as secondary,
    ):
        topic, db = unique("failover"), unique("db").replace("-", "_")
        create_topic(primary.bootstrap, topic, 2, kind="noida")
        create_topic(secondary.bootstrap, topic, 2, kind="tansu")
        influxdb.create_database(db)
        chunks = [_chunk(i) for i in range(3)]
        closing = generate("booking", 1, seed=999, start=T0 + timedelta(hours=1), duration_s=1)
        # The mirror also holds older records the primary has deleted: its offsets are not the primary's.
        older = generate("booking", 300, seed=7, start=T0 - timedelta(hours=3), duration_s=60)
        produce(primary.bootstrap, topic, chunks[:2], progress=False)
        produce(secondary.bootstrap, topic, [older, *chunks[:2]], progress=False)

        checkpoint = tmp_path / "ckpt"
        _, text = make_spec(
            name=unique("failover"),
            bootstrap=primary.bootstrap,
            topic=topic,
            proto_class="daggers.events.BookingLog",
            sql=BOOKINGS_SQL,
            influx_url=influxdb.url,
            db=db,
            measurement="m",
            checkpoint=checkpoint,
            max_records_per_batch=batch,
            trigger_interval_s=1.0,
        )
        text = text.replace(
            f"    max_records_per_batch: {batch}\n",
            f"    max_records_per_batch: {batch}\n"
            "    max_outage_s: 180\n"
            f"    failover: {{bootstrap_servers: '{secondary.bootstrap}', after_s: 5}}\n",
        )
        job = DaggerJob(plan(parse_spec(text, "failover.yaml"), tmp_path), spark)
        job.start()
        started = time.monotonic()
        try:
            wait_until(f"{stop_at} records", lambda: _status(checkpoint).get("input_rows", 0) >= stop_at, 240)
            assert _status(checkpoint)["kafka_clusters"] == {"data_stream": "primary"}
            primary.stop()  # lost: the records that follow only reach the secondary
            lost_at = time.monotonic()
            produce(secondary.bootstrap, topic, [chunks[2], closing], progress=False)

            want = expected_bookings(r for c in chunks for r in c.table.to_pylist())
            wait_until(
                "InfluxDB to equal the ground truth after the failover",
                lambda: influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want,
                300,
            )
            moved_after = time.monotonic() - lost_at
            job.sync_progress()
            status = _status(checkpoint)
            assert status["kafka_clusters"] == {"data_stream": "secondary"}
            assert status["input_rows"] == 6001  # every record once: none of the 300 older, none twice
            assert job.query is not None and job.query.exception() is None
            how = _how_it_moved(checkpoint)
            assert how in (("driver", "reader") if stop_at < 4000 else ("at-end",))
            print(
                f"failover test ({stop_at}, moved by {how}): {len(want)} points equal; input_rows "
                f"{status['input_rows']}; ground truth in "
                f"{moved_after:.0f} s after the primary stopped; {time.monotonic() - started:.0f} s in all"
            )
        finally:
            job.stop()
