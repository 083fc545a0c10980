"""The InfluxDB sink over both APIs: v1 against a real influxd 1.6 (exact points, idempotent overwrite),
v2 through influxdb-client against a real VictoriaMetrics (exact samples read back with PromQL), the
precision taken from the data, the token never logged, and clear errors at open."""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
import requests

from job.errors import SinkError
from job.sinks.influx import InfluxSink
from job.spec import InfluxSinkSpec
from job.stack.ports import free_port
from tests.helpers import influx_points

pytestmark = pytest.mark.integration

TOKEN = "tok-" + uuid.uuid4().hex


def points(windows: list[datetime], counts: list[int], fares: list[float]) -> pa.Table:
    return pa.table(
        {
            "tag_s2id": ["-7830489120239730688", "3344475382534373376", "-7830489120239730688"][
                : len(counts)
            ],
            "label_city": ["Jakarta", "Surabaya", "Jakarta"][: len(counts)],
            "num_of_bookings": pa.array(counts, pa.int64()),
            "avg_fare": pa.array(fares, pa.float64()),
            "window_timestamp": pa.array(windows, pa.timestamp("us", tz="UTC")),
        }
    )


def v1_sink(url: str, db: str, **settings: object) -> InfluxSink:
    return InfluxSink(
        InfluxSinkSpec.model_validate(
            {"type": "influx", "url": url, "database": db, "measurement": "bookings", **settings}
        ),
        sleep=lambda s: None,
    )


def v2_sink(url: str, measurement: str, **settings: object) -> InfluxSink:
    spec = {
        "type": "influx",
        "api": "v2",
        "url": url,
        "bucket": "daggers",
        "org": "gojek",
        "token": TOKEN,
        "measurement": measurement,
        **settings,
    }
    return InfluxSink(InfluxSinkSpec.model_validate(spec), sleep=lambda s: None)


def test_v1_exact_points_and_a_replay_overwrites_them(influxdb) -> None:  # type: ignore[no-untyped-def]
    db = f"db_{uuid.uuid4().hex[:8]}"
    influxdb.create_database(db)
    w1, w2 = datetime(2026, 3, 2, 8, 1, tzinfo=UTC), datetime(2026, 3, 2, 8, 2, tzinfo=UTC)
    sink = v1_sink(influxdb.url, db, batch_size=2)  # 3 points: two HTTP writes
    sink.open()
    first = points([w1, w1, w2], [3, 1, 4], [10.5, 7.0, 12.25])
    assert sink.write(first, 0) == 3
    want = {
        (int(w1.timestamp()), "-7830489120239730688", "Jakarta"): 3,
        (int(w1.timestamp()), "3344475382534373376", "Surabaya"): 1,
        (int(w2.timestamp()), "-7830489120239730688", "Jakarta"): 4,
    }
    assert influx_points(influxdb, db, "bookings", "num_of_bookings", ["tag_s2id", "city"]) == want
    assert sink.write(first, 0) == 3  # the replayed batch
    assert influx_points(influxdb, db, "bookings", "num_of_bookings", ["tag_s2id", "city"]) == want
    sink.write(points([w2], [9], [1.5]), 1)  # a later value for the same window and tags overwrites
    want[(int(w2.timestamp()), "-7830489120239730688", "Jakarta")] = 9
    assert influx_points(influxdb, db, "bookings", "num_of_bookings", ["tag_s2id", "city"]) == want
    assert (
        influx_points(influxdb, db, "bookings", "avg_fare", ["tag_s2id", "city"])[
            (int(w2.timestamp()), "-7830489120239730688", "Jakarta")
        ]
        == 1.5
    )
    assert sink.metrics.rows_written == 7 and sink.metrics.writes == 3
    sink.close()


def test_v1_missing_database_fails_at_open(influxdb) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SinkError, match=r"InfluxDB database 'nope_db' does not exist at http://127"):
        v1_sink(influxdb.url, "nope_db").open()


