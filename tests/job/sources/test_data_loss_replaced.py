"""A broker killed -9 and started again while the dagger was not reading, whose new log then grew past the
checkpoint's position: the offsets alone look right, but the records below the position are new ones. The
record the stream read last is fetched again at the query's start: another one there is data loss (the stream
fails naming the partition), and with ``fail_on_data_loss: false`` every record of the new log is read. Real
brokers of the test's own: tansu in memory, noida-db started again on a new data folder (its disk was lost),
both come back empty; noida-db restarted on its own folder keeps its log, which is no loss."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from pathlib import Path

import pytest
from pyspark.sql.datasource import ReadAllAvailable

from job.sources import log_identity
from job.sources import read as kread
from job.sources.config import OffsetRange
from job.sources.data_loss import DataLossError
from job.sources.kafka import KafkaStreamReader
from job.sources.read import read_range
from job.stack.broker import Broker, make_broker
from job.stack.ports import free_port
from tests.helpers import unique, wait_until
from tests.job.sources.test_data_loss_restart import _end, _send
from tests.job.sources.test_stall import _cfg

pytestmark = pytest.mark.integration

POSITION = 100  # the dagger read the 100 records of the old log
NEW = 140  # written to the new log before the dagger reads again: more than the position


def _brokers(kind: str, tmp_path: Path, *, keeps_log: bool = False) -> tuple[Broker, Broker, str]:
    """(a broker, the one started again on its port: on a new folder, so it comes back empty, or with
    ``keeps_log`` on its own folder; the checkpoint's data-loss folder of the stream)."""
    port = free_port()
    broker = make_broker(kind, tmp_path / "broker", port)  # type: ignore[arg-type]
    again = make_broker(kind, tmp_path / ("broker" if keeps_log else "again"), port)  # type: ignore[arg-type]
    return broker, again, str(tmp_path / "checkpoint" / "data-loss" / "bookings")


@pytest.mark.parametrize("fail", [True, False])
@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_a_new_log_past_the_position_is_data_loss(
    kind: str, fail: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker, again, loss_dir = _brokers(kind, tmp_path)
    topic = unique("replaced-log")
    at = {topic: {"0": POSITION}}
    broker.start()
    try:
        broker.create_topic(topic, 1)
        old = _send(broker.bootstrap, topic, POSITION, seed=1)
        cfg = dataclasses.replace(_cfg(broker.bootstrap, topic), loss_dir=loss_dir, fail_on_data_loss=fail)
        reading = KafkaStreamReader(cfg)  # the query's start at the position: the last record read is kept
        try:
            assert reading.latestOffset(at, ReadAllAvailable()) == at
        finally:
            reading.stop()
        kept = log_identity.load(loss_dir, "primary")
        assert [(k, s.offset) for k, s in kept.items()] == [((topic, "0"), POSITION - 1)]

        assert broker.process.pid is not None
        os.killpg(broker.process.pid, signal.SIGKILL)
        wait_until("the broker to die", lambda: not broker.process.alive(), 30)
        again.start()
        again.create_topic(topic, 1)
        held = _end(again.bootstrap, topic)
        assert held == 0
        new = _send(again.bootstrap, topic, NEW, seed=2)
        assert _end(again.bootstrap, topic) == held + NEW > POSITION  # past the position: offsets look right

        caplog.set_level(logging.WARNING, logger="daggers.source.data_loss")
        restarted = KafkaStreamReader(dataclasses.replace(cfg, bootstrap_servers=again.bootstrap))
        try:
            if fail:
                with pytest.raises(DataLossError) as caught:
                    restarted.latestOffset(at, ReadAllAvailable())
                assert caught.value.title == "Data loss"
                assert caught.value.message == (
                    f"{topic}[0]: the record at offset 99 is not the one the checkpoint read there: the broker's "
                    "log was replaced (it came back empty, or the topic was recreated) and its new log has "
                    f"passed the checkpoint's position 100 (its end is {held + NEW})"
                )
                assert caught.value.hint is not None
                assert caught.value.hint.startswith("to read on from offset 0, the partition's first offset")
                return
            moved = restarted.latestOffset(at, ReadAllAvailable())
            assert moved == {topic: {"0": 0}}  # a batch that reads nothing: the next reads the new log
            assert restarted.latestOffset(moved, ReadAllAvailable()) == {topic: {"0": held + NEW}}
        finally:
            restarted.stop()
        try:
            batches = list(read_range(cfg, OffsetRange(topic, 0, 0, held + NEW)))
        finally:
            kread.reset_consumers()
        read = [n for b in batches for n in b.column("order_number").to_pylist()]
        assert len(read) == held + NEW
        assert read == old[:held] + new
        assert (
            f"{topic}[0]: the record at offset 99 is not the one the checkpoint read there: the broker's log was "
            f"replaced (it came back empty, or the topic was recreated) and its new log has passed the "
            f"checkpoint's position 100 (its end is {held + NEW}); reading on from offset 0, the partition's "
            f"first offset: the {held + NEW} records of the new log (offsets 0..{held + NEW - 1}) are read; the "
            "records the checkpoint counted at offsets 0..99 are gone"
        ) in caplog.text
    finally:
        again.stop()
        broker.stop()


@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_a_running_stream_checks_the_log_after_an_outage(kind: str, tmp_path: Path) -> None:
    """The same query reads on: the broker is killed and comes back while it runs; the first batch planned
    after the outage is a gap, and the new log, past the position, is read from its first offset."""
    broker, again, loss_dir = _brokers(kind, tmp_path)
    topic = unique("replaced-live")
    broker.start()
    try:
        broker.create_topic(topic, 1)
        _send(broker.bootstrap, topic, POSITION, seed=1)
        cfg = dataclasses.replace(_cfg(broker.bootstrap, topic), loss_dir=loss_dir, fail_on_data_loss=False)
        reader = KafkaStreamReader(cfg)
        try:
            at = reader.latestOffset({topic: {"0": 0}}, ReadAllAvailable())
            assert at == {topic: {"0": POSITION}}

            def kept() -> bool:  # the next trigger keeps the last record the batch reads
                assert reader.latestOffset(at, ReadAllAvailable()) == at
                return [s.offset for s in log_identity.load(loss_dir, "primary").values()] == [POSITION - 1]

            wait_until("the last record read to be kept", kept, 30, every_s=0.2)
            assert broker.process.pid is not None
            os.killpg(broker.process.pid, signal.SIGKILL)
            wait_until("the broker to die", lambda: not broker.process.alive(), 30)
            assert reader.latestOffset(at, ReadAllAvailable()) == at  # the outage: nothing planned
            again.start()
            again.create_topic(topic, 1)
            held = _end(again.bootstrap, topic)
            assert held == 0
            _send(again.bootstrap, topic, NEW, seed=2)
            moved = reader.latestOffset(at, ReadAllAvailable())
            assert moved == {topic: {"0": 0}}
            assert reader.latestOffset(moved, ReadAllAvailable()) == {topic: {"0": held + NEW}}
        finally:
            reader.stop()
    finally:
        again.stop()
        broker.stop()


def test_a_broker_that_kept_its_log_is_no_loss(tmp_path: Path) -> None:
    """noida-db stopped and started on its own data folder keeps its log: the records below the position
    are the ones read, and the stream reads on from the position."""
    broker, again, loss_dir = _brokers("noida", tmp_path, keeps_log=True)
    topic = unique("kept-log")
    at = {topic: {"0": POSITION}}
    broker.start()
    try:
        broker.create_topic(topic, 1)
        _send(broker.bootstrap, topic, POSITION, seed=1)
        cfg = dataclasses.replace(_cfg(broker.bootstrap, topic), loss_dir=loss_dir)
        reading = KafkaStreamReader(cfg)
        try:
            assert reading.latestOffset(at, ReadAllAvailable()) == at
        finally:
            reading.stop()
        broker.stop()
        again.start()
        assert _end(again.bootstrap, topic) == POSITION
        _send(again.bootstrap, topic, NEW, seed=2)
        restarted = KafkaStreamReader(cfg)
        try:
            assert restarted.latestOffset(at, ReadAllAvailable()) == {topic: {"0": POSITION + NEW}}
        finally:
            restarted.stop()
    finally:
        again.stop()
        broker.stop()


def test_a_refresh_between_gaps_does_not_hold_up_the_plan_and_is_acted_on_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between gaps the kept record is checked in a thread of its own (tansu takes seconds to find a record
    millions back): the plan goes on while the check waits, and the next plan acts on what it found."""
    import threading
    import time

    from confluent_kafka import Consumer, TopicPartition

    from job.sources import offsets as kofs

    broker, again, loss_dir = _brokers("tansu", tmp_path)
    topic = unique("replaced-refresh")
    at = {topic: {"0": POSITION}}
    broker.start()
    consumer = None
    try:
        broker.create_topic(topic, 1)
        _send(broker.bootstrap, topic, POSITION, seed=1)
        watch = log_identity.LogWatch(loss_dir, fail=True)
        consumer = kofs.driver_consumer(broker.bootstrap)
        assert watch.check(consumer, "primary", at, at) is at  # the query's start: checked, the last kept
        watch.planned("primary", at)
        assert [s.offset for s in log_identity.load(loss_dir, "primary").values()] == [POSITION - 1]

        assert broker.process.pid is not None
        os.killpg(broker.process.pid, signal.SIGKILL)
        wait_until("the broker to die", lambda: not broker.process.alive(), 30)
        again.start()
        again.create_topic(topic, 1)
        _send(again.bootstrap, topic, NEW, seed=2)
        end = {topic: {"0": NEW}}

        monkeypatch.setattr(log_identity, "REFRESH_S", 0.0)
        go, asked = threading.Event(), threading.Event()

        def connect() -> Consumer:
            asked.set()
            assert go.wait(60)
            return kofs.driver_consumer(again.bootstrap)

        began = time.monotonic()
        assert watch.check(consumer, "primary", at, end, connect) is at  # no gap: the plan goes on
        assert time.monotonic() - began < 5 and asked.wait(5)
        assert watch.check(consumer, "primary", at, end, connect) is at  # still checking: no second check
        go.set()
        job = watch._refresh
        assert job is not None
        job.result(60)
        with pytest.raises(
            DataLossError, match=r"the record at offset 99 is not the one the checkpoint read"
        ):
            watch.check(consumer, "primary", at, end, connect)
        assert kofs.beginning_offsets(consumer, [TopicPartition(topic, 0)]) == {topic: {"0": 0}}
    finally:
        if consumer is not None:
            consumer.close()
        again.stop()
        broker.stop()
