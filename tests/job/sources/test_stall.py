"""A range read that stops moving: the watch's rule, and the reader's recovery against the real brokers
when its consumer is sent to the wrong offset (behind the range, or past the partition's end)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from job.errors import SourceError
from job.produce.generator import generate
from job.produce.producer import produce
from job.schema import default_registry
from job.sources import read as kread
from job.sources.config import OffsetRange, SourceConfig
from job.sources.read import read_range
from job.sources.stall import (
    RESEEK_AFTER_S,
    RESEEK_OUT_OF_RANGE_S,
    ClientLog,
    StallWatch,
    Starvation,
)
from job.stack.ports import free_port
from tests.helpers import unique

# ---- the watch -------------------------------------------------------------------------------


def test_a_quiet_read_is_assigned_again_every_reseek_period_until_the_timeout() -> None:
    assert StallWatch(timeout_s=60, started=0.0).reseek_due(RESEEK_AFTER_S)
    w = StallWatch(timeout_s=12, reseek_after_s=5, started=100.0)
    assert not w.reseek_due(104.9)
    assert w.reseek_due(105.0)
    w.reseeked(105.0)
    assert not w.reseek_due(109.9) and w.reseek_due(110.0)
    w.reseeked(110.0)
    assert not w.timed_out(112.0) and w.timed_out(112.1)
    assert not w.reseek_due(115.0)  # past the timeout the reader raises instead
    assert w.describe() == "2 re-seeks" and StallWatch(timeout_s=1).describe() == "no answer at all"


def test_out_of_range_or_records_from_below_make_the_reseek_urgent() -> None:
    w = StallWatch(timeout_s=60, started=0.0)
    w.was_out_of_range()
    assert w.reseek_due(RESEEK_OUT_OF_RANGE_S) and not w.reseek_due(RESEEK_OUT_OF_RANGE_S - 0.01)
    w.reseeked(0.5)
    assert not w.reseek_due(1.5)  # urgent only once per answer
    w.went_back(10_000)
    assert w.reseek_due(1.0)
    assert w.describe() == (
        "1 re-seek, 10000 records below the next offset (the consumer went back), "
        "1 'offset out of range' answers"
    )  # what the reader says when it reads again
    w.moved(2.0)
    assert not w.urgent and w.reseeks == 0 and not w.reseek_due(2.5)


def test_time_without_cpu_is_not_counted_against_the_read_timeout() -> None:
    w = StallWatch(timeout_s=60, started=0.0, lost_at_progress=5.0)  # 5 s lost before this read began
    w.starved(5.0 + 30.0)  # then 30 s of the stall's 80 the process was not scheduled
    assert w.served_s(80.0) == 50.0 and not w.timed_out(80.0)
    assert w.served_s(90.0) == 60.0 and not w.timed_out(90.0) and w.timed_out(90.1)
    assert w.describe() == "no answer at all, 30 s more without CPU, not counted"
    w.moved(91.0, lost=35.0)  # a record: the next stall counts from here, with nothing lost yet
    assert w.lost_s == 0.0 and w.served_s(151.0) == 60.0 and w.timed_out(151.1)
    w.starved(200.0)  # more lost than the stall is long (the heartbeat's lateness spans the read's start)
    assert w.served_s(100.0) == 0.0


def test_a_broker_that_returns_nothing_on_a_machine_with_cpu_to_spare_times_out_on_the_wall_clock() -> None:
    w = StallWatch(timeout_s=60, started=0.0, lost_at_progress=2.0)
    w.starved(2.4)  # the heartbeat woke on time but for 0.4 s of slack in all
    assert w.timed_out(60.5) and w.describe() == "no answer at all"


def test_the_heartbeat_counts_only_its_lateness_past_the_slack() -> None:
    beats = Starvation(tick_s=0.1, slack_s=0.05, clock=lambda: 0.0, thread=False)
    assert beats.beat(0.1) == 0.0 and beats.beat(0.24) == 0.0  # on time, then 40 ms late: within the slack
    assert beats.beat(3.34) == pytest.approx(2.95)  # asleep for 3 s: what was not slack nor tick is lost
    assert beats.beat(3.44) == 0.0
    assert beats.lost() == pytest.approx(2.95)


def test_the_heartbeat_thread_sees_a_process_that_was_stopped() -> None:
    import os
    import signal
    import subprocess
    import sys

    code = (
        "import sys,time; from job.sources.stall import Starvation\n"
        "s = Starvation(); s.lost(); print('ready', flush=True); sys.stdin.readline(); time.sleep(0.3); "
        "print(round(s.lost(), 1), flush=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGSTOP)  # no CPU at all for 2 s: what a loaded machine does in small doses
        stopped_at = time.monotonic()
        time.sleep(2.0)
        os.kill(proc.pid, signal.SIGCONT)
        stopped = time.monotonic() - stopped_at
        proc.stdin.write("\n")
        proc.stdin.flush()
        lost = float(proc.stdout.readline())
    finally:
        proc.kill()
        proc.wait()
    # all of the stop (the heartbeat's resolution is 0.5 s); a busy machine may starve it longer still
    assert stopped - 0.5 <= lost <= stopped + 10.0, (lost, stopped)


def test_the_client_log_keeps_the_last_warnings_and_errors_only() -> None:
    said = ClientLog()
    assert said.said() == "the Kafka client logged nothing"
    logger = said.logger("t")
    logger.info("not kept")
    for i in range(7):
        logger.warning("FAIL %d", i)
    said.error("all brokers down")
    assert said.said() == "FAIL 3; FAIL 4; FAIL 5; FAIL 6; all brokers down"
    assert (
        not logger.propagate and logger.parent is None
    )  # not in logging's registry: it goes with its consumer
    assert said.logger("t") is not logger


# ---- against the brokers -----------------------------------------------------------------------


class _MisplacedConsumer:
    """The reader's real consumer, whose first assignment goes to ``wrong`` instead of the asked offset:
    the broker-side faults seen under load (a consumer that went back, an offset called out of range)."""

    def __init__(self, real: Any, wrong: int) -> None:
        self.real, self.wrong, self.assigns = real, wrong, []

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigns.append(tps[0].offset)
        if len(self.assigns) == 1:
            tps = [TopicPartition(tps[0].topic, tps[0].partition, self.wrong)]
        self.real.assign(tps)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _cfg(bootstrap: str, topic: str, timeout: float = 60.0) -> SourceConfig:
    return SourceConfig(
        bootstrap_servers=bootstrap,
        topics=[topic],
        proto_class="daggers.events.BookingLog",
        descriptor_set_b64=default_registry().to_b64(),
        columns=["order_number"],
        read_timeout_s=timeout,
    )


def _misplace(cfg: SourceConfig, wrong: int) -> _MisplacedConsumer:
    real, said = kread._executor_consumer(cfg, cfg.bootstrap_servers)
    fake = _MisplacedConsumer(real, wrong)
    kread._CONSUMERS[kread._consumer_key(cfg, cfg.bootstrap_servers)] = (fake, said)  # type: ignore[assignment]
    return fake


def _bookings(broker: Any, topic: str, n: int) -> list[str]:
    broker.create_topic(topic, partitions=1)
    events = generate("booking", n, seed=11, start=datetime(2026, 3, 2, 15, 0, tzinfo=UTC), duration_s=10)
    produce(broker.bootstrap, topic, [events], progress=False)
    return list(events.table.column("order_number").to_pylist())


@pytest.mark.integration
@pytest.mark.parametrize("wrong", ["behind", "past_the_end"])
def test_a_range_read_from_the_wrong_offset_is_assigned_again_and_reads_exactly_its_records(
    broker, wrong: str, capfd: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    topic = unique(f"stall-{wrong}")
    numbers = _bookings(broker, topic, 3_000)
    cfg = _cfg(broker.bootstrap, topic)
    fake = _misplace(cfg, 0 if wrong == "behind" else 1_000_000)
    try:
        started = time.monotonic()
        batches = list(read_range(cfg, OffsetRange(topic, 0, 2_000, 2_500)))
        took = time.monotonic() - started
        cached = [c for c, _ in kread._CONSUMERS.values()]
    finally:
        kread.reset_consumers()
    assert [n for b in batches for n in b.column("order_number").to_pylist()] == numbers[2_000:2_500]
    if wrong == "behind":
        # The 2,000 records below the range come in and are passed over: no stall, no new consumer
        assert fake.assigns[0] == 2_000 and len(cached) == 1 and cached[0] is fake
        assert "no records from" not in capfd.readouterr().err
        return
    # asked for the range's start; then a new consumer (new connections) took over from there
    assert fake.assigns == [2_000] and len(cached) == 1 and cached[0] is not fake
    err = capfd.readouterr().err
    assert f"no records from {topic}[0] at offset 2000 for " in err
    assert f"{topic}[0] reads again after " in err and "(range 2000..2500; 1 re-seek" in err
    # stamped as the runner's lines are, so a stall can be set against the batches around it
    assert re.search(rf"^\d\d:\d\d:\d\d daggers: no records from {re.escape(topic)}\[0\]", err, re.M), err
    if broker.kind == "tansu":  # tansu answers a fetch past the end with nothing: the quiet re-seek, whose
        # new consumer waits longer for its fetches (what cures tansu's empty answers: issue 36)
        assert took >= RESEEK_AFTER_S  # (how much later, on a busy machine, is not this test's business)
        assert "on a new consumer with fetch.wait.max.ms 500" in err
    else:  # noida says "out of range" (auto.offset.reset=error): the urgent one
        assert (
            "'offset out of range' answers" in err
        )  # re-seeks after RESEEK_OUT_OF_RANGE_S, not RESEEK_AFTER_S


@pytest.mark.integration
def test_a_range_that_never_comes_names_its_reseeks_and_the_clients_words() -> None:
    cfg = _cfg(f"127.0.0.1:{free_port()}", "nowhere", timeout=RESEEK_AFTER_S * 3 + 1)
    try:
        with pytest.raises(SourceError) as exc:
            list(read_range(cfg, OffsetRange("nowhere", 0, 0, 10)))
    finally:
        kread.reset_consumers()
    text = str(exc.value)
    assert re.search(
        rf"no records from nowhere\[0\] at offset 0 for {cfg.read_timeout_s:.0f} s "
        r"\(range 0\.\.10; [23] re-seeks; the client said: ",
        text,
    ), text
    assert "the client said: " in text and "Connection refused" in text


# ---- the produce pattern of issue 36: a backlog in large batches, then a live trickle ---------------


@pytest.mark.integration
@pytest.mark.parametrize("wait_ms", ["default", "0"])
def test_micro_batches_over_a_backlog_then_live_records_read_every_record_once(
    broker, wait_ms: str, capfd: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    """5,000 driver pings at once (large record batches), then 1,500 at 1,000/s (the live producer's small
    ones) while the stream reader plans micro-batches (at most 2,000 rows, ranges split every 1,300: starts
    in the middle of record batches) and reads them: exactly the records sent, once each. With
    ``fetch.wait.max.ms`` 0, tansu gives up listing the partition's batches at once and answers every fetch
    empty (what 2 ms met past some thousands of batches, or on a busy machine: issue 36): the reader must
    become more patient and read on, not fail (on the code before, this read failed after its timeout)."""
    import threading

    from pyspark.sql.streaming.datasource import ReadMaxRows

    from job.sources.kafka import KafkaStreamReader

    topic = unique(f"stall-live-{wait_ms}")
    broker.create_topic(topic, partitions=2)
    start = datetime(2026, 3, 2, 15, 0, tzinfo=UTC)
    backlog = generate("driver_location", 5_000, seed=3, start=start, duration_s=300)
    live = generate("driver_location", 1_500, seed=4, start=start.replace(minute=5), duration_s=2)
    produce(broker.bootstrap, topic, [backlog], progress=False)
    feeder = threading.Thread(
        target=produce, args=(broker.bootstrap, topic, [live]), kwargs={"rate": 1_000, "progress": False}
    )
    feeder.start()
    cfg = SourceConfig(
        bootstrap_servers=broker.bootstrap,
        topics=[topic],
        proto_class="daggers.events.DriverLocationPing",
        descriptor_set_b64=default_registry().to_b64(),
        columns=["driver_id"],
        read_timeout_s=30,
        split_records=1_300,
        pack_records=1_300,
        consumer_config={} if wait_ms == "default" else {"fetch.wait.max.ms": wait_ms},
    )
    reader = KafkaStreamReader(cfg)
    read: list[int] = []
    try:
        offsets = reader.initialOffset()
        deadline = time.monotonic() + 120
        while len(read) < 6_500 and time.monotonic() < deadline:
            end = reader.latestOffset(offsets, ReadMaxRows(2_000))
            for task in reader.partitions(offsets, end):
                read += [v for b in reader.read(task) for v in b.column("driver_id").to_pylist()]
            offsets = end
        feeder.join()
        end = reader.latestOffset(offsets, ReadMaxRows(2_000))
        patience = kread.fetch_wait_ms(cfg, kread.patience(cfg, broker.bootstrap, topic))
    finally:
        reader.stop()
        kread.reset_consumers()
    assert end == offsets and sum(end[topic].values()) == 6_500  # nothing left unread
    assert len(read) == 6_500
    assert sorted(read) == sorted(
        [*backlog.table.column("driver_id").to_pylist(), *live.table.column("driver_id").to_pylist()]
    )
    err = capfd.readouterr().err
    if wait_ms == "0" and broker.kind == "tansu":
        assert patience == 500 and "on a new consumer with fetch.wait.max.ms 500" in err
    else:  # noida-db does not hold fetches (nor give up on them): nothing to cure
        assert patience == (2 if wait_ms == "default" else 0) and "no records from" not in err


def test_each_quiet_stall_makes_the_workers_reads_of_that_topic_more_patient_and_no_others() -> None:
    plain = _cfg("127.0.0.1:9", "t")
    slow = SourceConfig(**{**plain.__dict__, "consumer_config": {"fetch.wait.max.ms": "800"}})
    try:
        assert [kread.fetch_wait_ms(plain, level) for level in range(4)] == [2, 500, 5000, 5000]
        assert [kread.fetch_wait_ms(slow, level) for level in range(3)] == [800, 800, 5000]  # never less
        first, _ = kread._fresh_consumer(
            plain, "127.0.0.1:9", "heavy", patient=True
        )  # the fast one is replaced
        fast, _ = kread._executor_consumer(plain, "127.0.0.1:9", 0)
        for _ in range(2):
            patient, _ = kread._fresh_consumer(plain, "127.0.0.1:9", "heavy", patient=True)
        kread._fresh_consumer(
            plain, "127.0.0.1:9", "heavy", patient=False
        )  # "out of range": no more patience
        assert (
            kread.patience(plain, "127.0.0.1:9", "heavy") == 2
            and kread.patience(slow, "127.0.0.1:9", "heavy") == 0
        )
        # a light topic read by the same worker keeps the fast consumer: its range ends never wait behind
        # the fetches a patient consumer lets the broker hold
        assert kread.patience(plain, "127.0.0.1:9", "light") == 0
        assert kread._executor_consumer(plain, "127.0.0.1:9", 0)[0] is fast
        assert len({id(first), id(fast), id(patient)}) == 3
    finally:
        kread.reset_consumers()
    assert kread.patience(plain, "127.0.0.1:9", "heavy") == 0


def test_a_forked_python_worker_gets_a_heartbeat_of_its_own() -> None:
    """Spark forks its Python workers: the parent's heartbeat thread does not run in the child."""
    import os

    from job.sources.stall import starvation

    parent = starvation()
    parent.lost()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new heartbeat, started by its first question
        child = starvation()
        os.write(write, b"new" if child is not parent and child._thread is None else b"old")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 3) == b"new" and starvation() is parent
