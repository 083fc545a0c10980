"""End and beginning offsets on real brokers (tansu's ListOffsets "latest" is a lower bound)."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer

from job.sources import offsets as kofs


def _produce_batches(bootstrap: str, topic: str, counts: dict[int, list[int]]) -> None:
    """Send, per partition, record batches of the given sizes (one flush per batch: a batch each)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for partition, sizes in counts.items():
        for size in sizes:
            for i in range(size):
                producer.produce(topic, f"p{partition}-{i}".encode(), partition=partition)
            assert producer.flush(30) == 0


def test_end_offsets_are_the_true_ends_on_both_brokers(broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"offsets-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=4)
    # partition 3 stays empty; partition 1 ends with a 100-record batch (tansu lists its base + 1)
    _produce_batches(broker.bootstrap, topic, {0: [1], 1: [5, 100], 2: [30, 30, 7]})
    consumer = kofs.driver_consumer(broker.bootstrap)
    try:
        tps = kofs.partitions_of(consumer, [topic], broker.bootstrap)
        assert kofs.beginning_offsets(consumer, tps) == {topic: {"0": 0, "1": 0, "2": 0, "3": 0}}
        assert kofs.end_offsets(consumer, tps) == {topic: {"0": 1, "1": 105, "2": 67, "3": 0}}
        assert kofs.end_offsets(consumer, []) == {}
    finally:
        consumer.close()
