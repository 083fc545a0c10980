"""A fused pass-through's catch-up (:mod:`job.shared.catchup`): the records between two sets of offsets,
read once through the member's own SQL, on both real brokers and real Spark. How a group uses it after a
split: test_host_fusion_split.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.offset_log import lag_of
from job.shared.catchup import catch_up
from tests.helpers import BOOKINGS_SQL, unique
from tests.job.shared.test_fusion import planned

PASS_SQL = """SELECT order_number AS tag_order_number, fare_idr AS fare, rowtime AS window_timestamp
FROM data_stream
WHERE status = 'COMPLETED'"""


def test_only_a_pass_through_catches_up(tmp_path: Path) -> None:
    windowed = planned(tmp_path, "ww", BOOKINGS_SQL)
    with pytest.raises(ValueError, match="only a pass-through"):
        catch_up(None, windowed, {}, {})


def offsets_of(
    bootstrap: str, topic: str, partitions: int, payloads: list[bytes]
) -> dict[tuple[int, int], int]:
    """Return (partition, offset) -> the index in ``payloads`` of the record there, read back from the broker."""
    from confluent_kafka import Consumer, TopicPartition

    index = {payload: i for i, payload in enumerate(payloads)}
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[tuple[int, int], int] = {}
        idle = 0
        while len(out) < len(payloads) and idle < 10:
            msgs = [m for m in consumer.consume(500, timeout=1.0) if m.error() is None]
            idle = 0 if msgs else idle + 1
            out.update({(m.partition(), m.offset()): index[m.value()] for m in msgs})
        return out
    finally:
        consumer.close()


@pytest.mark.integration
def test_a_catch_up_reads_exactly_the_records_between_the_offsets(broker, spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = unique("catchup")
    broker.create_topic(topic, partitions=2)
    batch = generate("booking", 60, seed=7, start=datetime(2026, 11, 28, 10, 0, tzinfo=UTC), duration_s=60)
    produce(broker.bootstrap, topic, batch, progress=False)
    rows = batch.table.to_pylist()
    records = {at: rows[i] for at, i in offsets_of(broker.bootstrap, topic, 2, batch.payloads).items()}
    assert len(records) == 60
    ends = {p: 1 + max(o for q, o in records if q == p) for p in (0, 1)}
    start = {topic: {"0": 5, "1": 3}}
    end = {topic: {"0": ends[0] - 4, "1": ends[1] - 2}}
    member = planned(tmp_path, "cu", PASS_SQL, topic=topic, bootstrap=broker.bootstrap)

    table = catch_up(spark, member, start, end)

    between = [r for (p, o), r in records.items() if int(start[topic][str(p)]) <= o < end[topic][str(p)]]
    assert len(between) == lag_of(start, end) == (ends[0] - 9) + (ends[1] - 5)
    want = sorted(r["order_number"] for r in between if r["status"] == "COMPLETED")
    assert want and len(want) < len(between)  # the member's WHERE ran: some were left out
    assert sorted(table.column("tag_order_number").to_pylist()) == want
    assert table.column_names == ["tag_order_number", "fare", "window_timestamp"]
