"""bench.trim: the feed's records are deleted once older than keep_s, on noida-db (DeleteRecords); tansu, which
does not delete records, stops the trimmer with the reason."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.trim import Trimmer, cut_below, drop_topics, read_floor
from job.stack.broker import create_topic
from job.stack.ports import free_port
from tests.helpers import unique
from tests.services import BrokerHandle


def test_the_cut_is_the_ends_of_the_latest_look_keep_s_ago() -> None:
    history = [(100.0, {("t", 0): 10}), (130.0, {("t", 0): 40}), (160.0, {("t", 0): 70})]
    assert cut_below(history, 165.0, 60) == {("t", 0): 10}
    assert cut_below(history, 190.0, 60) == {("t", 0): 40}
    assert cut_below(history, 160.0, 0) == {("t", 0): 70}
    assert cut_below(history, 159.0, 60) == {}


def _produce(bootstrap: str, topic: str, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for part in (0, 1):
        for i in range(per_partition):
            producer.produce(topic, b"x%d" % i, partition=part)
    producer.flush(30)


def _trimmer(
    bootstrap: str, kind: str, records: int, keep_s: float
) -> tuple[str, list[float], Trimmer, Consumer, AdminClient]:
    """A topic of two partitions with ``records`` each, and a trimmer of it on a clock the test moves."""
    topic = unique("trim")
    create_topic(bootstrap, topic, 2, kind=kind)  # type: ignore[arg-type]
    _produce(bootstrap, topic, records)
    now = [1000.0]
    trimmer = Trimmer(bootstrap, [topic], keep_s=keep_s, clock=lambda: now[0])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g")})
    return topic, now, trimmer, consumer, AdminClient({"bootstrap.servers": bootstrap})


def test_noida_deletes_what_is_older_than_keep_s(noida_broker: str) -> None:
    topic, now, trimmer, consumer, admin = _trimmer(noida_broker, "noida", 100, keep_s=30)
    try:

        def lows() -> list[int]:
            return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0] for p in (0, 1)]

        trimmer.tick(consumer, admin)  # the first look: nothing is 30 s old yet
        assert lows() == [0, 0] and trimmer.deleted == 0
        _produce(noida_broker, topic, 20)
        now[0] = 1031.0
        trimmer.tick(consumer, admin)  # below the ends seen 31 s ago: the first 100 of each partition
        assert lows() == [100, 100] and trimmer.deleted == 200 and trimmer.rounds == 1
        now[0] = 1062.0
        trimmer.tick(consumer, admin)
        assert lows() == [120, 120] and trimmer.deleted == 240 and not trimmer.error
        assert [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)] == [
            120,
            120,
        ]
    finally:
        consumer.close()


def test_a_broker_that_does_not_delete_records_stops_the_trimmer_with_why(tansu_broker: str) -> None:
    _, now, trimmer, consumer, admin = _trimmer(tansu_broker, "tansu", 10, keep_s=0)
    try:
        for _ in range(3):
            trimmer.tick(consumer, admin)
            now[0] += 30
        assert trimmer.deleted == 0 and trimmer.rounds == 0
        assert trimmer.error.startswith("KafkaException: "), trimmer.error
    finally:
        consumer.close()


def _checkpoint(root: Path, commits: dict[int, dict[str, dict[str, int]]], age_s: float = 0.0) -> None:
    """A Spark checkpoint's offsets and commits folders: batch id -> end offsets (committed)."""
    for folder in ("offsets", "commits"):
        (root / "spark" / folder).mkdir(parents=True)
    for batch, ends in commits.items():
        (root / "spark" / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(ends)}\n'
        )
        commit = root / "spark" / "commits" / str(batch)
        commit.write_text('v1\n{"nextBatchWatermarkMs":0}\n')
        os.utime(commit, (1000.0 - age_s, 1000.0 - age_s))


def test_the_floor_is_the_least_committed_end_of_the_fresh_checkpoints(tmp_path: Path) -> None:
    _checkpoint(tmp_path / "a", {3: {"t": {"0": 40, "1": 45}}, 4: {"t": {"0": 50, "1": 55}}})
    _checkpoint(tmp_path / "b" / "gen-2", {9: {"t": {"0": 70, "1": 30}, "u": {"0": 5}}})
    _checkpoint(tmp_path / "c", {2: {"t": {"0": 1, "1": 1}}}, age_s=900)  # failed long ago: not counted
    (tmp_path / "d" / "spark" / "offsets").mkdir(parents=True)  # planned, never committed: not counted
    (tmp_path / "d" / "spark" / "offsets" / "0").write_text('v1\n{}\n{"t": {"0": 0}}\n')
    (tmp_path / "a" / "spark" / "offsets" / "5").write_text('v1\n{}\n{"t": {"0": 60, "1": 65}}\n')  # running
    assert read_floor(tmp_path, fresh_s=600, now=1000.0) == {("t", 0): 50, ("t", 1): 30, ("u", 0): 5}
    assert read_floor(tmp_path, fresh_s=600, now=2000.0) == {}


def test_a_reader_behind_keeps_its_records(noida_broker: str) -> None:
    topic, now, trimmer, consumer, admin = _trimmer(noida_broker, "noida", 100, keep_s=0)
    trimmer.floor = lambda: {(topic, 0): 30}  # partition 0 read up to 30; nobody said about partition 1
    try:
        trimmer.tick(consumer, admin)
        assert [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0] for p in (0, 1)] == [
            30,
            0,
        ]
        assert trimmer.deleted == 30
    finally:
        consumer.close()


def test_a_steps_topics_are_dropped_and_a_missing_one_is_no_error(broker: BrokerHandle) -> None:
    """Both brokers delete a step's feed topics (DeleteTopics); a topic that is not there is not a failure."""
    topics = [unique("feed"), unique("feed")]
    for topic in topics:
        create_topic(broker.bootstrap, topic, 2, kind=broker.kind)
        _produce(broker.bootstrap, topic, 10)
    assert drop_topics(broker.bootstrap, [*topics, unique("never")]) == ""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deadline = time.time() + 20
    while time.time() < deadline and set(topics) & set(admin.list_topics(timeout=10).topics):
        time.sleep(0.5)
    assert not set(topics) & set(admin.list_topics(timeout=10).topics)


def test_an_unreachable_broker_is_a_reason_not_an_exception() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    assert drop_topics(bootstrap, ["feed"], timeout_s=2) == f"feed: no answer from {bootstrap} in 2 s"
