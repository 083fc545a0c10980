"""A range whose records the broker no longer has (noida-db killed -9 lost its newest records; a topic made
again): the reader names the loss at once instead of waiting out its read timeout and crashing with "no
records"; with ``fail_on_data_loss: false`` it passes over what is gone, saying so. Real brokers."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from job.sources import read as kread
from job.sources.config import OffsetRange
from job.sources.data_loss import DataLossError
from job.sources.read import read_range
from tests.helpers import unique
from tests.job.sources.test_stall import _bookings, _cfg

pytestmark = pytest.mark.integration


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
