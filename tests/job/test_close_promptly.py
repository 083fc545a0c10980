"""Windows close in a short no-data micro-batch right after their watermark passes (job.sources.pacing).

Correctness only, whatever the machine's load: which micro-batch the source plans next, given what waits on a
real broker (the stream reader's own plan, step by step), and a live dagger on the real broker, Spark and
InfluxDB fed step by step, each step waited for, that writes every window exactly. How much sooner a window
leaves is a matter of speed, measured by ``bench/bench_close.py``, not here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable

from job.produce.generator import generate
from job.produce.producer import produce
from job.query.plan import plan
from job.query.runner import DaggerJob, observed_records
from job.sinks.influx import InfluxSink
from job.sources.kafka import KafkaStreamReader, SourceConfig
from tests.helpers import influx_points, make_spec, topic_and_db, unique, wait_until
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # a window boundary of both the 2-s and the 60-s windows
T0_MS = int(T0.timestamp() * 1000)


# ---- the reader's plan: deterministic, no Spark, no clock ----------------------------------------------


def _send(bootstrap: str, topic: str, stamps_ms: list[int]) -> None:
    """Send one record per stamp to partition 0, the Kafka timestamp set to it, in ONE record batch (a
    flush after), so that the probed record of the newest batch is one of these."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i, ts in enumerate(stamps_ms):
        producer.produce(topic, f"r{ts}-{i}".encode(), partition=0, timestamp=ts)
    assert producer.flush(30) == 0


def _reader(
    bootstrap: str, topic: str, period_ms: int, read_at_close: bool = False, gather_ms: int = 0
) -> KafkaStreamReader:
    return KafkaStreamReader(
        SourceConfig(
            bootstrap_servers=bootstrap,
            topics=[topic],
            proto_class="x",
            descriptor_set_b64="",
            columns=[],
            close_period_ms=period_ms,
            close_delay_ms=0,
            read_at_close=read_at_close,
            gather_ms=gather_ms,
        )
    )


def _plan(reader: KafkaStreamReader, start: dict) -> dict:
    return reader.latestOffset(start, ReadAllAvailable())


def _end(topic: str, n: int) -> dict:
    return {topic: {"0": n}}


@pytest.mark.parametrize("promptly", [True, False], ids=["promptly", "default-spark"])
def test_after_a_batch_that_reads_past_a_boundary_the_next_plan_is_empty(broker, promptly: bool) -> None:  # type: ignore[no-untyped-def]
    """Promptly: the batch after one that read past a window boundary reads nothing although records wait, so
    Spark closes the window in a no-data batch; the one after reads them. By default it reads them at once."""
    topic = unique("pace")
    broker.create_topic(topic, partitions=1)
    reader = _reader(broker.bootstrap, topic, 60_000 if promptly else 0)
    try:
        _send(broker.bootstrap, topic, [T0_MS + 1_000 * (i + 1) for i in range(5)])  # inside [T0, T0 + 60 s)
        assert _plan(reader, {}) == _end(topic, 5)
        if (
            promptly
        ):  # the first read passes the boundary before it, as far as the source knows: one empty batch
            assert _plan(reader, _end(topic, 5)) == _end(topic, 5)
        _send(broker.bootstrap, topic, [T0_MS + 10_000])  # still inside: no boundary crossed
        assert _plan(reader, _end(topic, 5)) == _end(topic, 6)
        _send(broker.bootstrap, topic, [T0_MS + 61_000, T0_MS + 62_000])  # past the boundary T0 + 60 s
        assert _plan(reader, _end(topic, 6)) == _end(topic, 8)
        _send(broker.bootstrap, topic, [T0_MS + 63_000])  # waiting when the next batch is planned
        if promptly:
            assert _plan(reader, _end(topic, 8)) == _end(topic, 8)  # the short batch that closes the window
        assert _plan(reader, _end(topic, 8)) == _end(topic, 9)
        assert _plan(reader, _end(topic, 9)) == _end(topic, 9)  # nothing new, no boundary: nothing to hold
        _send(broker.bootstrap, topic, [T0_MS + 125_000])  # past T0 + 120 s: one empty batch again
        assert _plan(reader, _end(topic, 9)) == _end(topic, 10)
        _send(broker.bootstrap, topic, [T0_MS + 126_000])
        if promptly:
            assert _plan(reader, _end(topic, 10)) == _end(topic, 10)
        assert _plan(reader, _end(topic, 10)) == _end(topic, 11)
    finally:
        reader.stop()