def _series(victoria, query: str, at: datetime) -> dict[tuple[str, ...], list[tuple[int, float]]]:  # type: ignore[no-untyped-def]
    """Run PromQL ``query`` (a range vector) at ``at``: (name, s2id, city) -> [(time ms, value), ...]."""
    resp = requests.get(
        f"{victoria.url}/api/v1/query", params={"query": query, "time": f"{at.timestamp():.3f}"}, timeout=10
    )
    resp.raise_for_status()
    out = {}
    for r in resp.json()["data"]["result"]:
        m = r["metric"]
        out[(m["__name__"], m["tag_s2id"], m["city"])] = [
            (round(float(t) * 1000), float(v)) for t, v in r["values"]
        ]
    return out


def test_v2_through_influxdb_client_to_victoria_metrics(victoria_metrics, caplog) -> None:  # type: ignore[no-untyped-def]
    measurement = f"m{uuid.uuid4().hex[:8]}"
    # VictoriaMetrics drops points older than its retention (a month), so the windows are recent ones.
    w1 = datetime.fromtimestamp(time.time() // 60 * 60 - 240, UTC)
    w2 = w1 + timedelta(minutes=1, milliseconds=500)  # a ms timestamp: the batch is written with precision ms
    sink = v2_sink(victoria_metrics.url, measurement)
    with caplog.at_level(logging.DEBUG):
        sink.open()
        assert sink.write(points([w1, w1, w2], [3, 1, 4], [10.5, 7.0, 12.25]), 0) == 3
    requests.get(f"{victoria_metrics.url}/internal/force_flush", timeout=10).raise_for_status()
    ms1, ms2 = int(w1.timestamp() * 1000), int(w2.timestamp() * 1000)
    got = _series(victoria_metrics, f'{{__name__=~"{measurement}_.*"}}[10m]', w2 + timedelta(seconds=1))
    assert got == {
        (f"{measurement}_num_of_bookings", "-7830489120239730688", "Jakarta"): [(ms1, 3.0), (ms2, 4.0)],
        (f"{measurement}_num_of_bookings", "3344475382534373376", "Surabaya"): [(ms1, 1.0)],
        (f"{measurement}_avg_fare", "-7830489120239730688", "Jakarta"): [(ms1, 10.5), (ms2, 12.25)],
        (f"{measurement}_avg_fare", "3344475382534373376", "Surabaya"): [(ms1, 7.0)],
    }
    assert TOKEN not in caplog.text and TOKEN not in repr(sink) and TOKEN not in str(sink.metrics.to_dict())
    assert "Authorization" not in caplog.text
    sink.close()


def test_v2_errors_at_open(influxdb) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SinkError) as info:
        v2_sink(f"http://127.0.0.1:{free_port()}", "m").open()
    assert "is unreachable: ConnectionError" in info.value.message and TOKEN not in str(info.value)
    assert (
        info.value.hint == "start the local stack with `daggers up`, or set the sink's url to your InfluxDB"
    )
    with pytest.raises(SinkError, match=r"^InfluxDB 1.6.7\S* at http://127.0.0.1:\d+ has no v2 write API"):
        v2_sink(influxdb.url, "m").open()


