"""Kafka failover: the cluster in the offsets, the readers' position files, and the rule that finds
the start on the secondary by timestamp (with real brokers for the last part)."""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from job.errors import SourceError, SpecError
from job.produce.generator import generate
from job.produce.producer import produce
from job.schema import default_registry
from job.sources import failover as kfo
from job.sources import offsets as kofs
from job.sources.config import OffsetRange, SourceConfig
from job.sources.kafka import KafkaStreamReader
from job.sources.read import read_range
from job.spec import parse_spec
from job.stack.broker import create_topic
from job.stack.ports import free_port
from tests.helpers import unique

# ---- offsets and their cluster ---------------------------------------------------------------


def test_offsets_without_the_key_are_the_primarys() -> None:
    assert kfo.split_cluster({"t": {"0": 5}}) == ("primary", {"t": {"0": 5}})
    tagged = kfo.tag({"t": {"0": 5}}, "secondary", True)
    assert tagged == {"@cluster": "secondary", "t": {"0": 5}}
    assert kfo.split_cluster(tagged) == ("secondary", {"t": {"0": 5}})
    assert kfo.split_cluster({**tagged, "@tick": 3}) == ("secondary", {"t": {"0": 5}})  # the source's own key
    assert kfo.tag({"t": {"0": 5}}, "primary", False) == {"t": {"0": 5}}  # no failover: the old format
    with pytest.raises(SourceError, match="unknown cluster"):
        kfo.split_cluster({"@cluster": "tertiary"})


def _cfg(failover: str = "127.0.0.1:2", positions: str = "") -> SourceConfig:
    return SourceConfig(
        bootstrap_servers="127.0.0.1:1",
        topics=["t"],
        proto_class="x",
        descriptor_set_b64="",
        columns=[],
        split_records=10,
        failover_bootstrap_servers=failover,
        positions_dir=positions,
    )


def test_the_failover_batch_reads_nothing_and_later_ranges_read_the_secondary() -> None:
    reader = KafkaStreamReader(_cfg())
    primary = {"@cluster": "primary", "t": {"0": 100}}
    switch = {"@cluster": "secondary", "t": {"0": 7}}
    assert reader.partitions(primary, switch) == []
    ranges = reader.partitions(switch, {"@cluster": "secondary", "t": {"0": 22}})
    assert [(r.start, r.end, r.cluster) for r in ranges] == [(7, 17, "secondary"), (17, 22, "secondary")]
    old = reader.partitions({"t": {"0": 0}}, {"@cluster": "primary", "t": {"0": 5}})
    assert old == [OffsetRange("t", 0, 0, 5, "primary")]
    assert _cfg().bootstrap("secondary") == "127.0.0.1:2" and _cfg().bootstrap("primary") == "127.0.0.1:1"


def test_a_secondary_checkpoint_without_failover_in_the_spec_is_refused() -> None:
    reader = KafkaStreamReader(_cfg(failover=""))
    with pytest.raises(SourceError, match="secondary cluster"):
        reader.partitions({"@cluster": "secondary", "t": {"0": 1}}, {"@cluster": "secondary", "t": {"0": 2}})


# ---- the readers' position files -------------------------------------------------------------


def test_positions_are_found_by_range_end_and_pruned_at_commit(tmp_path: Path) -> None:
    for (start, end), ts in [((0, 10), 100), ((10, 20), 200), ((20, 25), 250)]:
        kfo.write_position(tmp_path, "a", 1, start, end, kfo.Position(end - 1, ts, f"fp{ts}"))
    kfo.write_position(tmp_path, "a-1", 2, 0, 10, kfo.Position(9, 999, "other"))  # "a-1-…" is not a[1]
    assert kfo.find_position(tmp_path, "a", 1, 20) == kfo.Position(19, 200, "fp200")
    assert kfo.find_position(tmp_path, "a", 1, 22) == kfo.Position(19, 200, "fp200")  # the newest before
    assert kfo.find_position(tmp_path, "a", 1, 5) is None
    assert kfo.find_position(tmp_path, "a-1", 2, 10) == kfo.Position(9, 999, "other")
    kfo.prune_positions(tmp_path, {"a": {"1": 20}})
    assert sorted(p.name for p in tmp_path.glob("a-1-0*")) == [
        "a-1-00000000000000000010-00000000000000000020.json",
        "a-1-00000000000000000020-00000000000000000025.json",
    ]
    assert kfo.find_position(tmp_path, "a-1", 2, 10) is not None