def test_read_at_window_close_reads_only_what_closes_a_window_then_closes_it(broker) -> None:  # type: ignore[no-untyped-def]
    """Read at window close (60-s windows: no wall-clock period passes during the test): after the first read,
    records inside the window last read wait; a record past its boundary is read, then an empty batch."""
    topic = unique("pace-close")
    broker.create_topic(topic, partitions=1)
    reader = _reader(broker.bootstrap, topic, 60_000, read_at_close=True)
    try:
        _send(broker.bootstrap, topic, [T0_MS + 1_000, T0_MS + 2_000])
        assert _plan(reader, {}) == _end(topic, 2)  # the first read is always made
        _send(broker.bootstrap, topic, [T0_MS + 30_000, T0_MS + 40_000])  # the same window: they wait
        assert _plan(reader, _end(topic, 2)) == _end(topic, 2)
        assert _plan(reader, _end(topic, 2)) == _end(topic, 2)
        _send(broker.bootstrap, topic, [T0_MS + 61_000])  # closes [T0, T0 + 60 s): read everything waiting
        assert _plan(reader, _end(topic, 2)) == _end(topic, 5)
        assert _plan(reader, _end(topic, 5)) == _end(topic, 5)  # then the short batch
    finally:
        reader.stop()


def _ticked(offsets: dict, tick: int) -> dict:
    return {**offsets, "@tick": tick}


def test_a_gathering_reader_asks_for_each_closing_batch_with_a_tick(broker) -> None:  # type: ignore[no-untyped-def]
    """A gathering source's query runs no batch without new data (job.query.runner.eviction_conf): the batch
    that closes a window is asked for by moving the offsets' tick on, once a boundary was read past, and no
    other: records held back between boundaries make no batch."""
    topic = unique("pace-tick")
    broker.create_topic(topic, partitions=1)
    reader = _reader(broker.bootstrap, topic, 60_000, gather_ms=30_000)  # no wall-clock period passes here
    try:
        _send(broker.bootstrap, topic, [T0_MS + 1_000 * (i + 1) for i in range(5)])
        assert _plan(reader, {}) == _end(topic, 5)  # the first read is always made
        # it passes the boundary before it, as far as the source knows: one closing batch, then none
        assert _plan(reader, _end(topic, 5)) == _ticked(_end(topic, 5), 1)
        assert _plan(reader, _ticked(_end(topic, 5), 1)) == _ticked(_end(topic, 5), 1)
        _send(broker.bootstrap, topic, [T0_MS + 10_000])  # far from the next boundary: it gathers
        assert _plan(reader, _ticked(_end(topic, 5), 1)) == _ticked(_end(topic, 5), 1)
        _send(broker.bootstrap, topic, [T0_MS + 61_000, T0_MS + 62_000])  # past T0 + 60 s: read at once
        assert _plan(reader, _ticked(_end(topic, 5), 1)) == _ticked(_end(topic, 8), 1)
        assert _plan(reader, _ticked(_end(topic, 8), 1)) == _ticked(_end(topic, 8), 2)  # the closing batch
        assert _plan(reader, _ticked(_end(topic, 8), 2)) == _ticked(_end(topic, 8), 2)
        assert (
            reader.partitions(_ticked(_end(topic, 8), 1), _ticked(_end(topic, 8), 2)) == []
        )  # reads nothing
    finally:
        reader.stop()


def test_a_gathering_reader_closes_what_is_due_when_its_topic_goes_quiet(broker) -> None:  # type: ignore[no-untyped-def]
    """Record timestamps that are not event times can hide a boundary from the pacer: when nothing new waits
    after a batch that read records, one batch that reads nothing closes what its watermark passed."""
    topic = unique("pace-quiet")
    broker.create_topic(topic, partitions=1)
    reader = _reader(broker.bootstrap, topic, 60_000, gather_ms=1)  # reads whatever waits
    try:
        _send(broker.bootstrap, topic, [T0_MS + 1_000, T0_MS + 2_000])
        assert _plan(reader, {}) == _end(topic, 2)
        assert _plan(reader, _end(topic, 2)) == _ticked(_end(topic, 2), 1)  # the boundary before it
        _send(broker.bootstrap, topic, [T0_MS + 3_000])
        assert _plan(reader, _ticked(_end(topic, 2), 1)) == _ticked(_end(topic, 3), 1)
        assert _plan(reader, _ticked(_end(topic, 3), 1)) == _ticked(_end(topic, 3), 2)  # quiet: one batch
        assert _plan(reader, _ticked(_end(topic, 3), 2)) == _ticked(_end(topic, 3), 2)  # then none
    finally:
        reader.stop()


