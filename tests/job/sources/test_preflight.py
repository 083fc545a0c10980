"""The wait for a dagger's broker before Spark starts: a line every SAY_EVERY_S, give up after max_outage_s.

The broker's answers are faked here (the timing rule is what is tested); tests/job/cli/test_run_cli.py runs
the same wait against a real broker that comes up late, and against a port where nothing listens."""

from __future__ import annotations

import threading

import pytest

from job.errors import SourceError
from job.sources import offsets as kofs
from job.sources import preflight
from job.sources.kafka import SourceConfig
from tests.helpers import FakeClock


def _config(max_outage_s: float) -> SourceConfig:
    return SourceConfig(
        bootstrap_servers="127.0.0.1:1",
        topics=["bookings"],
        proto_class="daggers.events.BookingLog",
        descriptor_set_b64="",
        columns=["city_id"],
        max_outage_s=max_outage_s,
    )


def _broker_down_for(monkeypatch: pytest.MonkeyPatch, clock: FakeClock, seconds: float) -> None:
    up_at = clock.now + seconds

    def partitions_of(*_args: object, timeout: float, **_kw: object) -> list:
        if clock.now < up_at:
            clock.now += timeout  # a look-up at a dead port takes its whole timeout
            raise SourceError("cannot reach the Kafka broker at 127.0.0.1:1: Local: Broker transport failure")
        return []

    monkeypatch.setattr(kofs, "partitions_of", partitions_of)


def test_it_waits_says_so_every_ten_seconds_and_goes_on_when_the_broker_answers(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock, said = FakeClock(1000.0), []
    _broker_down_for(monkeypatch, clock, 31)
    preflight.wait_for_brokers([_config(600)], say=said.append, clock=clock, sleep=clock.sleep)
    assert said == [
        "daggers: waiting for the Kafka broker at 127.0.0.1:1 (topics bookings): unreachable for 5 s, giving up "
        "after max_outage_s 600 s",
        "daggers: waiting for the Kafka broker at 127.0.0.1:1 (topics bookings): unreachable for 17 s, giving up "
        "after max_outage_s 600 s",
        "daggers: waiting for the Kafka broker at 127.0.0.1:1 (topics bookings): unreachable for 29 s, giving up "
        "after max_outage_s 600 s",
        "daggers: the Kafka broker at 127.0.0.1:1 answers now; starting",
    ]


def test_it_gives_up_after_max_outage_s_with_one_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock, said = FakeClock(1000.0), []
    _broker_down_for(monkeypatch, clock, 10_000)
    with pytest.raises(SourceError) as info:
        preflight.wait_for_brokers([_config(20)], say=said.append, clock=clock, sleep=clock.sleep)
    assert info.value.message == "cannot reach the Kafka broker at 127.0.0.1:1 (waited 20 s, max_outage_s 20)"
    assert info.value.hint and info.value.hint.startswith("start it (`daggers up` starts the local stack)")
    assert 20 <= clock.now - 1000 < 22 and len(said) == 2


def test_a_missing_topic_fails_at_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def partitions_of(*_args: object, **_kw: object) -> list:
        raise SourceError("topic 'bookings' does not exist on 127.0.0.1:1 (no partitions)", hint="produce")

    monkeypatch.setattr(kofs, "partitions_of", partitions_of)
    with pytest.raises(SourceError, match="does not exist"):
        preflight.wait_for_brokers(
            [_config(600)], say=print, clock=FakeClock(1000.0), sleep=FakeClock(1000.0).sleep
        )


def test_a_ctrl_c_lost_inside_the_kafka_client_still_stops_the_wait(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The Ctrl-C handler also sets a flag: if its KeyboardInterrupt is swallowed (raised while librdkafka's C
    code ran), the next round stops the wait. Seen once in CI: the wait went on for max_outage_s."""
    clock, said, interrupted = FakeClock(1000.0), [], threading.Event()
    _broker_down_for(monkeypatch, clock, 10_000)

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now - 1000 > 12:
            interrupted.set()  # the handler ran; its exception did not come through

    with pytest.raises(KeyboardInterrupt):
        preflight.wait_for_brokers(
            [_config(600)], say=said.append, clock=clock, sleep=sleep, interrupted=interrupted
        )
    assert 12 < clock.now - 1000 < 20 and len(said) == 2
