"""Issue 51: ``daggers produce`` waits out a broker that stops answering (SIGSTOP), says so, and delivers every
event once when it answers; it fails only after ``--max-outage``, saying how many were not delivered. A real
tansu broker of the test's own, frozen mid-run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from job.produce.generator import generate
from job.produce.producer import ProduceError, produce
from job.stack.broker import TansuBroker
from job.stack.ports import free_port
from tests.helpers import wait_until
from tests.job.produce.test_producer import _consume, _stopped
from tests.services import _serving

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 14, 8, 0, tzinfo=UTC)


def _on_topic(bootstrap: str, topic: str, partitions: int) -> int:
    """Return how many records ``topic`` holds (0 while it does not exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks", "log_level": 0})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(partitions)
        )
    except KafkaException:
        return 0
    finally:
        consumer.close()


def test_produce_waits_out_a_frozen_broker_and_delivers_every_event_once(tmp_path: Path) -> None:
    topic = f"outage-{uuid.uuid4().hex[:8]}"
    err = tmp_path / "produce.err"
    with _serving(lambda: TansuBroker(tmp_path / "tansu", free_port())) as broker:
        pid = broker.process.pid
        assert pid is not None
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "job.cli",
                "produce",
                "--stream",
                "booking",
                "--topic",
                topic,
                "--bootstrap",
                broker.bootstrap,
                "--count",
                "20000",
                "--rate",
                "2000",
                "--partitions",
                "2",
                "--seed",
                "51",
                "--start",
                "2025-03-14T08:00:00Z",
                "--no-progress",
            ],
            stdout=subprocess.PIPE,
            stderr=err.open("wb"),
            text=True,
        )
        frozen = False
        try:
            wait_until(
                "2,000 events on the topic",
                lambda: _on_topic(broker.bootstrap, topic, 2) >= 2_000,
                120,
                every_s=0.2,
                proc=proc,
                log=err,
            )
            os.kill(pid, signal.SIGSTOP)
            frozen, frozen_at = True, time.monotonic()
            wait_until(
                "produce to say it waits",
                lambda: "broker not answering: waiting (" in err.read_text(),
                120,
                every_s=0.2,
                proc=proc,
                log=err,
            )
            time.sleep(max(0.0, 15.0 - (time.monotonic() - frozen_at)))  # the outage lasts 15 s
            os.kill(pid, signal.SIGCONT)
            frozen = False
            out, _ = proc.communicate(timeout=180)
        finally:
            if frozen:
                os.kill(pid, signal.SIGCONT)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = err.read_text()
        assert proc.returncode == 0, stderr
        assert re.search(r"^broker not answering: waiting \(1\d s so far, up to 300 s\)$", stderr, re.M), (
            stderr
        )
        assert re.search(r"^broker answering again after \d+ s: resuming$", stderr, re.M), stderr
        assert out.startswith(f"produced 20,000 events to '{topic}'")
        records = _consume(broker.bootstrap, topic, 20_000, timeout_s=120)
        assert len(records) == 20_000  # none lost
        assert len({m.key() for m in records}) == 20_000  # none twice (one booking, one key)


def test_produce_fails_after_max_outage_saying_how_many_were_not_delivered(tmp_path: Path) -> None:
    topic = f"outage-{uuid.uuid4().hex[:8]}"
    lines: list[str] = []
    with _serving(lambda: TansuBroker(tmp_path / "tansu", free_port())) as broker:
        pid = broker.process.pid
        assert pid is not None
        first = generate("booking", 1_000, seed=1, start=START, duration_s=10)
        rest = generate("booking", 4_000, seed=2, start=START, duration_s=40, first_index=1_000)

        def chunks():  # type: ignore[no-untyped-def]
            yield first  # acknowledged before the next is pulled (ack_every_s): then the broker freezes
            os.kill(pid, signal.SIGSTOP)
            # a stop takes a moment: until then the broker may still acknowledge what comes
            wait_until("the broker to stop", lambda: _stopped(pid), 30, every_s=0.001)
            yield rest

        try:
            with pytest.raises(ProduceError) as info:
                produce(
                    broker.bootstrap,
                    topic,
                    chunks(),
                    progress=False,
                    total=5_000,
                    ack_every_s=3600,
                    max_outage_s=12,
                    on_wait=lines.append,
                )
        finally:
            os.kill(pid, signal.SIGCONT)
    error = info.value
    assert re.fullmatch(
        rf"the Kafka broker at {broker.bootstrap} did not answer for 1[2-9] s: 4,000 of 5,000 events "
        rf"sent were not delivered to topic '{topic}'",
        error.message,
    ), error.message
    assert error.hint == (
        "is the broker up? wait longer with --max-outage; the events not delivered may be partly "
        "on the topic (send them again: at-least-once)"
    )
    report = error.report
    assert report is not None and (report.count, report.errors) == (1_000, 4_000)
    assert len(lines) == 1 and re.fullmatch(
        r"broker not answering: waiting \(1[01] s so far, up to 12 s\)", lines[0]
    )


def test_max_outage_must_be_positive() -> None:
    from typer.testing import CliRunner

    from tests.job.produce.test_producer import _cli

    result = CliRunner().invoke(
        _cli(), ["produce", "-s", "api_log", "-t", "t", "--count", "5", "--max-outage", "0"]
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == (
        "Invalid produce options: --max-outage must be a positive number of seconds, not 0.0"
    )
    with pytest.raises(
        ProduceError, match="the longest wait for the broker must be a positive number of seconds"
    ):
        produce(
            "127.0.0.1:1", "t", generate("api_log", 1, seed=1, start=START, duration_s=1), max_outage_s=-1
        )


def test_a_broker_killed_and_restarted_is_survived_with_a_new_producer(tmp_path: Path) -> None:
    """noida-db killed -9 mid-run loses its newest records: the idempotent producer's sequence no longer
    matches, a fatal error. produce then says so and goes on with a new producer, sending again what was not
    acknowledged: never a traceback."""
    from job.stack.broker import NoidaBroker

    topic = f"fatal-{uuid.uuid4().hex[:8]}"
    err = tmp_path / "produce.err"
    port = free_port()
    broker = NoidaBroker(tmp_path / "noida", port)
    broker.start()
    proc = subprocess.Popen(
        [sys.executable, "-m", "job.cli", "produce", "--stream", "driver_location", "--topic", topic]
        + ["--bootstrap", broker.bootstrap, "--count", "60000", "--rate", "8000", "--partitions", "2"]
        + ["--no-progress"],
        stdout=subprocess.PIPE,
        stderr=err.open("wb"),
        text=True,
    )
    again = NoidaBroker(tmp_path / "noida", port)
    try:
        wait_until(
            "5,000 events on the topic",
            lambda: _on_topic(broker.bootstrap, topic, 2) >= 5_000,
            120,
            every_s=0.2,
            proc=proc,
            log=err,
        )
        assert broker.process.pid is not None
        os.killpg(broker.process.pid, signal.SIGKILL)
        wait_until("the broker to die", lambda: not broker.process.alive(), 30)
        again.start()
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        again.stop()
        broker.stop()
    stderr = err.read_text()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 0, stderr
    assert out.startswith(f"produced 60,000 events to '{topic}'"), out
    for line in stderr.splitlines():  # when the broker lost the producer's sequence: a new producer went on
        if "fatal error" in line:
            assert re.fullmatch(
                r"the producer stopped on a fatal error \(OUT_OF_ORDER_SEQUENCE_NUMBER\): a new one sends again "
                r"the [\d,]+ events? not acknowledged \(some may arrive twice\) \[1/3\]",
                line,
            ), line