def test_a_resumed_gathering_reader_closes_what_is_due_at_its_first_plan(broker) -> None:  # type: ignore[no-untyped-def]
    """A run killed right after the batch that moved the watermark (before the batch that closes the window)
    resumes its checkpoint: its first plan with nothing new closes what is due; a new query's does not."""
    topic = unique("pace-resume")
    broker.create_topic(topic, partitions=1)
    _send(broker.bootstrap, topic, [T0_MS + 1_000, T0_MS + 61_000])
    fresh = _reader(broker.bootstrap, topic, 60_000, gather_ms=4_000)
    resumed = _reader(broker.bootstrap, topic, 60_000, gather_ms=4_000)
    try:
        assert fresh.initialOffset() == _end(topic, 0)  # start_from earliest
        assert _plan(fresh, _end(topic, 2)) == _end(topic, 2)  # (as if read) nothing new: no batch
        assert _plan(resumed, _ticked(_end(topic, 2), 7)) == _ticked(
            _end(topic, 2), 8
        )  # Spark gave no initialOffset
        assert _plan(resumed, _ticked(_end(topic, 2), 8)) == _ticked(_end(topic, 2), 8)  # once
    finally:
        fresh.stop()
        resumed.stop()


# ---- a live dagger, fed step by step: every window exactly, each closed by a no-data batch -------------

SQL = """SELECT COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '2' SECOND) AS window_timestamp
FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '2' SECOND)"""


def _records(progress: dict) -> int:
    """The records a micro-batch read: the source aggregates COUNT(*) first (job.sql.partial), so Spark's
    ``numInputRows`` counts groups, and the records they stand for are an observed metric."""
    counted = observed_records(progress)
    return int(progress.get("numInputRows") or 0) if counted is None else counted


class _Recording(InfluxSink):
    """The real InfluxDB sink, noting which micro-batch wrote each window."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.written_by: dict[int, int] = {}  # window end (epoch s) -> batch id

    def _write(self, table: pa.Table, batch_id: int) -> int:
        for end in table.column("window_timestamp").to_pylist():
            self.written_by[int(end.timestamp())] = batch_id
        return super()._write(table, batch_id)


@pytest.mark.parametrize(
    ("promptly", "at_close"),
    [(True, False), (False, False), (True, True)],
    ids=["promptly", "default-spark", "read-at-window-close"],
)
def test_a_live_dagger_writes_every_window_exactly_each_in_a_no_data_batch(
    spark,
    tansu_broker,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    promptly: bool,
    at_close: bool,
) -> None:
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "close", partitions=1)
    spec, _ = make_spec(
        name=unique("close"),
        bootstrap=broker.bootstrap,
        topic=topic,
        proto_class="daggers.events.BookingLog",
        sql=SQL,
        influx_url=influxdb.url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        watermark_delay_ms=0,
        trigger_interval_s=0.2,
    )
    spec = spec.model_copy(update={"close_windows_promptly": promptly, "read_at_window_close": at_close})
    sink = _Recording(spec.sinks[0])
    job = DaggerJob(plan(spec, tmp_path), spark, sinks=[sink])
    # step k: 10 + k events inside the 2-s window ending at T0 + 2 (k + 1) s; each step closes the window before
    steps = [
        generate("booking", 10 + k, seed=k, start=T0 + timedelta(seconds=2 * k), duration_s=1.5)
        for k in range(4)
    ]
    ends = [int(T0.timestamp()) + 2 * (k + 1) for k in range(4)]
    query = job.start()
    try:
        read = 0
        for k, step in enumerate(steps):
            # one record batch (its flush sends it): a reader never sees half of a step
            produce(broker.bootstrap, topic, step, progress=False, producer_config={"linger.ms": 1000})
            read += 10 + k

            def caught_up(n: int = read) -> bool:
                return sum(_records(json.loads(p.json)) for p in query.recentProgress) >= n

            wait_until(f"step {k} to be read", caught_up, 120, every_s=0.1)
            if k:
                wait_until(
                    f"the window ending at step {k}'s start to be written",
                    lambda e=ends[k - 1]: e in sink.written_by,
                    120,
                    every_s=0.1,
                )
        wait_until(
            "the batch that wrote the last closed window to report",
            lambda: (
                query.lastProgress is not None
                and int(query.lastProgress.batchId) >= max(sink.written_by.values())
            ),
            120,
            every_s=0.1,
        )
        rows_of = {int(p.batchId): int(p.numInputRows) for p in query.recentProgress}
    finally:
        job.stop()
    closed = ends[:3]
    assert sorted(sink.written_by) == closed  # the last step's window is still open
    got = influx_points(influxdb, db, "m", "n", [])
    assert {end: got[(end,)] for end in closed} == {ends[0]: 10, ends[1]: 11, ends[2]: 12}
    assert len(got) == 3
    # nothing waits when a window closes here (each step is read before the next is sent), so even Spark's own
    # pacing closes it in a no-data batch: the source must not plan data into that batch, nor skip it
    assert all(rows_of[sink.written_by[end]] == 0 for end in closed), (sink.written_by, rows_of)