def test_the_boundary_record_is_told_apart_from_others_with_its_timestamp() -> None:
    records = [
        (o, ts, kfo.fingerprint(b"k", str(o).encode()))
        for o, ts in [(40, 90), (41, 100), (42, 100), (43, 100), (44, 101)]
    ]
    pos = kfo.Position(offset=7, timestamp=100, fingerprint=kfo.fingerprint(b"k", b"42"))
    assert kfo.locate(records, pos) == (43, None)  # 43 (same timestamp, after the boundary) is not lost
    assert kfo.locate(records, kfo.Position(7, 100, "nope")) == (None, 44)  # fallback: the first after 100
    assert kfo.fingerprint(None, b"") != kfo.fingerprint(b"", None) != kfo.fingerprint(b"a", b"b")


def test_active_cluster_file(tmp_path: Path) -> None:
    assert kfo.read_active(tmp_path) == "primary"
    kfo.write_active(tmp_path, "secondary", "127.0.0.1:2")
    assert kfo.read_active(tmp_path) == "secondary"


# ---- the spec ----------------------------------------------------------------------------------

SPEC = """name: fo
streams:
  - table: s
    topics: [t]
    proto_class: daggers.events.BookingLog
    timestamp_field: event_timestamp
    bootstrap_servers: 127.0.0.1:9092
    group: g
    max_outage_s: 120
    failover: {FAILOVER}
sql: SELECT 1
sink: {type: log}
"""


def test_spec_failover_is_validated() -> None:
    spec = parse_spec(SPEC.replace("{FAILOVER}", "{bootstrap_servers: '10.0.0.2:9092', after_s: 20}"))
    assert spec.streams[0].failover is not None and spec.streams[0].failover.after_s == 20
    assert parse_spec(SPEC.replace("    failover: {FAILOVER}\n", "")).streams[0].failover is None
    with pytest.raises(
        SpecError, match=r"spec:10: streams\[0\].failover: after_s \(300\) must be less than max_outage_s"
    ):
        parse_spec(SPEC.replace("{FAILOVER}", "{bootstrap_servers: '10.0.0.2:9092', after_s: 300}"))
    with pytest.raises(SpecError, match="is not host:port"):
        parse_spec(SPEC.replace("{FAILOVER}", "{bootstrap_servers: nope}"))
    with pytest.raises(SpecError, match="the primary cluster itself"):
        parse_spec(SPEC.replace("{FAILOVER}", "{bootstrap_servers: '127.0.0.1:9092'}"))


# ---- the start on a real secondary -------------------------------------------------------------


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for value, ts in records:
        producer.produce(topic, value=value, key=b"k", partition=0, timestamp=ts)
    assert producer.flush(30) == 0


@pytest.mark.integration
def test_secondary_start_by_timestamp_and_fingerprint(broker) -> None:  # type: ignore[no-untyped-def]
    """The secondary holds 5 extra older records, so its offsets differ; three records share the
    boundary's timestamp: the start is right after the boundary record, not before or after the tie."""
    topic = unique("failover-start")
    broker.create_topic(topic, partitions=1)
    base = 1_772_000_000_000
    older = [(f"old{i}".encode(), base - 10_000 + i) for i in range(5)]
    mirrored = [(f"r{i}".encode(), base + (i if i < 10 else 10 if i < 13 else i)) for i in range(20)]
    _produce(broker.bootstrap, topic, older + mirrored)
    boundary = mirrored[11]  # the second of the three records at base + 10
    pos = kfo.Position(offset=11, timestamp=boundary[1], fingerprint=kfo.fingerprint(b"k", boundary[0]))
    consumer = kofs.driver_consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(topic, 0)]
        start = kfo.secondary_start(consumer, tps, {(topic, 0): pos}, "earliest")
        assert start == {topic: {"0": 5 + 12}}
        assert kfo.secondary_start(consumer, tps, {(topic, 0): None}, "earliest") == {topic: {"0": 0}}
        assert kfo.secondary_start(consumer, tps, {(topic, 0): None}, "latest") == {topic: {"0": 25}}
        # Not on the secondary: the first record after the boundary's time (records at that time are lost).
        missing = kfo.Position(offset=11, timestamp=boundary[1], fingerprint="0" * 16)
        assert kfo.secondary_start(consumer, tps, {(topic, 0): missing}, "earliest") == {topic: {"0": 5 + 13}}
    finally:
        consumer.close()


