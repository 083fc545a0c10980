"""A gathering dagger live (job.sources.pacing): record stamps a minute behind the clock, fed by ``daggers produce``
over a real broker, Spark and InfluxDB. Every window is exact and leaves within a bound of its closing record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition

from job.query.plan import plan
from job.query.runner import DaggerJob, observed_records
from tests.helpers import bookings_to_influx, influx_points, topic_and_db, unique, wait_until
from tests.services import BrokerHandle

# A live latency bound (6 s) over 95 s of producing: in the fault group, which runs apart from the suite's
# four workers (scripts/test.sh --faults, CI's --all), so that their load does not stretch what it measures.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.fault]

WINDOW_S = 15
LAG_S = 60  # the first event is stamped this long before the producer starts; stamps then follow the clock
RATE = 200
DURATION_S = 95
#: from the closing record's arrival to its window in InfluxDB: the batch in flight, the one that reads it and
#: the one that closes it, each a few seconds at most here (a window that waits for a gathered read, 8 s, or for
#: the next burst, fails it)
BOUND_S = float(os.environ.get("PACING_LIVE_BOUND_S", "6.0"))
CPU_HOG = os.environ.get("PACING_LIVE_HOG") == "1"  # a busy loop beside it (one of the two cores)

SQL = f"""SELECT COUNT(*) AS n, TUMBLE_END(rowtime, INTERVAL '{WINDOW_S}' SECOND) AS window_timestamp
FROM data_stream GROUP BY TUMBLE(rowtime, INTERVAL '{WINDOW_S}' SECOND)"""


def _windows_seen(url: str, db: str, seen: dict[int, float], stop: threading.Event) -> None:
    """Poll InfluxDB every 0.1 s; note when each window end first appears (wall time)."""
    while not stop.is_set():
        resp = requests.get(
            f"{url}/query", params={"db": db, "epoch": "s", "q": 'SELECT n FROM "m"'}, timeout=10
        )
        now = time.time()
        for result in resp.json().get("results", []):
            for series in result.get("series", []) or []:
                for t, _ in series["values"]:
                    seen.setdefault(int(t), now)
        stop.wait(0.1)


def _arrivals(bootstrap: str, topic: str, came: dict[int, float], stop: threading.Event) -> None:
    """Tail ``topic``: note when (wall time) a record stamped at or past each window end was first on the broker."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("tail"),
            "fetch.wait.max.ms": 20,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    newest = 0
    while not stop.is_set():
        for m in consumer.consume(10_000, timeout=0.05):
            newest = max(newest, m.timestamp()[1] // 1000)
        now = time.time()
        for end in range(newest // WINDOW_S * WINDOW_S, newest - 3 * WINDOW_S, -WINDOW_S):
            came.setdefault(end, now)
    consumer.close()


def _records(progress: dict) -> int:
    """The records a micro-batch read (the source counts them first: see tests/job/test_close_promptly)."""
    counted = observed_records(progress)
    return int(progress.get("numInputRows") or 0) if counted is None else counted


def _counts(bootstrap: str, topic: str) -> Counter[int]:
    """Return the records of ``topic`` per window end, by Kafka timestamp (CreateTime: the event time)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("count"), "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: Counter[int] = Counter()
    idle = 0
    while idle < 5:
        msgs = consumer.consume(10_000, timeout=1.0)
        idle = idle + 1 if not msgs else 0
        for m in msgs:
            assert m.error() is None, m.error()
            out[(m.timestamp()[1] // 1000) // WINDOW_S * WINDOW_S + WINDOW_S] += 1
    consumer.close()
    return out


def test_a_gathering_dagger_with_stamps_behind_the_clock_closes_every_window_exactly_and_soon(
    spark,
    tansu_broker,
    influxdb,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    broker = BrokerHandle("tansu", tansu_broker)
    topic, db = topic_and_db(broker, influxdb, "pace-live", partitions=1)
    spec, _ = bookings_to_influx(
        "pace-live",
        broker.bootstrap,
        topic,
        influxdb.url,
        db,
        tmp_path / "ckpt",
        sql=SQL,
        watermark_delay_ms=0,
    )
    job = DaggerJob(plan(spec, tmp_path), spark)
    assert job.plan.streams[0].source.gather_ms == 8000
    seen: dict[int, float] = {}
    stop = threading.Event()
    came: dict[int, float] = {}
    poller = threading.Thread(target=_windows_seen, args=(influxdb.url, db, seen, stop), daemon=True)
    tail = threading.Thread(target=_arrivals, args=(broker.bootstrap, topic, came, stop), daemon=True)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if CPU_HOG else None
    query = job.start()
    try:
        wait_until("the query to run", lambda: query.lastProgress is not None, 180, every_s=0.2)
        start = (datetime.now(UTC) - timedelta(seconds=LAG_S)).replace(microsecond=0)
        sent_at = time.time()
        poller.start()
        tail.start()
        daggers = Path(sys.executable).with_name("daggers")
        out = subprocess.run(
            [str(daggers), "produce", "--stream", "booking", "--topic", topic, "--bootstrap", broker.bootstrap,
             "--rate", str(RATE), "--duration", str(DURATION_S), "--start", start.isoformat(), "--no-progress"],
            capture_output=True, text=True, timeout=DURATION_S + 120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        expected = _counts(broker.bootstrap, topic)
        last_stamp = max(expected) - WINDOW_S  # the newest record's window start: that window stays open
        closed = sorted(end for end in expected if end <= last_stamp)
        wait_until("every closed window", lambda: all(e in seen for e in closed), 120, every_s=0.2)
        batches = [
            (
                round(datetime.fromisoformat(p.timestamp).timestamp() - sent_at, 1),
                _records(json.loads(p.json)),
            )
            for p in query.recentProgress
            if datetime.fromisoformat(p.timestamp).timestamp() >= sent_at
        ]
    finally:
        stop.set()
        job.stop()
        tail.join(10)
        if hog is not None:
            hog.kill()
            hog.wait()
    got = influx_points(influxdb, db, "m", "n", [])
    assert {end: got[(end,)] for end in closed} == {end: expected[end] for end in closed}
    assert sorted(e for (e,) in got) == closed
    # from the closing record's arrival on the broker (the first stamped at or past the window end) to the window
    latency = {end: round(seen[end] - came[end], 2) for end in closed}
    print(f"latency of each window (s): {latency}")
    print(f"micro-batches (s after the producer started, records): {len(batches)}: {batches}")
    print(
        f"closing records came at (s after the producer started): {[round(came[e] - sent_at, 1) for e in closed]}"
    )
    # the first window is read in the first batches, before a gathered batch was timed
    steady = {end: lat for end, lat in latency.items() if end - start.timestamp() > WINDOW_S}
    assert steady and max(steady.values()) <= BOUND_S, latency