def test_v2_write_failures_are_retried_then_surfaced(victoria_metrics) -> None:  # type: ignore[no-untyped-def]
    sink = v2_sink(victoria_metrics.url, "m", max_retries=2)
    sink.open()
    sink.url = f"http://127.0.0.1:{free_port()}"  # the server goes away after the start
    sink._client.api_client.configuration.host = sink.url
    now = datetime.fromtimestamp(time.time() // 60 * 60, UTC)
    with pytest.raises(
        SinkError,
        match=r"giving up writing to InfluxDB at http://127.0.0.1:\d+ after 3 attempts: "
        r"cannot reach",
    ):
        sink.write(points([now], [1], [1.0]), 0)
    assert (
        sink.metrics.retries == 2
        and sink.metrics.failures == 1
        and TOKEN not in (sink.metrics.last_error or "")
    )
    sink.close()


def test_the_waits_between_retries_stop_growing_at_max_backoff_s() -> None:
    waits: list[float] = []
    spec = InfluxSinkSpec.model_validate(
        {
            "type": "influx",
            "url": f"http://127.0.0.1:{free_port()}",
            "database": "d",
            "measurement": "m",
            "max_retries": 7,
            "max_backoff_s": 1.5,
        }
    )
    sink = InfluxSink(spec, sleep=waits.append)
    with pytest.raises(SinkError, match=r"after 8 attempts: cannot reach"):
        sink.write(points([datetime(2026, 3, 2, 8, 1, tzinfo=UTC)], [1], [1.0]), 0)
    assert len(waits) == 7 and sink.metrics.retries == 7
    bounds = [
        (0.5 * b, 1.5 * b) for b in (0.5, 1, 1.5, 1.5, 1.5, 1.5, 1.5)
    ]  # 0.5 s doubling, capped; x0.5-1.5
    assert all(lo <= w <= hi for w, (lo, hi) in zip(waits, bounds, strict=True)), waits


def test_v1_a_write_that_gets_no_answer_is_retried_after_timeout_s(influxdb) -> None:  # type: ignore[no-untyped-def]
    import socket

    db = f"db_{uuid.uuid4().hex[:8]}"
    influxdb.create_database(db)
    sink = v1_sink(influxdb.url, db, max_retries=1, timeout_s=0.5)
    sink.open()
    silent = socket.create_server(("127.0.0.1", 0))  # accepts connections (backlog), never answers
    try:
        sink.url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(
            SinkError, match=r"giving up writing to InfluxDB at http://127.0.0.1:\d+ after 2 attempts"
        ):
            sink.write(points([datetime(2026, 3, 2, 8, 1, tzinfo=UTC)], [1], [1.0]), 0)
        assert time.monotonic() - started < 20  # two attempts of 0.5 s, not 30 s each
        assert sink.metrics.retries == 1
    finally:
        silent.close()
        sink.close()


def test_v1_a_batch_of_many_bodies_written_concurrently_is_exact(influxdb) -> None:  # type: ignore[no-untyped-def]
    db = f"db_{uuid.uuid4().hex[:8]}"
    influxdb.create_database(db)
    n, start = 12_345, datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    table = pa.table(
        {
            "tag_cell": [f"c{i % 1000}" for i in range(n)],
            "drivers": pa.array([i % 97 for i in range(n)], pa.int64()),
            "window_timestamp": pa.array(
                [start + timedelta(minutes=i // 1000) for i in range(n)], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    sink = v1_sink(influxdb.url, db, batch_size=1000, write_concurrency=4)  # 13 bodies, 4 in flight
    sink.open()
    assert sink.write(table, 0) == n
    got = influx_points(influxdb, db, "bookings", "drivers", ["tag_cell"])
    assert got == {
        (int((start + timedelta(minutes=i // 1000)).timestamp()), f"c{i % 1000}"): i % 97 for i in range(n)
    }
    sink.close()


def test_v1_concurrent_bodies_that_cannot_be_written_fail_the_batch(influxdb) -> None:  # type: ignore[no-untyped-def]
    sink = v1_sink(
        f"http://127.0.0.1:{free_port()}", "nowhere", batch_size=2, write_concurrency=3, max_retries=1
    )
    table = points([datetime(2026, 3, 2, 8, 1, tzinfo=UTC)] * 3, [1, 2, 3], [1.0, 2.0, 3.0])
    with pytest.raises(
        SinkError, match="giving up writing to InfluxDB at http://127.0.0.1:.* after 2 attempts"
    ):
        sink.write(table, 0)
    sink.close()