@pytest.mark.integration
def test_a_range_planned_on_the_lost_primary_is_read_on_the_secondary(tansu_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The primary dies while a micro-batch planned on it is being read: after failover_after_s the
    reader finds the batch start on the secondary and reads the same records there."""
    topic = unique("failover-range")
    create_topic(tansu_broker, topic, 1)
    t0 = datetime(2026, 3, 2, 15, 0, tzinfo=UTC)
    older = generate("booking", 5, seed=3, start=t0 - timedelta(hours=2), duration_s=10)
    mirrored = generate("booking", 30, seed=4, start=t0, duration_s=30)
    produce(tansu_broker, topic, [older, mirrored], progress=False)
    numbers = mirrored.table.column("order_number").to_pylist()
    # On the primary the batch starts at offset 100, right after mirrored record 9 (offset 14 on the secondary).
    kfo.write_position(
        tmp_path,
        topic,
        0,
        90,
        100,
        kfo.Position(
            99, mirrored.timestamps_ms()[9], kfo.fingerprint(mirrored.keys[9], mirrored.payloads[9])
        ),
    )
    cfg = SourceConfig(
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        topics=[topic],
        proto_class="daggers.events.BookingLog",
        descriptor_set_b64=default_registry().to_b64(),
        columns=["order_number"],
        failover_bootstrap_servers=tansu_broker,
        failover_after_s=2,
        read_timeout_s=30,
        positions_dir=str(tmp_path),
    )
    started = time.monotonic()
    batches = list(read_range(cfg, OffsetRange(topic, 0, 105, 112, "primary", anchor=100)))
    assert [n for b in batches for n in b.column("order_number").to_pylist()] == numbers[15:22]
    assert 2 <= time.monotonic() - started < 30
    # The range's position names its last record (mirrored 21) for the failover of the driver.
    assert kfo.find_position(tmp_path, topic, 0, 112) == kfo.Position(
        111,
        mirrored.timestamps_ms()[21],
        kfo.fingerprint(mirrored.keys[21], mirrored.payloads[21]),
        moved=True,
    )


@pytest.mark.integration
def test_a_missing_position_is_fetched_from_the_primary(tansu_broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Failover added to a dagger whose checkpoint has offsets but no positions: the driver reads the
    record before each start offset once and records it."""
    topic = unique("failover-fetch")
    create_topic(tansu_broker, topic, 1)
    _produce(tansu_broker, topic, [(f"v{i}".encode(), 1_772_000_000_000 + i) for i in range(10)])
    consumer = kofs.driver_consumer(tansu_broker)
    try:
        assert not kfo.has_position(tmp_path, topic, 0, 7)
        assert kfo.record_position(consumer, tmp_path, topic, 0, 7)
        assert kfo.has_position(tmp_path, topic, 0, 7)
        assert kfo.find_position(tmp_path, topic, 0, 7) == kfo.Position(
            6, 1_772_000_000_006, kfo.fingerprint(b"k", b"v6")
        )
        assert not kfo.record_position(consumer, tmp_path, topic, 0, 0)
    finally:
        consumer.close()
    reader = KafkaStreamReader(
        SourceConfig(
            bootstrap_servers=tansu_broker,
            topics=[topic],
            proto_class="x",
            descriptor_set_b64="",
            columns=[],
            failover_bootstrap_servers="127.0.0.1:1",
            positions_dir=str(tmp_path / "reader"),
        )
    )
    try:
        reader._ensure_positions({topic: {"0": 3}})
    finally:
        reader.stop()
    assert kfo.find_position(tmp_path / "reader", topic, 0, 3) == kfo.Position(
        2, 1_772_000_000_002, kfo.fingerprint(b"k", b"v2")
    )


@pytest.mark.integration
def test_the_outage_is_counted_from_the_first_unanswered_call(tansu_broker) -> None:  # type: ignore[no-untyped-def]
    """A lost primary is seen only when a metadata call gives up (10 s): that wait counts as outage, so with
    ``failover_after_s`` 5 the first plan that gets no answer fails over, not the one after it (~20 s)."""
    topic = unique("failover-clock")
    create_topic(tansu_broker, topic, 1)
    _produce(tansu_broker, topic, [(f"v{i}".encode(), 1_772_000_000_000 + i) for i in range(3)])
    cfg = dataclasses.replace(_cfg(tansu_broker), topics=[topic], failover_after_s=5, start_from="earliest")
    reader = KafkaStreamReader(cfg)
    asked = time.monotonic()
    planned = reader.latestOffset({"@cluster": "primary", topic: {"0": 0}}, ReadAllAvailable())
    took = time.monotonic() - asked
    assert planned == {"@cluster": "secondary", topic: {"0": 0}}, planned
    assert 5 <= took < 30, took
