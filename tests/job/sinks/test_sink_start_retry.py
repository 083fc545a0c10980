"""A dagger that starts while its sink's server is down: the sink's start check is tried again with the sink's
own retry policy (``max_retries``, ``max_backoff_s``), each wait written to ``status.json`` as a write's retry
is (so the dagger reads ``sink retrying``), and the dagger starts once the server answers. A sink that refuses
(a missing database it may not create) still fails at once. A real influxd, started mid-test on the port the
sink was pointed at; no Spark."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from job.control.health_model import sink_retrying
from job.errors import SinkError
from job.query.plan import plan
from job.query.runner import DaggerJob
from job.sinks.base import start_sinks
from job.stack.influx import InfluxServer
from job.stack.ports import free_port, free_ports
from tests.helpers import BOOKINGS_SQL, make_spec, unique, wait_until
from tests.services import InfluxHandle, _serving

pytestmark = pytest.mark.integration


def _job(tmp_path: Path, url: str, db: str, sink_extra: str) -> DaggerJob:
    spec, _ = make_spec(
        name=unique("starting"),
        bootstrap="127.0.0.1:9",
        topic="t",
        proto_class="daggers.events.BookingLog",
        sql=BOOKINGS_SQL,
        influx_url=url,
        db=db,
        measurement="m",
        checkpoint=tmp_path / "ckpt",
        sink_extra=sink_extra,
    )
    return DaggerJob(plan(spec, tmp_path), spark=None)  # type: ignore[arg-type]  # starting sinks needs no session


def _sink_status(job: DaggerJob) -> dict[str, Any]:
    try:
        return dict(json.loads(job.status_path.read_text())["sinks"]["influx"])
    except (OSError, ValueError, KeyError):
        return {}


def _catch(errors: list[BaseException], fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - handed to the test
        errors.append(exc)


def test_a_sink_down_at_start_is_retried_says_so_and_starts_when_influxdb_answers(tmp_path: Path) -> None:
    port, bind_port = free_ports(2)
    url = f"http://127.0.0.1:{port}"
    job = _job(tmp_path, url, "late", "max_backoff_s: 0.5\nmax_retries: 200\ncreate_database: true")
    errors: list[BaseException] = []
    starter = threading.Thread(target=lambda: _catch(errors, start_sinks, job.sinks), daemon=True)
    starter.start()
    seen: list[dict[str, Any]] = []

    def retried_twice() -> bool:
        retrying = _sink_status(job).get("retrying")
        if retrying and (not seen or seen[-1] != retrying):
            seen.append(retrying)
        return bool(retrying) and retrying["attempt"] >= 2 or bool(errors)

    wait_until("status.json to show the start's retry 2", retried_twice, 60, every_s=0.05)
    assert errors == [] and starter.is_alive()
    assert {r["of"] for r in seen} == {200}
    assert {r["error"] for r in seen} == {f"InfluxDB at {url} is unreachable: ConnectionError"}
    assert all(r["since"] < r["next_at"] <= r["since"] + 200 * 0.5 for r in seen)
    status = json.loads(job.status_path.read_text())
    reason = sink_retrying(status, time.time())
    assert reason is not None  # what the dagger's state says, as for a running dagger's retried write
    assert re.match(
        rf"sink retrying: influx, attempt \d+/200, next in \d+ s, failing for \d+ s: InfluxDB at {url} ",
        reason[0],
    )
    with _serving(lambda: InfluxServer(tmp_path / "influx", port, bind_port)) as influx:
        starter.join(120)
        assert not starter.is_alive() and errors == []
        assert "retrying" not in _sink_status(job)  # started: no retry to show
        assert InfluxHandle(influx.url).query("SHOW DATABASES") == [
            {"name": "databases", "columns": ["name"], "values": [["late"]]}
        ]
    for sink in job.sinks:
        sink.close()


def test_a_sink_still_down_after_its_retries_fails_saying_how_often_it_tried(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # no InfluxDB started there: refused at once
    job = _job(tmp_path, url, "nowhere", "max_backoff_s: 0.2\nmax_retries: 2")
    written: list[dict[str, Any]] = []

    def listen(s: Any) -> None:
        job.on_sink_retry(s)
        written.append(_sink_status(job))

    job.sinks[0].retry_listener = listen
    with pytest.raises(SinkError, match=r"\(tried 3 times over \d+ s\)") as caught:
        start_sinks(job.sinks)
    assert caught.value.message.startswith(
        f"sink 'influx': InfluxDB at {url} is unreachable: ConnectionError"
    )
    assert [w.get("retrying", {}).get("attempt") for w in written] == [1, 2, None]


def test_a_sink_that_refuses_at_start_fails_at_once(tmp_path: Path, influxdb: InfluxHandle) -> None:
    job = _job(tmp_path, influxdb.url, unique("missing"), "max_backoff_s: 0.2\nmax_retries: 15")
    heard: list[object] = []
    job.sinks[0].retry_listener = heard.append
    with pytest.raises(SinkError, match=r"database '[^']+' does not exist"):
        start_sinks(job.sinks)
    assert heard == []  # no retry: waiting cannot create a database
