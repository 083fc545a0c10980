"""A range whose records the broker no longer has (noida-db killed -9 lost its newest records; a topic made
again): the reader names the loss at once instead of waiting out its read timeout and crashing with "no
records"; with ``fail_on_data_loss: false`` it passes over what is gone, saying so. Real brokers."""

from __future__ import annotations

import dataclasses
import functools
import logging

import pytest

from job.sources import data_loss
from job.sources import read as kread
from job.sources.config import OffsetRange
from job.sources.data_loss import DataLossError
from job.sources.kafka import KafkaStreamReader
from job.sources.read import read_range
from job.sources.stall import StallWatch
from tests.helpers import unique
from tests.job.sources.test_data_loss_restart import _plan, _send
from tests.job.sources.test_stall import _bookings, _cfg

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _prompt_reseeks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-seek after 0.5 s without a record instead of 2.5 s. tansu answers a fetch past the partition's end
    with nothing (no "out of range"), so its reader sees the loss only on the look-ups its re-seeks start, and
    three in a row take ~10 s at the default. The loss is named the same way, sooner."""
    monkeypatch.setattr(kread, "StallWatch", functools.partial(StallWatch, reseek_after_s=0.5))


def test_a_range_past_the_partitions_end_fails_at_once_naming_the_loss(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("lost")
    _bookings(broker, topic, 100)
    cfg = _cfg(broker.bootstrap, topic, timeout=3_600.0)  # only the loss can end this read
    try:
        with pytest.raises(DataLossError) as caught:
            list(read_range(cfg, OffsetRange(topic, 0, 150, 200)))
    finally:
        kread.reset_consumers()
    assert caught.value.message == (
        f"{topic}[0]: the checkpoint's position 150 is past the partition's end 100 by 50 records: "
        "the broker lost records or the topic was recreated"
    )
    assert caught.value.hint is not None and "`fail_on_data_loss: false`" in caught.value.hint


def test_with_fail_on_data_loss_false_the_lost_rest_of_a_range_is_passed_over(broker, caplog) -> None:  # type: ignore[no-untyped-def]
    topic = unique("lost")
    numbers = _bookings(broker, topic, 100)
    cfg = dataclasses.replace(_cfg(broker.bootstrap, topic, timeout=3_600.0), fail_on_data_loss=False)
    caplog.set_level(logging.WARNING, logger="daggers.source.data_loss")
    try:
        batches = list(read_range(cfg, OffsetRange(topic, 0, 90, 200)))
    finally:
        kread.reset_consumers()
    assert [n for b in batches for n in b.column("order_number").to_pylist()] == numbers[90:100]
    assert (
        f"{topic}[0]: offsets 100..199 of a planned batch are past the partition's end 100: the broker lost "
        "records or the topic was recreated; passing over them"
    ) in caplog.text


def test_a_loss_a_reader_sees_first_is_read_on_from_there_after_the_batch_is_replayed(
    broker, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """A planned batch 150..200 whose every record is gone fails in the reader; Spark replays it (reading
    nothing) once ``fail_on_data_loss: false`` is set, then plans from its end, 200: the source reads on from
    0, the partition's first offset at the first sight (its log began again below the checkpoint's position),
    so the 40 records written in between are read, and the 100 it kept, again."""
    topic = unique("lost")
    _bookings(broker, topic, 100)
    cfg = dataclasses.replace(
        _cfg(broker.bootstrap, topic, timeout=3_600.0), loss_dir=str(tmp_path / "data-loss" / "bookings")
    )
    try:
        with pytest.raises(DataLossError) as caught:
            list(read_range(cfg, OffsetRange(topic, 0, 150, 200)))
    finally:
        kread.reset_consumers()
    assert caught.value.hint is not None
    assert caught.value.hint.startswith(
        "to read on from offset 0, the partition's first offset when the loss was first seen (every record "
        "written since the broker came back is read; any it kept from before, again), set "
        "`fail_on_data_loss: false`"
    )
    _send(broker.bootstrap, topic, 40, seed=2)
    fixed = dataclasses.replace(cfg, fail_on_data_loss=False)
    try:
        assert list(read_range(fixed, OffsetRange(topic, 0, 150, 200))) == []
    finally:
        kread.reset_consumers()
    reader = KafkaStreamReader(fixed)
    try:
        assert _plan(reader, topic, 200) == {topic: {"0": 0}}
    finally:
        reader.stop()


def test_records_deleted_below_a_batch_are_named_with_the_first_offset_to_read_on_from() -> None:
    """A planned batch 10..60 of a partition that now holds 20..49: its first records were deleted (retention),
    so the way out reads on from the first offset held, not from the end."""
    caught = data_loss.error("t", 0, 10, 20, 50, range_end=60)
    assert (
        caught.message
        == "t[0]: the checkpoint's position 10 is below the partition's first offset 20: 10 records were deleted before they were read"
    )
    assert caught.hint == (
        "to read on from offset 20 (the records in between are not read), set `fail_on_data_loss: false` on the "
        "stream that reads 't' and deploy again; or deploy the dagger with a new checkpoint to start afresh from "
        "its start_from"
    )
