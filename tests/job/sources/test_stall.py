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
from job.sources import kafka as ksrc
from job.sources.kafka import OffsetRange, SourceConfig, read_range
from job.sources.stall import RESEEK_AFTER_S, RESEEK_OUT_OF_RANGE_S, ClientLog, StallWatch
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
    assert w.describe() == ("1 re-seek, 10000 records below the next offset (the consumer went back), "
                            "1 'offset out of range' answers")  # what the reader says when it reads again
    w.moved(2.0)
    assert not w.urgent and w.reseeks == 0 and not w.reseek_due(2.5)


def test_the_client_log_keeps_the_last_warnings_and_errors_only() -> None:
    said = ClientLog()
    assert said.said() == "the Kafka client logged nothing"
    logger = said.logger("t")
    logger.info("not kept")
    for i in range(7):
        logger.warning("FAIL %d", i)
    said.error("all brokers down")
    assert said.said() == "FAIL 3; FAIL 4; FAIL 5; FAIL 6; all brokers down"
    assert not logger.propagate and logger.parent is None  # not in logging's registry: it goes with its consumer
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
    return SourceConfig(bootstrap_servers=bootstrap, topics=[topic], proto_class="daggers.events.BookingLog",
                        descriptor_set_b64=default_registry().to_b64(), columns=["order_number"],
                        read_timeout_s=timeout)


def _misplace(cfg: SourceConfig, wrong: int) -> _MisplacedConsumer:
    real, said = ksrc._executor_consumer(cfg, cfg.bootstrap_servers)
    fake = _MisplacedConsumer(real, wrong)
    ksrc._CONSUMERS[ksrc._consumer_key(cfg, cfg.bootstrap_servers)] = (fake, said)  # type: ignore[assignment]
    return fake


def _bookings(broker: Any, topic: str, n: int) -> list[str]:
    broker.create_topic(topic, partitions=1)
    events = generate("booking", n, seed=11, start=datetime(2026, 3, 2, 15, 0, tzinfo=UTC), duration_s=10)
    produce(broker.bootstrap, topic, [events], progress=False)
    return list(events.table.column("order_number").to_pylist())


@pytest.mark.integration
@pytest.mark.parametrize("wrong", ["behind", "past_the_end"])
def test_a_range_read_from_the_wrong_offset_is_assigned_again_and_reads_exactly_its_records(
        broker, wrong: str, capfd: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    topic = unique(f"stall-{wrong}")
    numbers = _bookings(broker, topic, 3_000)
    cfg = _cfg(broker.bootstrap, topic)
    fake = _misplace(cfg, 0 if wrong == "behind" else 1_000_000)
    try:
        started = time.monotonic()
        batches = list(read_range(cfg, OffsetRange(topic, 0, 2_000, 2_500)))
        took = time.monotonic() - started
        cached = [c for c, _ in ksrc._CONSUMERS.values()]
    finally:
        ksrc._CONSUMERS.clear()
    assert [n for b in batches for n in b.column("order_number").to_pylist()] == numbers[2_000:2_500]
    if wrong == "behind":
        # The 2,000 records below the range come in well under RESEEK_OUT_OF_RANGE_S and are passed over.
        assert fake.assigns[0] == 2_000 and took < RESEEK_AFTER_S
        return
    # asked for the range's start; then a new consumer (new connections) took over from there
    assert fake.assigns == [2_000] and len(cached) == 1 and cached[0] is not fake
    err = capfd.readouterr().err
    assert f"no records from {topic}[0] at offset 2000 for " in err
    assert f"{topic}[0] reads again after " in err and "(range 2000..2500; 1 re-seek" in err
    if broker.kind == "tansu":  # tansu answers a fetch past the end with nothing: the quiet re-seek
        assert RESEEK_AFTER_S <= took < RESEEK_AFTER_S + 3
    else:  # noida says "out of range" (auto.offset.reset=error): the urgent one
        assert took < RESEEK_AFTER_S and "'offset out of range' answers" in err


@pytest.mark.integration
def test_a_range_that_never_comes_names_its_reseeks_and_the_clients_words() -> None:
    cfg = _cfg(f"127.0.0.1:{free_port()}", "nowhere", timeout=RESEEK_AFTER_S * 3 + 1)
    try:
        with pytest.raises(SourceError) as exc:
            list(read_range(cfg, OffsetRange("nowhere", 0, 0, 10)))
    finally:
        ksrc._CONSUMERS.clear()
    text = str(exc.value)
    assert re.search(rf"no records from nowhere\[0\] at offset 0 for {cfg.read_timeout_s:.0f} s "
                     r"\(range 0\.\.10; [23] re-seeks; the client said: ", text), text
    assert "the client said: " in text and "Connection refused" in text

