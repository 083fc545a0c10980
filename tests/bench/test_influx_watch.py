"""The benchmark's arrival watch (bench.influx_watch): line protocol counted by measurement and bucket, and
a real InfluxDB 1.6 forwarding its writes to it through a subscription."""

from __future__ import annotations

import time

import pytest

from bench.bench_density import HEAVY_QUERIES, LIGHT_QUERIES
from bench.influx_watch import ArrivalWatch, bucketer, count_lines, subscription_drops
from job.stack.influx import influx_query
from tests.helpers import unique

BUCKETS = bucketer(LIGHT_QUERIES + HEAVY_QUERIES)


def test_points_are_counted_by_measurement_and_bucket() -> None:
    body = (
        b"l003-pass,tag_driver_id=d1 speed_kmh=31 1795775761500000000\n"
        b"l003-pass,tag_driver_id=d\\ 2 speed_kmh=40 1795775761900000000\n"
        b"l003-pass,tag_driver_id=d3 speed_kmh=33 1795775762000000000\n"
        b"l000-s2filter,tag_s2id=1 drivers=3i 1795775760000000000\n"
        b"heavy-s2distinct,tag_s2id=2 drivers=1i 1795775820000000000\n"
        b"other,t=1 v=1 1795775760000000000\n"
        b"l001-hop,t=1 v=1\n"
    )  # no timestamp: not counted
    assert count_lines(body, BUCKETS) == {
        ("l003-pass", 1795775761): 2,
        ("l003-pass", 1795775762): 1,
        ("l000-s2filter", 1795775760): 1,
        ("heavy-s2distinct", 1795775820): 1,
    }
    assert count_lines(b"l001-hop,t=1 v=1 1795775790\n", BUCKETS, 1_000_000_000) == {
        ("l001-hop", 1795775760): 1
    }


def test_each_write_is_stamped_with_its_points_so_far() -> None:
    watch = ArrivalWatch(BUCKETS)
    watch.record(10.0, b"l001-hop,t=1 v=1 1795775760000000000\nl001-hop,t=2 v=1 1795775760000000000\n")
    watch.record(12.5, b"l001-hop,t=3 v=1 1795775760000000000\n")
    assert watch.arrivals == {("l001-hop", 1795775760): [(10.0, 2), (12.5, 3)]} and watch.writes == 2


@pytest.mark.integration
def test_influxdb_forwards_every_write_to_the_watch(influxdb) -> None:  # type: ignore[no-untyped-def]
    db = unique("watch").replace("-", "_")
    influxdb.create_database(db)
    watch = ArrivalWatch(BUCKETS)
    watch.start(influxdb.url, db)
    try:
        sent = time.time()
        influxdb.write(
            "l003-pass,tag_driver_id=a speed_kmh=31 1795775761000000000\n"
            "l003-pass,tag_driver_id=b speed_kmh=32 1795775761000000000\n",
            db,
        )
        influxdb.write("l002-join,tag_service_type=x pairs=4i 1795775760", db, precision="s")
        deadline = time.time() + 10
        while time.time() < deadline and len(watch.arrivals) < 2:
            time.sleep(0.05)
        arrivals = dict(watch.arrivals)
        assert {k: [n for _, n in v] for k, v in arrivals.items()} == {
            ("l003-pass", 1795775761): [2],
            ("l002-join", 1795775760): [1],
        }
        assert all(sent <= t < sent + 30 for v in arrivals.values() for t, _ in v)
        names = [row[0] for s in influxdb.query("SHOW SUBSCRIPTIONS") for row in s["values"]]
        assert len(names) == 1
    finally:
        watch.stop()
    assert watch.dropped == 0
    assert not [
        row for s in influxdb.query("SHOW SUBSCRIPTIONS") for row in s["values"] if s.get("name") == db
    ]


@pytest.mark.integration
def test_a_write_the_destination_refuses_counts_as_dropped(influxdb) -> None:  # type: ignore[no-untyped-def]
    """InfluxDB counts a subscription write that failed; the watch's ``dropped`` is that count's growth."""
    db = unique("dropwatch").replace("-", "_")
    influxdb.create_database(db)
    before = subscription_drops(influxdb.url)
    watch = ArrivalWatch(BUCKETS)
    watch.start(influxdb.url, db)
    watch._server.shutdown()  # the destination stops answering: InfluxDB's forward fails
    watch._server.server_close()
    try:
        influxdb.write("l003-pass,tag_driver_id=a speed_kmh=31 1795775761000000000\n", db)
        deadline = time.time() + 15
        while time.time() < deadline and subscription_drops(influxdb.url) == before:
            time.sleep(0.1)
        assert subscription_drops(influxdb.url) == before + 1
    finally:
        name = watch._influx[2] if watch._influx else ""
        influx_query(influxdb.url, f'DROP SUBSCRIPTION "{name}" ON "{db}"."autogen"', method="POST")
        watch._influx = None
    assert subscription_drops("http://127.0.0.1:1") == 0  # InfluxDB not there: nothing known
