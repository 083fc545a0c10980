"""The first micro-batch of a run is in flight from its query's start, while Spark plans it: on a real broker
(tansu, the test's own) frozen (SIGSTOP) as the query starts, real Spark and InfluxDB. The fourth outsider's
dagger read ``stalled`` "no report yet" for the 23.8 s its first plan after a restart took; status.json now
says ``running_batch`` (``planning``) from the query's start, and the first report clears it."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import DaggerJob
from job.stack.broker import make_broker
from job.stack.ports import free_port
from tests.helpers import bookings_to_influx, unique, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _status(checkpoint: Path) -> dict:
    try:
        return json.loads((checkpoint / "status.json").read_text())
    except (OSError, ValueError):
        return {}


def test_the_first_plan_is_a_batch_in_flight(spark, influxdb, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broker = make_broker("tansu", tmp_path / "broker", free_port())
    topic, db = unique("plan"), unique("db").replace("-", "_")
    frozen = False
    job = None
    try:
        broker.start()
        broker.create_topic(topic, 2)
        produce(
            broker.bootstrap,
            topic,
            [generate("booking", 500, seed=3, start=T0, duration_s=60)],
            progress=False,
        )
        influxdb.create_database(db)
        spec, _ = bookings_to_influx("plan", broker.bootstrap, topic, influxdb.url, db, tmp_path / "ckpt")
        job = DaggerJob(plan(spec, tmp_path), spark)
        assert broker.process.pid is not None
        os.kill(broker.process.pid, signal.SIGSTOP)  # the first plan's look-ups wait for it
        frozen = True
        before = time.time()
        job.start(trigger_interval_s=1.0)
        flight = _status(tmp_path / "ckpt").get("running_batch")
        assert flight is not None and flight["planning"] is True and flight["id"] == 0, flight
        assert before <= flight["since"] <= time.time()
        time.sleep(2.0)
        assert _status(tmp_path / "ckpt")["running_batch"] == flight  # still planning: nothing reported

        os.kill(broker.process.pid, signal.SIGCONT)
        frozen = False
        done = wait_until(
            "the first batch reported",
            lambda: (st := _status(tmp_path / "ckpt")).get("last_batch_id", -1) >= 0 and st,
            120,
        )
        wait_until("no batch in flight", lambda: _status(tmp_path / "ckpt").get("running_batch") is None, 60)
        assert done["input_rows"] > 0
    finally:
        if frozen and broker.process.pid is not None:
            os.kill(broker.process.pid, signal.SIGCONT)
        if job is not None:
            job.stop()
        broker.stop()
