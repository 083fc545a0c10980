"""Issue 7: faults a running dagger must survive with nothing lost or counted twice. Each test runs
the dagger as its own process against real services, injects the fault, and ends with an exact
comparison of InfluxDB against the ground truth."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.stack.broker import NoidaBroker, create_topic
from job.stack.influx import InfluxServer, create_database
from job.stack.ports import free_ports
from tests.helpers import (
    bookings_to_influx,
    expected_bookings,
    influx_points,
    unique,
    wait_until,
)
from tests.job.test_engine_recovery import _kill_group, _start_dagger, _status

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

T0 = datetime(2026, 3, 2, 11, 0, tzinfo=UTC)
TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]


def _chunks(n: int, seed: int) -> list:  # type: ignore[type-arg]
    return [
        generate(
            "booking",
            2000,
            seed=seed + i,
            start=T0 + timedelta(seconds=90 * i),
            duration_s=90,
            out_of_order_fraction=0.05,
            first_index=2000 * i,
        )
        for i in range(n)
    ]


def _closing():  # type: ignore[no-untyped-def]
    return generate("booking", 1, seed=999, start=T0 + timedelta(hours=1), duration_s=1)


def _dagger(
    tmp_path: Path,
    bootstrap: str,
    influx_url: str,
    db: str,
    topic: str,  # type: ignore[no-untyped-def]
    sink_extra: str = "",
):
    spec, text = bookings_to_influx(
        "fault",
        bootstrap,
        topic,
        influx_url,
        db,
        tmp_path / "ckpt",
        max_records_per_batch=1500,
        trigger_interval_s=1.0,
        sink_extra=sink_extra,
    )
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_broker_stopped_for_12_seconds(influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    port = free_ports(1)[0]
    broker = NoidaBroker(tmp_path / "noida", port)
    broker.start()
    proc = None
    log = tmp_path / "dagger.log"
    try:
        topic, db = unique("outage"), unique("db").replace("-", "_")
        create_topic(broker.bootstrap, topic, 2, kind="noida")
        influxdb.create_database(db)
        chunks = _chunks(3, seed=40)
        produce(broker.bootstrap, topic, chunks[0], progress=False)
        proc = _start_dagger(_dagger(tmp_path, broker.bootstrap, influxdb.url, db, topic), tmp_path, log)
        wait_until(
            "the first chunk",
            lambda: _status(tmp_path / "ckpt").get("input_rows", 0) >= 2000,
            360,
            proc=proc,
            log=log,
        )

        broker.stop()  # SIGINT: noida-db keeps its data folder
        time.sleep(12)  # longer than librdkafka's reconnect backoff and several triggers: the source waits
        assert proc.poll() is None, "the dagger must wait for the broker, not die"
        broker = NoidaBroker(tmp_path / "noida", port)
        broker.start()
        produce(broker.bootstrap, topic, [chunks[1], chunks[2], _closing()], progress=False)

        want = expected_bookings(r for c in chunks for r in c.table.to_pylist())
        wait_until(
            "InfluxDB to equal the ground truth after the outage",
            lambda: influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want,
            360,
            proc=proc,
            log=log,
        )
        assert _status(tmp_path / "ckpt")["input_rows"] == 6001
    finally:
        if proc is not None:
            _kill_group(proc, signal.SIGTERM)
        broker.stop()


def test_influxdb_stopped_for_20_seconds(tansu_broker, tmp_path) -> None:  # type: ignore[no-untyped-def]
    port, backup = free_ports(2)
    influx = InfluxServer(tmp_path / "influx", port, backup)
    influx.start()
    proc = None
    log = tmp_path / "dagger.log"
    try:
        topic, db = unique("influx-outage"), "faults"
        create_topic(tansu_broker, topic, 2)
        create_database(influx.url, db)
        handle = type("Influx", (), {"url": influx.url})
        chunks = _chunks(3, seed=60)
        produce(tansu_broker, topic, [chunks[0], chunks[1]], progress=False)
        # retries every 5 s at most (x0.5-1.5): back within 7.5 s of InfluxDB's return, not 45 s as at the default
        spec = _dagger(
            tmp_path, tansu_broker, influx.url, db, topic, sink_extra="max_backoff_s: 5\nmax_retries: 60"
        )
        proc = _start_dagger(spec, tmp_path, log)
        wait_until(
            "the first windows",
            lambda: influx_points(handle, db, "m", "num_of_bookings", TAGS),
            360,
            proc=proc,
            log=log,
        )

        influx.stop()
        produce(tansu_broker, topic, [chunks[2], _closing()], progress=False)
        # several retries at max_backoff_s 5 (the windows of chunk 2 wait to be written), and it lives on
        wait_until(
            "three retries while InfluxDB is down",
            lambda: "retry 3/60" in log.read_text(),
            360,
            proc=proc,
            log=log,
        )
        assert proc.poll() is None, "the dagger must retry, not die"
        influx = InfluxServer(tmp_path / "influx", port, backup)
        influx.start()

        want = expected_bookings(r for c in chunks for r in c.table.to_pylist())
        wait_until(
            "InfluxDB to equal the ground truth after its outage",
            lambda: influx_points(handle, db, "m", "num_of_bookings", TAGS) == want,
            300,
            proc=proc,
            log=log,
        )
        # (status.json is written after the batch's points)
        wait_until(
            "the retries in status.json",
            lambda: _status(tmp_path / "ckpt").get("sinks", {}).get("influx", {}).get("retries", 0) >= 3,
            180,
            proc=proc,
            log=log,
        )
    finally:
        if proc is not None:
            _kill_group(proc, signal.SIGTERM)
        influx.stop()


def test_sigkill_several_times_during_a_long_run(tansu_broker, influxdb, tmp_path) -> None:  # type: ignore[no-untyped-def]
    topic, db = unique("kills"), unique("db").replace("-", "_")
    create_topic(tansu_broker, topic, 3)
    influxdb.create_database(db)
    spec_path = _dagger(tmp_path, tansu_broker, influxdb.url, db, topic)
    log = tmp_path / "dagger.log"
    chunks = _chunks(3, seed=80)  # three kills, each at a different moment of a micro-batch
    proc = None
    try:
        for i, chunk in enumerate(chunks):
            produce(tansu_broker, topic, chunk, progress=False)
            proc = _start_dagger(spec_path, tmp_path, log)
            target = 2000 * i + 700
            wait_until(
                f"progress before kill {i + 1}",
                lambda t=target: _status(tmp_path / "ckpt").get("input_rows", 0) >= t,
                360,
                proc=proc,
                log=log,
            )
            time.sleep(0.3 * i)  # a different moment of the micro-batch each time
            _kill_group(proc, signal.SIGKILL)
        produce(tansu_broker, topic, _closing(), progress=False)
        proc = _start_dagger(spec_path, tmp_path, log)
        want = expected_bookings(r for c in chunks for r in c.table.to_pylist())
        wait_until(
            "InfluxDB to equal the ground truth after 3 kills",
            lambda: influx_points(influxdb, db, "m", "num_of_bookings", TAGS) == want,
            360,
            proc=proc,
            log=log,
        )
    finally:
        if proc is not None:
            _kill_group(proc, signal.SIGTERM)
