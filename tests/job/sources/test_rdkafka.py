"""The source's librdkafka consumer without a Python object per record: the compiled loop over librdkafka's
messages (on messages laid out as librdkafka lays them out), what the reader keeps of a fetch, and, against
the real brokers, the same records, offsets, timestamps and keys as confluent-kafka's ``Consumer``."""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from job.errors import SourceError
from job.sources import rdkafka as rdk
from job.sources.config import OffsetRange
from job.sources.read import _take
from job.sources.stall import ClientLog, StallWatch
from tests.helpers import unique


class _Message(ctypes.Structure):
    """``rd_kafka_message_t`` as rdkafka.h declares it."""

    _fields_ = [
        ("err", ctypes.c_int),
        ("rkt", ctypes.c_void_p),
        ("partition", ctypes.c_int32),
        ("payload", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("key", ctypes.c_void_p),
        ("key_len", ctypes.c_size_t),
        ("offset", ctypes.c_int64),
        ("_private", ctypes.c_void_p),
    ]


_DESTROY = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_TIMESTAMP = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


def _drain(messages: list[tuple[int, bytes | None, bytes | None, int]], with_keys: bool) -> tuple[Any, ...]:
    """Run the compiled loop over (err, value, key, offset) messages; return the Fetched and the messages freed."""
    keep: list[Any] = []

    def place(data: bytes | None) -> int | None:
        if data is None:
            return None
        buf = ctypes.create_string_buffer(data, max(len(data), 1))
        keep.append(buf)
        return ctypes.addressof(buf)

    structs = [
        _Message(
            err=err,
            payload=place(value),
            len=len(value or b""),
            key=place(key),
            key_len=len(key or b""),
            offset=offset,
        )
        for err, value, key, offset in messages
    ]
    freed: list[int] = []
    destroy = _DESTROY(freed.append)
    stamps = {ctypes.addressof(m): 1_000 + i for i, m in enumerate(structs)}
    timestamp = _TIMESTAMP(lambda msg, kind: stamps[msg])
    n = len(structs)
    ptrs = np.array([ctypes.addressof(m) for m in structs], dtype=np.int64)
    lens = np.empty(n, dtype=np.int64)
    buf = np.empty(rdk._sizes(ptrs, n, lens), dtype=np.uint8)
    fetched = rdk.Fetched(
        buf,
        np.empty(n, np.int64),
        np.empty(n, np.int64),
        np.empty(n, np.int32),
        np.empty(n, np.bool_),
        np.empty(n, np.int64),
        np.empty(rdk._key_sizes(ptrs, n) if with_keys else 0, np.uint8),
        np.empty(n if with_keys else 0, np.int64),
        np.empty(n if with_keys else 0, np.bool_),
    )
    rdk._drain(
        ptrs,
        n,
        fetched.buf,
        fetched.ends,
        fetched.offsets,
        fetched.errs,
        fetched.nulls,
        fetched.timestamps,
        np.zeros(1, np.int32),
        rdk._address(destroy),
        rdk._address(timestamp),
        fetched.keys,
        fetched.key_ends,
        fetched.key_nulls,
    )
    if not with_keys:  # as BatchConsumer.consume hands it over
        fetched = dataclasses.replace(fetched, keys=None, key_ends=None, key_nulls=None)
    return fetched, [freed.index(p) if p in freed else -1 for p in ptrs.tolist()]


def test_the_compiled_loop_copies_each_value_and_key_and_frees_every_message() -> None:
    got, freed = _drain(
        [
            (0, b"first", b"k1", 10),
            (0, None, None, 11),  # a NULL value and a NULL key
            (0, b"", b"", 12),  # empty, not NULL
            (rdk.ERR_PARTITION_EOF, b"Fetch from broker 1 reached end of partition", None, 13),
            (0, b"\x00\xffbytes", b"k5", 14),
        ],
        with_keys=True,
    )
    assert freed == [0, 1, 2, 3, 4]
    assert got.offsets.tolist() == [10, 11, 12, 13, 14]
    assert got.errs.tolist() == [0, 0, 0, rdk.ERR_PARTITION_EOF, 0]
    assert got.timestamps.tolist() == [1000, 1001, 1002, 1003, 1004]
    assert [got.value(i) for i in range(5)] == [
        b"first",
        None,
        b"",
        b"Fetch from broker 1 reached end of partition",
        b"\x00\xffbytes",
    ]
    assert [got.key(i) for i in range(5)] == [b"k1", None, b"", None, b"k5"]
    assert got.starts.tolist() == [0, 5, 5, 5, 49]


def test_without_keys_none_are_copied() -> None:
    got, freed = _drain([(0, b"v", b"key", 3)], with_keys=False)
    assert freed == [0] and got.value(0) == b"v" and got.key(0) is None and got.keys is None


def _fetched(offsets: list[int], errs: list[int] | None = None) -> rdk.Fetched:
    n = len(offsets)
    values = [f"v{o}".encode() for o in offsets]
    return rdk.Fetched(
        np.frombuffer(b"".join(values), dtype=np.uint8),
        np.cumsum([len(v) for v in values]).astype(np.int64),
        np.array(offsets, dtype=np.int64),
        np.array(errs or [0] * n, dtype=np.int32),
        np.zeros(n, dtype=np.bool_),
        np.zeros(n, dtype=np.int64),
    )


RANGE = OffsetRange("t", 0, 100, 110)


def test_a_fetch_in_order_is_taken_up_to_the_ranges_end() -> None:
    watch = StallWatch(timeout_s=60, started=0.0)
    taken, next_offset, moved = _take(_fetched(list(range(104, 113))), 0, 104, RANGE, watch)
    assert taken.offsets.tolist() == list(range(104, 110)) and next_offset == 110 and moved
    assert [taken.got.value(int(i)) for i in taken.index] == [f"v{o}".encode() for o in range(104, 110)]
    # read on the secondary, whose offsets are 1,000 further on
    taken, next_offset, moved = _take(_fetched([1_105, 1_106]), 1_000, 105, RANGE, watch)
    assert taken.offsets.tolist() == [105, 106] and taken.index.tolist() == [0, 1] and next_offset == 107
    assert not watch.urgent


def test_records_from_below_are_passed_over_and_the_watch_told() -> None:
    watch = StallWatch(timeout_s=60, started=0.0)
    taken, next_offset, moved = _take(_fetched([98, 99, 100, 101, 101, 102]), 0, 100, RANGE, watch)
    assert taken.offsets.tolist() == [100, 101, 102] and taken.index.tolist() == [2, 3, 5]
    assert next_offset == 103 and moved and watch.behind == 3


def test_the_end_of_the_partition_and_errors_are_told_apart() -> None:
    eof, out_of_range, transport = rdk.ERR_PARTITION_EOF, rdk.ERR_AUTO_OFFSET_RESET, rdk.ERR_TRANSPORT
    watch = StallWatch(timeout_s=60, started=0.0)
    taken, next_offset, moved = _take(
        _fetched([107, 108, 108, 110], [0, transport, out_of_range, eof]), 0, 107, RANGE, watch
    )
    assert taken.offsets.tolist() == [107] and next_offset == 110 and moved
    assert watch.out_of_range == 1
    # the end of the partition before the range's end: nothing read, but the read moved
    taken, next_offset, moved = _take(_fetched([105], [eof]), 0, 105, RANGE, watch)
    assert len(taken.index) == 0 and next_offset == 105 and moved
    with pytest.raises(SourceError, match=r"reading t\[0\] failed: v105"):
        _take(_fetched([105], [-198]), 0, 105, RANGE, watch)


def test_librdkafka_refuses_an_unknown_property_by_its_name() -> None:
    with pytest.raises(rdk.RdkafkaError, match="no.such.property"):
        rdk.BatchConsumer({"bootstrap.servers": "127.0.0.1:9", "no.such.property": "1"})


def test_the_client_log_keeps_warnings_and_worse() -> None:
    said = ClientLog()
    said.line(7, "debug")
    said.line(4, "FAIL connection refused")
    said.line(3, "ERROR x")
    assert said.said() == "FAIL connection refused; ERROR x"


# ---- against the brokers -----------------------------------------------------------------------


@pytest.mark.integration
def test_the_same_records_as_confluent_kafkas_consumer(broker) -> None:  # type: ignore[no-untyped-def]
    topic = unique("rdkafka")
    broker.create_topic(topic, partitions=1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(3_000):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 else f"value-{i}".encode() * (i % 5)
        producer.produce(topic, value=value, key=key, timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0

    plain = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t", "enable.partition.eof": True})
    plain.assign([TopicPartition(topic, 0, 500)])
    expected: list[tuple[int, bytes | None, bytes | None, int]] = []
    try:
        while len(expected) < 2_500:
            for m in plain.consume(1_000, 1.0):
                if m.error() is None:
                    expected.append((m.offset(), m.value(), m.key(), m.timestamp()[1]))
    finally:
        plain.close()

    said = ClientLog()
    fast = rdk.BatchConsumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "t", "enable.partition.eof": True},
        log=said.line,
    )
    fast.assign([TopicPartition(topic, 0, 500)])
    got: list[tuple[int, bytes | None, bytes | None, int]] = []
    eof = False
    try:
        while not eof:
            f = fast.consume(700, 1.0, with_keys=True)
            for i in range(len(f)):
                if f.errs[i] == rdk.ERR_PARTITION_EOF:
                    eof = True
                elif f.errs[i] == 0:
                    got.append((int(f.offsets[i]), f.value(i), f.key(i), int(f.timestamps[i])))
    finally:
        fast.close()
    assert got == expected
    assert len(got) == 2_500 and got[0][0] == 500 and got[-1][0] == 2_999
