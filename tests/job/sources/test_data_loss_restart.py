"""A broker killed -9 and started again (tansu: in memory, it comes back empty; noida-db: it keeps what it had
written) reuses offsets the checkpoint has already read. The stream fails naming the loss, its hint names the
offset where the new data begins (the partition's first offset), and once ``fail_on_data_loss: false`` is set
the source reads on from there: every record written after the restart is read, those written before the
loss was seen too. Real brokers of the test's own."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql.datasource import ReadAllAvailable

from job.produce.generator import generate
from job.produce.producer import produce
from job.sources import offsets as kofs
from job.sources import read as kread
from job.sources.config import OffsetRange
from job.sources.data_loss import DataLossError
from job.sources.kafka import KafkaStreamReader
from job.sources.read import read_range
from job.stack.broker import make_broker
from job.stack.ports import free_port
from tests.helpers import unique, wait_until
from tests.job.sources.test_stall import _cfg

pytestmark = pytest.mark.integration

CHECKPOINT = 150  # the checkpoint read 150 records; the broker keeps at most the first 100


def _send(bootstrap: str, topic: str, n: int, seed: int) -> list[str]:
    events = generate("booking", n, seed=seed, start=datetime(2026, 3, 2, 15, 0, tzinfo=UTC), duration_s=10)
    produce(bootstrap, topic, [events], progress=False)
    return list(events.table.column("order_number").to_pylist())


def _end(bootstrap: str, topic: str) -> int:
    consumer = kofs.driver_consumer(bootstrap)
    try:
        return kofs.end_offsets(consumer, [kofs.TopicPartition(topic, 0)], timeout=10.0)[topic]["0"]
    finally:
        consumer.close()


def _plan(reader: KafkaStreamReader, topic: str, position: int) -> dict[str, dict[str, int]]:
    """The reader's next batch end from ``position``, once it is decided (a loss is believed only when seen
    several times in a row)."""
    start = {topic: {"0": position}}
    planned: list[dict[str, dict[str, int]]] = []

    def decided() -> bool:
        got = reader.latestOffset(start, ReadAllAvailable())
        if got != start:
            planned.append(got)
        return bool(planned)

    wait_until("the batch to be planned", decided, 60, every_s=0.2)
    return planned[0]


@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_after_a_restart_with_lost_records_every_record_written_since_is_read(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """40 records are written right after the restart, before the source sees the loss (it took ~3 s, and
    their offsets were skipped: the source read on from the partition's end at its first sight); 40 more once
    the stream has failed. With ``fail_on_data_loss: false`` the source reads on from the partition's first
    offset: all 80 are read (noida kept some of its records from before the loss: those come again)."""
    port = free_port()
    broker = make_broker(kind, tmp_path / "broker", port)  # type: ignore[arg-type]
    again = make_broker(kind, tmp_path / "broker", port)  # type: ignore[arg-type]
    topic = unique("restart-loss")
    loss_dir = str(tmp_path / "checkpoint" / "data-loss" / "bookings")
    broker.start()
    try:
        broker.create_topic(topic, 1)
        old = _send(broker.bootstrap, topic, 100, seed=1)
        assert broker.process.pid is not None
        os.killpg(broker.process.pid, signal.SIGKILL)
        wait_until("the broker to die", lambda: not broker.process.alive(), 30)
        again.start()
        again.create_topic(topic, 1)
        held = _end(again.bootstrap, topic)  # tansu: 0; noida: what it had written of the 100
        early = _send(again.bootstrap, topic, 40, seed=2)  # right after the restart, before the loss is seen
        cfg = dataclasses.replace(_cfg(again.bootstrap, topic), loss_dir=loss_dir)

        failing = KafkaStreamReader(cfg)
        try:
            with pytest.raises(DataLossError) as caught:
                _plan(failing, topic, CHECKPOINT)
        finally:
            failing.stop()
        assert caught.value.hint is not None
        assert caught.value.hint.startswith(
            "to read on from offset 0, the partition's first offset when the loss was first seen (every record "
            "written since the broker came back is read; any it kept from before, again), set "
            "`fail_on_data_loss: false`"
        )

        late = _send(again.bootstrap, topic, 40, seed=3)  # written while the dagger is failed, before the fix
        caplog.set_level(logging.WARNING, logger="daggers.source.data_loss")
        fixed = KafkaStreamReader(dataclasses.replace(cfg, fail_on_data_loss=False))
        try:
            assert _plan(fixed, topic, CHECKPOINT) == {topic: {"0": 0}}
            assert _plan(fixed, topic, 0) == {topic: {"0": held + 80}}
        finally:
            fixed.stop()
        try:
            batches = list(read_range(cfg, OffsetRange(topic, 0, 0, held + 80)))
        finally:
            kread.reset_consumers()
        assert [n for b in batches for n in b.column("order_number").to_pylist()] == old[:held] + early + late
        assert (
            f"{topic}[0]: the checkpoint's position {CHECKPOINT} is past the partition's end {held + 80}: the "
            "broker lost records or the topic was recreated; reading on from offset 0, where the new data began "
            "when the loss was first seen "
        ) in caplog.text
        assert (
            f": the {held + 80} records it holds from there (offsets 0..{held + 79}) are read, every one written "
            "since the broker came back (and any it kept from before, again); the records the checkpoint counted "
            f"at offsets 0..{CHECKPOINT - 1} are gone"
        ) in caplog.text
    finally:
        again.stop()
        broker.stop()
