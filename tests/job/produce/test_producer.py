"""Integration tests of ``produce()``, ``ensure_topic()`` and ``daggers produce`` against REAL brokers.

The brokers come from ``tests/services.py`` (``tansu_broker``, ``broker`` = tansu and noida), started
on OS-assigned ports. Records are read back with confluent-kafka ``assign`` (no group join).
"""

from __future__ import annotations

import itertools
import json
import socket
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource
from typer.testing import CliRunner

from job.cli.produce import (
    DEFAULT_BOOTSTRAP,
    UsageError,
    default_bootstrap,
    make_plan,
    parse_late_by,
    parse_start,
    register,
)
from job.produce.generator import MESSAGE_NAMES, EventBatch, generate, generate_chunks
from job.produce.producer import ProduceError, TokenBucket, corrupt, ensure_topic, produce
from job.schema import default_registry
from tests.helpers import wait_until

START = datetime(2025, 3, 14, 8, 0, tzinfo=UTC)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _consume(
    bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0, settle_s: float = 1.5
) -> list[Message]:
    """Read every partition of ``topic`` from the beginning until ``expected`` records arrived, then
    keep reading ``settle_s`` more seconds so duplicates would show."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "log_level": 0,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        records: list[Message] = []
        deadline, settle_until = time.monotonic() + timeout_s, None
        while time.monotonic() < (settle_until or deadline):
            for msg in consumer.consume(10_000, 0.3):
                if msg.error() is None:
                    records.append(msg)
                elif msg.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(msg.error())
            if settle_until is None and len(records) >= expected:
                settle_until = time.monotonic() + settle_s
        return records
    finally:
        consumer.close()


def _batch(stream: str = "driver_location", count: int = 10_000, **kw: object) -> EventBatch:
    return generate(stream, count, seed=kw.pop("seed", 21), start=START, duration_s=300.0, **kw)  # type: ignore[arg-type]


# ---- produce --------------------------------------------------------------------------------------


@pytest.mark.integration
def test_every_event_arrives_exactly_once_keyed_and_timestamped(broker) -> None:  # type: ignore[no-untyped-def]
    batch = _batch(drivers=500, late_fraction=0.01, out_of_order_fraction=0.05)
    topic = _topic("pings")
    report = produce(broker.bootstrap, topic, batch, partitions=4, progress=False)
    assert (report.count, report.errors, report.topic) == (10_000, 0, topic)
    assert report.events_per_s > 0

    records = _consume(broker.bootstrap, topic, 10_000)
    assert Counter(m.value() for m in records) == Counter(batch.payloads)  # each payload exactly once

    stamp_of = dict(zip(batch.payloads, batch.timestamps_ms(), strict=True))
    key_of = dict(zip(batch.payloads, batch.keys, strict=True))
    partitions_of_key: dict[bytes, set[int]] = defaultdict(set)
    for m in records:
        assert m.key() == key_of[m.value()]
        assert m.timestamp() == (TIMESTAMP_CREATE_TIME, stamp_of[m.value()])
        partitions_of_key[m.key()].add(m.partition())
    assert all(len(p) == 1 for p in partitions_of_key.values()), "one driver, one partition"
    assert len({m.partition() for m in records}) == 4

    # per key, the partition keeps the send order
    sent_order: dict[bytes, list[bytes]] = defaultdict(list)
    for key, payload in zip(batch.keys, batch.payloads, strict=True):
        sent_order[key].append(payload)
    got_order: dict[bytes, list[bytes]] = defaultdict(list)
    for m in sorted(records, key=lambda m: (m.partition(), m.offset())):
        got_order[m.key()].append(m.value())
    assert got_order == sent_order


@pytest.mark.integration
def test_ack_every_s_waits_for_each_slice_of_event_time_before_sending_the_next(
    broker, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from job.produce import producer as module

    batch = _batch(drivers=200, out_of_order_fraction=0.05)  # 10,000 events over 300 s
    flushes: list[tuple[int, int]] = []  # (events queued when a flush began, events still queued after it)
    real_flush = module._flush

    def flush(producer, timeout_s: float, watch=None) -> int:  # type: ignore[no-untyped-def]
        queued = len(producer)
        remaining = real_flush(producer, timeout_s, watch)
        flushes.append((queued, remaining))
        return remaining

    monkeypatch.setattr(module, "_flush", flush)
    topic = _topic("sliced")
    closer = _batch(count=1, seed=5)
    report = produce(broker.bootstrap, topic, [batch, closer], partitions=4, progress=False, ack_every_s=30.0)
    assert report.count == 10_001
    slices = len(batch.time_slices(30.0)) + 1
    assert slices == 11
    # a flush after each slice (the closer's included), each leaving nothing queued, then the final one
    assert len(flushes) == slices + 1 and all(after == 0 for _, after in flushes)
    assert sum(1 for before, _ in flushes[:-1] if before > 0) >= slices // 2  # they had something to wait for
    records = _consume(broker.bootstrap, topic, 10_001)
    assert Counter(m.value() for m in records) == Counter([*batch.payloads, *closer.payloads])


@pytest.mark.integration
def test_rate_limit_is_never_exceeded(tansu_broker: str) -> None:
    """2,000 events at 1,000/s take at least 2 s less a pacing step, however fast the machine; a busy machine
    may take longer (how close to the rate the producer keeps is measured in bench/, not asserted here)."""
    batch = _batch("api_log", 2_000)
    report = produce(tansu_broker, _topic("rate"), batch, rate=1_000.0, progress=False)
    assert report.count == 2_000
    assert report.seconds >= 1.7
    assert report.events_per_s <= 1_000.0 * 2.0 / 1.7


@pytest.mark.integration
def test_chunks_stream_lazily_and_bad_records_arrive_as_sent(tansu_broker: str) -> None:
    cls = default_registry().message_class(MESSAGE_NAMES["booking"])
    corrupted: list[int] = []

    def chunks():  # type: ignore[no-untyped-def]
        for i, chunk in enumerate(
            generate_chunks("booking", events_per_s=1_000.0, total=3_500, seed=4, start=START)
        ):
            payloads, bad = corrupt(chunk.payloads, 0.01, seed=i, message_class=cls)
            corrupted.append(len(bad))
            yield replace(chunk, payloads=payloads)

    topic = _topic("bookings")
    report = produce(tansu_broker, topic, chunks(), progress=False, total=3_500)
    assert report.count == 3_500 and sum(corrupted) == 35
    records = _consume(tansu_broker, topic, 3_500)
    assert len(records) == 3_500 and len({m.key() for m in records}) == 3_500
    undecodable = 0
    for m in records:
        try:
            cls.FromString(m.value())
        except Exception:  # noqa: BLE001 - any parse failure counts
            undecodable += 1
    assert undecodable == 35


def _stopped(pid: int) -> bool:
    """Return True when every thread of process ``pid`` is stopped (a SIGSTOP has taken effect)."""
    tasks = Path(f"/proc/{pid}/task")
    return all("State:\tT" in (t / "status").read_text() for t in tasks.iterdir())


@pytest.mark.integration
def test_delivery_errors_are_raised_with_a_report(tmp_path: Path) -> None:
    """A broker that stops answering after the first chunk, with the default (idempotent) producer: the rest time
    out and are reported as not acknowledged, never as delivered. A request in flight when the broker froze is
    written when it resumes: "not delivered" would be false, so the error says they may be on the topic; every
    event counted as delivered is there, once."""
    import os
    import signal

    from job.stack.broker import TansuBroker
    from job.stack.ports import free_port
    from tests.services import _serving

    topic = _topic("timeouts")
    with _serving(lambda: TansuBroker(tmp_path, free_port())) as server:
        pid = server.process.pid
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
                    server.bootstrap,
                    topic,
                    chunks(),
                    progress=False,
                    total=5_000,
                    producer_config={"message.timeout.ms": 5_000},
                    ack_every_s=3600,
                )
        finally:
            os.kill(pid, signal.SIGCONT)
        records = _consume(server.bootstrap, topic, 5_000, timeout_s=10)
    error = info.value
    assert error.message == (
        f"4,000 of 5,000 events sent were not acknowledged by topic '{topic}': _MSG_TIMED_OUT: Local: Message "
        "timed out"
    )
    assert error.hint == (
        "4,000 of them timed out or were still in flight: the broker may have written them, so some may be on the "
        "topic (sending them again is at-least-once)"
    )
    report = error.report
    assert report is not None and (report.count, report.errors) == (1_000, 4_000)
    keys = [m.key() for m in records]
    assert len(set(keys)) == len(keys)  # none twice
    assert set(first.keys) <= set(keys)  # each event counted as delivered is on the topic
    assert 1_000 < len(keys) <= 5_000  # and some the broker never acknowledged are there too


@pytest.mark.integration
def test_unreachable_broker_fails_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    started = time.monotonic()
    with pytest.raises(ProduceError, match="cannot reach the Kafka broker") as info:
        produce(f"127.0.0.1:{port}", "nowhere", _batch("api_log", 10), progress=False)
    assert (
        time.monotonic() - started < 20.0
    )  # fails at its first look-up, not after librdkafka's 60-s timeouts
    assert info.value.title == "Produce error" and info.value.hint


# ---- topics ---------------------------------------------------------------------------------------


@pytest.mark.integration
def test_ensure_topic_creates_once_with_infinite_retention(broker) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("created")
    assert ensure_topic(broker.bootstrap, topic, 3) is True
    assert ensure_topic(broker.bootstrap, topic, 3) is False
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(timeout=10).topics[topic].partitions) == 3
    configs = admin.describe_configs([ConfigResource("topic", topic)])
    (future,) = configs.values()
    assert future.result(10)["retention.ms"].value == "-1"


def test_token_bucket_paces_by_its_clock() -> None:
    now = [0.0]
    bucket = TokenBucket(100.0, burst=10, clock=lambda: now[0])
    assert bucket.delay(10) == pytest.approx(0.1)  # starts empty
    now[0] = 0.1
    assert bucket.delay(10) == 0.0
    bucket.take(10)
    now[0] = 10.0  # a long pause refills no more than a burst
    assert bucket.delay(10) == 0.0
    bucket.take(10)
    assert bucket.delay(5) == pytest.approx(0.05)
    with pytest.raises(ProduceError):
        TokenBucket(0.0, burst=1)


# ---- daggers produce -----------------------------------------------------------------------------


def _cli() -> typer.Typer:
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:
        """Keep ``produce`` a sub-command, as in the real app."""

    return app


@pytest.mark.integration
def test_cli_count_sends_that_many(tansu_broker: str) -> None:
    topic = _topic("cli-count")
    result = CliRunner().invoke(
        _cli(),
        [
            "produce",
            "--stream",
            "booking",
            "--topic",
            topic,
            "--bootstrap",
            tansu_broker,
            "--count",
            "1500",
            "--cities",
            "Jakarta,Bandung",
            "--late-fraction",
            "0.02",
            "--out-of-order",
            "0.05",
            "--partitions",
            "2",
            "--seed",
            "9",
            "--start",
            "2025-03-14T08:00:00Z",
            "--corrupt",
            "0.01",
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"produced 1,500 events to '{topic}'" in result.stdout
    assert "30 late" in result.stdout and "15 corrupt" in result.stdout
    records = _consume(tansu_broker, topic, 1_500)
    assert len(records) == 1_500 and {m.partition() for m in records} == {0, 1}
    start_ms = int(START.timestamp() * 1000)
    on_time = [m.timestamp()[1] for m in records if m.timestamp()[1] >= start_ms]
    assert len(on_time) == 1_500 - 30 and max(on_time) < start_ms + 60_000  # 60 s span by default


@pytest.mark.integration
def test_cli_duration_follows_the_wall_clock(tansu_broker: str) -> None:
    topic = _topic("cli-live")
    before_ms = time.time() * 1000
    result = CliRunner().invoke(
        _cli(),
        [
            "produce",
            "-s",
            "driver_location",
            "-t",
            topic,
            "--bootstrap",
            tansu_broker,
            "--rate",
            "500",
            "--duration",
            "2",
            "--no-progress",
        ],
    )
    after_ms = time.time() * 1000
    assert result.exit_code == 0, result.output
    assert "produced 1,000 events" in result.stdout
    stamps = [m.timestamp()[1] for m in _consume(tansu_broker, topic, 1_000)]
    assert len(stamps) == 1_000
    assert min(stamps) >= before_ms - 1_000 and max(stamps) <= after_ms + 1_000
    assert after_ms - before_ms >= 1_700  # paced, not dumped at once


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--count", "5", "--duration", "3"],
            "Invalid produce options: give --count or --duration, not both",
        ),
        (["--count", "5", "--cities", "Atlantis"], "unknown city 'Atlantis'"),
        (["--count", "5", "--start", "yesterday"], "--start must be 'now' or an ISO 8601 time"),
        (["--count", "5", "--late-by", "9,1"], "--late-by must be MIN,MAX"),
        (["--count", "5", "--bootstrap", "127.0.0.1:1"], "Produce error: cannot reach the Kafka broker"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(_cli(), ["produce", "--stream", "api_log", "--topic", "t", *args])
    assert result.exit_code == 2
    assert message in result.stderr.splitlines()[0]
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_default_bootstrap_reads_the_stack_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGGERS_HOME", str(tmp_path))
    assert default_bootstrap() == DEFAULT_BOOTSTRAP  # no stack.json
    (tmp_path / "stack.json").write_text(json.dumps({"version": 1, "influxdb": {"address": "http://x"}}))
    assert default_bootstrap() == DEFAULT_BOOTSTRAP  # no broker yet
    (tmp_path / "stack.json").write_text(
        json.dumps({"broker": {"kind": "tansu", "address": "127.0.0.1:19999"}})
    )
    assert default_bootstrap() == "127.0.0.1:19999"
    (tmp_path / "stack.json").write_text(json.dumps({"broker.address": "127.0.0.1:18888"}))
    assert default_bootstrap() == "127.0.0.1:18888"
    (tmp_path / "stack.json").write_text("{not json")
    assert default_bootstrap() == DEFAULT_BOOTSTRAP
    other = tmp_path / "other"
    other.mkdir()
    (other / "stack.json").write_text(json.dumps({"broker": {"address": "10.0.0.1:9092"}}))
    assert default_bootstrap(other) == "10.0.0.1:9092"


def test_plans_parse_and_validate() -> None:
    plan = make_plan(count=250_000, duration=None, rate=None, span=None)
    assert (plan.total, plan.send_rate, plan.events_per_s) == (250_000, None, pytest.approx(250_000 / 60))
    assert plan.chunk_s == pytest.approx(20.0)  # 3 chunks of <= 100k events
    assert make_plan(count=1_000, duration=None, rate=100.0, span=None).events_per_s == pytest.approx(100.0)
    live = make_plan(count=None, duration=30.0, rate=2_000.0, span=None)
    assert (live.total, live.events_per_s, live.chunk_s, live.send_rate) == (60_000, 2_000.0, 1.0, 2_000.0)
    endless = make_plan(count=None, duration=None, rate=None, span=None)
    assert endless.total is None and endless.send_rate == 5_000.0
    for bad in ({"count": 0}, {"rate": -1.0}, {"duration": 5.0, "span": 3.0}):
        with pytest.raises(UsageError):
            make_plan(**{"count": None, "duration": None, "rate": None, "span": None, **bad})  # type: ignore[arg-type]
    assert parse_start("2025-03-14T08:00:00Z") == START
    assert parse_start("2025-03-14T15:00:00+07:00") == START
    assert parse_start("2025-03-14 08:00") == START
    assert abs((parse_start("now") - datetime.now(UTC)).total_seconds()) < 5
    assert parse_late_by("60,300") == (60.0, 300.0) and parse_late_by("45") == (45.0, 45.0)
    for bad_late in ("a,b", "5,1", "-1,3", "1,2,3"):
        with pytest.raises(UsageError):
            parse_late_by(bad_late)


@pytest.mark.integration
def test_a_deadline_stops_the_sending_in_wall_time_and_says_how_many_of_how_many(tansu_broker: str) -> None:
    """10,000 events asked at 1,000/s with a 2-s limit: the sending stops at the limit, whatever is left, and
    the report says how many of how many were sent; every event it counts is on the topic."""
    topic = _topic("deadline")
    chunks = generate_chunks("api_log", events_per_s=1_000.0, total=10_000, seed=5, start=START, chunk_s=1.0)
    chunks = itertools.chain([next(chunks)], chunks)  # the first chunk builds the world: seconds on its own
    report = produce(
        tansu_broker, topic, chunks, rate=1_000.0, progress=False, total=10_000, deadline_s=2.0, partitions=2
    )
    assert report.asked == 10_000 and report.deadline_s == 2.0
    assert 0 < report.count < 10_000 and report.errors == 0
    assert report.summary().endswith(f"; stopped at the 2-s limit: {report.count:,} of 10,000 asked sent")
    assert len(_consume(tansu_broker, topic, report.count)) == report.count


@pytest.mark.integration
def test_a_deadline_that_is_not_reached_changes_nothing(tansu_broker: str) -> None:
    report = produce(
        tansu_broker, _topic("deadline"), _batch("api_log", 500), progress=False, deadline_s=60.0
    )
    assert report.count == 500 and report.asked is None and report.deadline_s is None
    assert "limit" not in report.summary()
