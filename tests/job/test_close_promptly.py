"""Windows close in a short no-data micro-batch right after their watermark passes (job.sources.pacing):
a live dagger on the real broker, Spark and InfluxDB, fed in real time."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from job.plan import plan
from job.produce.generator import generate
from job.produce.producer import produce
from job.runner import DaggerJob
from job.sinks.influx import InfluxSink
from tests.helpers import influx_points, make_spec, topic_and_db, unique
from tests.services import BrokerHandle

pytestmark = pytest.mark.integration

SQL = """SELECT COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '2' SECOND) AS window_timestamp
FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '2' SECOND)"""


class _Recording(InfluxSink):
    """The real InfluxDB sink, noting which micro-batch wrote each window."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.written_by: dict[int, int] = {}  # window end (epoch s) -> batch id

    def _write(self, table: pa.Table, batch_id: int) -> int:
        for end in table.column("window_timestamp").to_pylist():
            self.written_by[int(end.timestamp())] = batch_id
        return super()._write(table, batch_id)


def _feed(bootstrap: str, topic: str, sent: Counter, stop: threading.Event) -> None:
    """Until ``stop``, send 10 events every 50 ms stamped with the time they are sent; count them per 2-s
    window end."""
    def batches():  # type: ignore[no-untyped-def]
        seed = 0
        while not stop.is_set():
            batch = generate("booking", 10, seed=seed, start=datetime.now(UTC), duration_s=0.001)
            for ts in batch.table.column("event_timestamp").to_pylist():
                sent[(int(ts.timestamp()) // 2 + 1) * 2] += 1
            yield batch
            seed += 1
            time.sleep(0.05)

    produce(bootstrap, topic, batches(), progress=False, producer_config={"linger.ms": 5})


@pytest.mark.parametrize(("promptly", "at_close"), [(True, False), (False, False), (True, True)],
                         ids=["promptly", "default-spark", "read-at-window-close"])
def test_a_window_closes_in_a_no_data_batch_right_after_its_watermark(spark, tansu_broker, influxdb,  # type: ignore[no-untyped-def]
                                                                      tmp_path: Path, promptly: bool,
                                                                      at_close: bool) -> None:
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "close", partitions=1)
    spec, _ = make_spec(name=unique("close"), bootstrap=broker.bootstrap, topic=topic,
                        proto_class="daggers.events.BookingLog", sql=SQL, influx_url=influxdb.url, db=db,
                        measurement="m", checkpoint=tmp_path / "ckpt", watermark_delay_ms=0, trigger_interval_s=0.2)
    spec = spec.model_copy(update={"close_windows_promptly": promptly, "read_at_window_close": at_close})
    sink = _Recording(spec.sinks[0])
    job = DaggerJob(plan(spec, tmp_path), spark, sinks=[sink])
    sent: Counter = Counter()
    stop = threading.Event()
    query = job.start()
    feeder = threading.Thread(target=_feed, args=(broker.bootstrap, topic, sent, stop), daemon=True)
    feeder.start()
    try:
        deadline = time.time() + 30
        while not (query.lastProgress and query.lastProgress.numInputRows) and time.time() < deadline:
            time.sleep(0.05)
        warm = time.time()  # the first data batch is done: from here the query keeps up with the feeder
        time.sleep(8.5)
        feeder_stop = time.time()
        stop.set()
        feeder.join(30)
        deadline = time.time() + 30  # until the batches that wrote the windows have reported
        while time.time() < deadline and not (query.lastProgress and sink.written_by and
                                              int(query.lastProgress.batchId) >= max(sink.written_by.values())):
            time.sleep(0.1)
        rows_of = {int(p.batchId): int(p.numInputRows) for p in query.recentProgress}
        # (start epoch s, duration s, rows) of each batch, with data or not, that started while the feeder ran
        ran = [(datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp(),
                p.durationMs.get("triggerExecution", 0) / 1000, int(p.numInputRows)) for p in query.recentProgress]
        ran = [(start, took, rows) for start, took, rows in ran if warm <= start <= feeder_stop]
    finally:
        stop.set()
        job.stop()
    # windows that ended, and were closed, while the query kept up with events still arriving
    closed = sorted(end for end in sent if warm + 0.5 < end < feeder_stop - 1)
    assert len(closed) >= 3
    got = influx_points(influxdb, db, "m", "n", [])
    assert {end: got[(end,)] for end in closed} == {end: sent[end] for end in closed}  # exact counts
    # (a window written after rows_of was taken is not one of closed: those closed with the feeder running)
    empty = [end for end in closed if rows_of.get(sink.written_by[end]) == 0]
    if promptly:  # (most: under load a stamp probed from a batch of records may be its older first one, the
        # window then closes in the next data batch, as by default; still more than default's one at most)
        assert len(empty) >= max(2, len(closed) - 2), (closed, sink.written_by, rows_of)
    else:
        assert len(empty) <= 1, (closed, sink.written_by, rows_of)
    # a trigger every 0.2 s, new events every 50 ms: by default a batch at every trigger, so the query is
    # never idle while the feeder runs, however long a batch takes on a loaded machine: its batches, of data
    # and (promptly) the no-data ones that close windows between them, fill the time; read at window close,
    # about one data batch per 2-s window, the one that reads past its end, and idle in between (busy 7.97 and
    # 8.23 s of 8.5 here promptly and by default, 3.32 s read at window close)
    data_batches = sum(1 for n in rows_of.values() if n)
    if at_close:
        assert data_batches <= 2 * len(closed) + 3, (closed, rows_of)
    else:
        assert any(rows for _, _, rows in ran), rows_of
        busy = sum(min(took, feeder_stop - start) for start, took, _ in ran)
        assert busy >= 0.5 * (feeder_stop - warm), (ran, feeder_stop - warm)
