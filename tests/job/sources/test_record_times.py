"""Record times looked up in the middle of a backlog on a real tansu broker (job.sources.align.record_times):
the exact Kafka timestamps, fast enough for the driver to plan a capped batch with them."""

from __future__ import annotations

import statistics
import time

from confluent_kafka import Producer

from job.sources.align import record_times
from job.sources.offsets import driver_consumer
from job.stack.broker import create_topic
from tests.helpers import unique

PARTITIONS = 4
PER_PARTITION = 250_000
T0_MS = 1_800_000_000_000


def stamp(partition: int, offset: int) -> int:
    """The Kafka timestamp of a record: partitions apart, one record every 2 ms."""
    return T0_MS + 1000 * partition + 2 * offset


def test_record_times_in_the_middle_of_a_backlog_are_exact_and_fast(tansu_broker: str) -> None:
    topic = unique("times")
    create_topic(tansu_broker, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": tansu_broker, "linger.ms": 50, "batch.num.messages": 10_000})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            while True:
                try:
                    producer.produce(topic, b"x" * 58, partition=p, timestamp=stamp(p, i))
                    break
                except BufferError:
                    producer.poll(0.01)
    assert producer.flush(60) == 0
    consumer = driver_consumer(tansu_broker, {"fetch.queue.backoff.ms": "1"})
    try:
        record_times(consumer, {(topic, str(p)): 0 for p in range(PARTITIONS)})  # connected
        took = []
        for step in range(10):
            # a plan's look-up: one offset in the middle of every partition
            wanted = {(topic, str(p)): 10_000 + 23_000 * step + 101 * p for p in range(PARTITIONS)}
            began = time.monotonic()
            found = record_times(consumer, wanted)
            took.append(time.monotonic() - began)
            assert found == {k: stamp(int(k[1]), off) for k, off in wanted.items()}
        # past the end: no time; the others still found
        assert record_times(consumer, {(topic, "0"): PER_PARTITION, (topic, "1"): 5}) == {
            (topic, "1"): stamp(1, 5)
        }
    finally:
        consumer.close()
    # the four partitions in one fetch: median 0.30 s a look-up here (0.25-0.97); one after another 0.085 s
    assert statistics.median(took) < 0.2, took
