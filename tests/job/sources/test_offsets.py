"""End and beginning offsets on real brokers (tansu's ListOffsets "latest" is a lower bound), and the
stream reader's plan of each micro-batch from them."""

from __future__ import annotations

import bisect
import statistics
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from job.produce.generator import generate
from job.sources import offsets as kofs
from job.sources.data_loss import DataLossError
from job.sources.kafka import KafkaStreamReader, SourceConfig
from tests.helpers import unique

#: The first step's event time.
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


def _produce_batches(bootstrap: str, topic: str, counts: dict[int, list[int]]) -> None:
    """Send, per partition, record batches of the given sizes (one flush per batch: a batch each)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for partition, sizes in counts.items():
        for size in sizes:
            for i in range(size):
                producer.produce(topic, f"p{partition}-{i}".encode(), partition=partition)
            assert producer.flush(30) == 0


def test_end_offsets_are_the_true_ends_on_both_brokers(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("offsets")
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


def test_look_ups_one_after_another_do_not_wait_on_the_broker(broker) -> None:  # type: ignore[no-untyped-def]
    """A probe leaves no follow-up fetch for the broker to hold (tansu holds one fetch.wait.max.ms, 500 ms, when
    it finds nothing new), so look-ups back to back are exact and take milliseconds, not 500 ms each."""
    topic = unique("offsets")
    broker.create_topic(topic, partitions=2)
    _produce_batches(broker.bootstrap, topic, {0: [20], 1: [3, 1]})  # partition 1 ends with a 1-record batch
    consumer = kofs.driver_consumer(broker.bootstrap)
    try:
        tps = kofs.partitions_of(consumer, [topic], broker.bootstrap)
        took = []
        for _ in range(9):
            started = time.monotonic()
            assert kofs.end_offsets(consumer, tps) == {topic: {"0": 20, "1": 4}}
            took.append(time.monotonic() - started)
        shown = ", ".join(f"{t:.3f}" for t in took)
        # a held fetch makes every look-up >= 0.5 s; how fast they are otherwise is bench/bench_offsets.py's
        assert statistics.median(took[1:]) < 0.45, f"look-ups took {shown} s"
    finally:
        consumer.close()


def test_a_look_up_reads_every_partition_at_one_moment_while_events_are_produced(broker, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """While steps of bookings are produced in acknowledged slices of 10 s of event time (at least 30 ms apart),
    each look-up (on a new consumer, as after a restart) gives ends that lie within one slice of each other. A
    partition's end read 100 ms after another's was up to 30 slices ahead of it (a micro-batch that read it
    dropped the other partitions' older events as late). A look-up keeps its probe whose records came within
    PROBE_SPREAD_S (20 ms); one that found none within it (a CPU-starved machine) proves nothing either way,
    and is not counted: steps are produced until 10 look-ups were kept (at most 40 steps)."""
    spreads: list[float] = []
    probe = kofs._probe

    def measured(*args, **kwargs):  # type: ignore[no-untyped-def]
        result = probe(*args, **kwargs)
        spreads.append(result[2])
        return result

    monkeypatch.setattr(kofs, "_probe", measured)
    topic = unique("moment")
    broker.create_topic(topic, partitions=4)
    acked: dict[int, list[int]] = {p: [0] for p in range(4)}
    newest: dict[int, int] = dict.fromkeys(range(4), 0)
    done, enough = threading.Event(), threading.Event()
    failed: list[BaseException] = []

    def delivered(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            newest[msg.partition()] = max(newest[msg.partition()], msg.offset() + 1)

    def produce() -> None:
        try:
            producer = Producer(
                {"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "on_delivery": delivered}
            )
            for k in range(40):
                if k >= 8 and enough.is_set():
                    break
                step = generate("booking", 1500, seed=k, start=T0 + timedelta(minutes=20 * k), duration_s=180)
                for part in step.time_slices(10.0):
                    for i, value in enumerate(part.payloads):
                        producer.produce(topic, value, key=str(i % 97).encode())
                    assert producer.flush(30) == 0
                    for p in range(4):
                        acked[p].append(newest[p])
                    time.sleep(0.03)  # longer than PROBE_SPREAD_S: a kept probe spans one slice at most
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failed.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=produce)
    thread.start()
    apart: list[tuple[int, dict[str, int]]] = []
    looks = unproven = 0
    try:
        while not done.is_set():
            consumer = kofs.driver_consumer(broker.bootstrap)
            try:
                tps = kofs.partitions_of(consumer, [topic], broker.bootstrap)
                spreads.clear()
                ends = kofs.end_offsets(consumer, tps)[topic]
            finally:
                consumer.close()
            if min(spreads) > kofs.PROBE_SPREAD_S:
                unproven += 1
                continue
            looks += 1
            if looks >= 10:
                enough.set()
            slices = [bisect.bisect_right(acked[p], ends[str(p)]) for p in range(4)]
            if max(slices) - min(slices) > 1:
                apart.append((max(slices) - min(slices), ends))
    finally:
        thread.join()
    assert not failed, failed
    assert looks >= 10, (looks, unproven)
    assert not apart, f"{len(apart)} of {looks} look-ups had partitions slices apart: {apart}"


def _reader(bootstrap: str, topic: str, **options: int) -> KafkaStreamReader:
    return KafkaStreamReader(
        SourceConfig(
            bootstrap_servers=bootstrap,
            topics=[topic],
            proto_class="x",
            descriptor_set_b64="",
            columns=[],
            **options,
        )
    )


def test_the_driver_plans_from_the_beginning_and_within_the_read_limit(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("plan")
    broker.create_topic(topic, partitions=2)
    # record times: partition 0 one a second, partition 1 one in 4 s (a capped batch reads both to one moment)
    for i in range(10):
        _produce_at(broker.bootstrap, topic, 1, 1_800_000_000.0 + i)
    for i in range(3):
        _produce_at(broker.bootstrap, topic, 1, 1_800_000_000.0 + 4 * i, partition=1)
    reader = _reader(broker.bootstrap, topic)
    try:
        assert reader.initialOffset() == {topic: {"0": 0, "1": 0}}
        # a partition the checkpoint does not know starts at its beginning; at most 6 rows a batch, shared in
        # proportion to what each partition has pending (10 and 3, then 6 and 2)
        assert reader.latestOffset({}, ReadMaxRows(6)) == {topic: {"0": 4, "1": 1}}
        assert reader.latestOffset({topic: {"0": 4, "1": 1}}, ReadMaxRows(6)) == {topic: {"0": 8, "1": 2}}
        assert reader.latestOffset({topic: {"0": 8, "1": 2}}, ReadAllAvailable()) == {
            topic: {"0": 10, "1": 3}
        }
    finally:
        reader.stop()


def test_a_checkpoint_past_the_end_is_believed_after_three_looks_then_fails_naming_the_loss(broker) -> None:  # type: ignore[no-untyped-def]
    """The broker lost records (or the topic was made again): the checkpoint has read past the partition's
    end. A named fault, like Spark's failOnDataLoss: which partition, the position, the end, the way out."""
    topic = unique("recreated")
    broker.create_topic(topic, partitions=1)
    _produce_batches(broker.bootstrap, topic, {0: [4]})
    checkpoint = {topic: {"0": 50}}
    reader = _reader(broker.bootstrap, topic)
    try:
        # a broker starting up can briefly report an empty partition: no new batch until it says so 3 times
        assert reader.latestOffset(checkpoint, ReadAllAvailable()) == checkpoint
        assert reader.latestOffset(checkpoint, ReadAllAvailable()) == checkpoint
        with pytest.raises(DataLossError) as caught:
            reader.latestOffset(checkpoint, ReadAllAvailable())
    finally:
        reader.stop()
    assert caught.value.message == (
        f"{topic}[0]: the checkpoint's position 50 is past the partition's end 4 by 46 records: "
        "the broker lost records or the topic was recreated"
    )
    assert caught.value.hint is not None
    assert caught.value.hint.startswith(
        "to read on from offset 0, the partition's first offset when the loss was first seen (every record "
        "written since the broker came back is read; any it kept from before, again), set "
        "`fail_on_data_loss: false`"
    )


def test_with_fail_on_data_loss_false_a_checkpoint_past_the_end_reads_from_the_start(broker, caplog) -> None:  # type: ignore[no-untyped-def]
    """The topic was made again: its 4 records were all written since; none is skipped."""
    topic = unique("recreated")
    broker.create_topic(topic, partitions=1)
    _produce_batches(broker.bootstrap, topic, {0: [4]})
    checkpoint = {topic: {"0": 50}}
    reader = _reader(broker.bootstrap, topic, fail_on_data_loss=False)
    try:
        assert reader.latestOffset(checkpoint, ReadAllAvailable()) == checkpoint
        assert reader.latestOffset(checkpoint, ReadAllAvailable()) == checkpoint
        assert reader.latestOffset(checkpoint, ReadAllAvailable()) == {topic: {"0": 0}}
        _produce_batches(broker.bootstrap, topic, {0: [3]})
        assert reader.latestOffset({topic: {"0": 0}}, ReadAllAvailable()) == {topic: {"0": 7}}
    finally:
        reader.stop()
    assert (
        f"{topic}[0]: the checkpoint's position 50 is past the partition's end 4: the broker lost records or the "
        "topic was recreated; reading on from offset 0, where the new data began when the loss was seen now: the "
        "4 records it holds from there (offsets 0..3) are read, every one written since the broker came back "
        "(and any it kept from before, again); the records the checkpoint counted at offsets 0..49 are gone"
    ) in caplog.text


def _produce_at(bootstrap: str, topic: str, n: int, at_s: float, partition: int = 0) -> None:
    """Send ``n`` records stamped ``at_s`` (epoch seconds) to ``partition``, in one record batch."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(n):
        producer.produce(topic, f"r{i}".encode(), partition=partition, timestamp=int(at_s * 1000))
    assert producer.flush(30) == 0


def _paced_reader(bootstrap: str, topic: str) -> KafkaStreamReader:
    """A reader of windows that end every 60 s and close 10 s later."""
    return _reader(bootstrap, topic, close_period_ms=60_000, close_delay_ms=10_000)


def test_after_reading_past_a_window_boundary_the_driver_plans_one_batch_with_no_new_data(broker) -> None:  # type: ignore[no-untyped-def]
    """Once a planned batch reads a record stamped past a window's end plus the watermark delay, the next reads
    nothing, so that Spark closes the window in a no-data batch (job.sources.pacing). A batch capped by the
    read limit does not count (it stops short of the probed newest record); a backfill never waits."""
    topic = unique("pacing")
    broker.create_topic(topic, partitions=1)
    minute = 1_800_000_000.0
    reader = _paced_reader(broker.bootstrap, topic)
    try:
        offsets: dict = {}
        # (records to send, stamped minute + s, the read limit, the planned end): boundaries at minute + 10, + 70
        steps = [
            (3, 5.0, 0, 3),
            (2, 9.0, 0, 3),
            (0, 0, 0, 5),
            (4, 10.5, 0, 9),
            (1, 11.0, 0, 9),
            (0, 0, 0, 10),
            (2, 14.0, 0, 12),
            (4, 75.0, 2, 14),
            (0, 0, 2, 16),
            (0, 0, 2, 16),
            (0, 0, 0, 16),
        ]
        for i, (n, at, limit, expect) in enumerate(steps):
            if n:
                _produce_at(broker.bootstrap, topic, n, minute + at)
            offsets = reader.latestOffset(offsets, ReadMaxRows(limit) if limit else ReadAllAvailable())
            assert offsets == {topic: {"0": expect}}, (i, offsets)
    finally:
        reader.stop()
    # a backfill (trigger availableNow) reads on to its end: partition 0 reaches its end first, with a record past
    # a boundary, and the next batch still reads partition 1
    topic = unique("pacing-backfill")
    broker.create_topic(topic, partitions=2)
    _produce_at(broker.bootstrap, topic, 1, minute + 75)
    _produce_at(broker.bootstrap, topic, 20, minute + 76, partition=1)  # after it: a capped batch reads both
    backfill = _paced_reader(broker.bootstrap, topic)
    try:
        backfill.prepareForTriggerAvailableNow()
        offsets = {topic: {"0": 0, "1": 0}}
        for expect in ({"0": 1, "1": 6}, {"0": 1, "1": 13}):
            offsets = backfill.latestOffset(offsets, ReadMaxRows(7))
            assert offsets == {topic: expect}
    finally:
        backfill.stop()
