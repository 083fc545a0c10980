"""Read back what a Kafka sink wrote: every record of a topic, from the beginning, with a plain consumer."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition


@dataclass(frozen=True)
class Record:
    """One consumed record."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp_ms: int


def consume_all(bootstrap: str, topic: str, count: int, timeout_s: float = 60.0) -> list[Record]:
    """Return the records of ``topic`` (all partitions, from offset 0) once ``count`` have arrived, sorted by
    (partition, offset); waits a little longer to catch any extra record. Raises AssertionError on a timeout."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10)
        parts = sorted(meta.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        out: list[Record] = []
        deadline = time.monotonic() + timeout_s
        settle: float | None = None
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                if settle is not None and time.monotonic() > settle:
                    break
                continue
            if msg.error():
                raise AssertionError(f"consumer error: {msg.error()}")
            out.append(Record(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1]))
            if len(out) >= count and settle is None:
                settle = time.monotonic() + 1.0
        if len(out) < count:
            raise AssertionError(
                f"only {len(out)} of {count} records arrived from {topic!r} in {timeout_s:.0f} s"
            )
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()
