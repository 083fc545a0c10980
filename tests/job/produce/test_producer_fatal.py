"""Once librdkafka's producer is in its fatal state, produce() and flush() answer ``_FATAL`` ("Local: Fatal
error") without the fatal flag: that is a fatal error too, for which a new producer is started, never a
"cannot send event" error or a traceback. Unit tests with a fake producer (the state cannot be forced on a real
broker at will; tests/job/produce/test_broker_outage.py kills one)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from job.produce import producer as kp


class _FatalProducer:
    """A producer in librdkafka's fatal state: every produce() answers _FATAL, as the real one does."""

    def __init__(self) -> None:
        self.calls = 0

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        raise KafkaException(KafkaError(KafkaError._FATAL))

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def __len__(self) -> int:
        return 0


def test_a_produce_answering_local_fatal_error_is_a_fatal_error_for_a_new_producer() -> None:
    fake = _FatalProducer()
    with pytest.raises(kp._Fatal) as caught:
        kp._enqueue(fake, "t", [b"a", b"b"], [b"k", b"k"], [1, 2], 0, 2, None)  # type: ignore[arg-type]
    assert caught.value.index == 0
    assert caught.value.exc.args[0].code() == KafkaError._FATAL


def test_a_flush_failing_on_a_local_fatal_error_names_its_cause() -> None:
    try:
        try:
            raise KafkaException(KafkaError(KafkaError._FATAL))
        except KafkaException as inner:
            raise SystemError("<method 'flush' of 'cimpl.Producer' objects> returned NULL") from inner
    except SystemError as outer:
        cause = kp.fatal_cause(outer)
    assert cause is not None and cause.args[0].code() == KafkaError._FATAL


def test_events_left_in_a_dropped_producer_are_not_counted_as_delivered() -> None:
    deliveries = kp._Deliveries()
    deliveries.abandoned = 7
    with pytest.raises(kp.ProduceError) as caught:
        kp._report("t", 100, 0, deliveries, 1.0, False, False)
    assert caught.value.report is not None
    assert (caught.value.report.count, caught.value.report.errors) == (93, 7)
