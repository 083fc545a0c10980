"""Issue 51: a dagger whose sink is retrying says so. While the InfluxDB sink retries a write, the runner writes
``status.json`` at each retry with ``sinks.<name>.retrying`` (attempt, of, next_at, since, error), and removes it
when the write succeeds or gives up. A real influxd, frozen with SIGSTOP or never started; no Spark: the runner's
own write path (:meth:`job.query.runner.DaggerJob.write_rows`) is driven with a table."""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from job.errors import SinkError
from job.query.plan import plan
from job.query.runner import DaggerJob
from job.sinks.base import start_sinks
from job.stack.influx import InfluxServer
from job.stack.ports import free_port, free_ports
from tests.helpers import BOOKINGS_SQL, influx_points, make_spec, unique, wait_until
from tests.services import _serving

pytestmark = pytest.mark.integration

TAGS = ["tag_city_id", "tag_s2id", "tag_vehicle_type"]
W1, W2 = datetime(2026, 3, 2, 8, 1, tzinfo=UTC), datetime(2026, 3, 2, 8, 2, tzinfo=UTC)


def _rows() -> pa.Table:
    return pa.table(
        {
            "tag_city_id": pa.array([1, 2], pa.int32()),
            "tag_s2id": ["-7830489120239730688", "33444"],
            "tag_vehicle_type": ["BIKE", "CAR"],
            "num_of_bookings": pa.array([3, 5], pa.int64()),
            "window_timestamp": pa.array([W1, W2], pa.timestamp("us", tz="UTC")),
        }
    )


def _job(tmp_path: Path, url: str, db: str, sink_extra: str) -> DaggerJob:
    spec, _ = make_spec(
        name=unique("retrying"),
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
    return DaggerJob(plan(spec, tmp_path), spark=None)  # type: ignore[arg-type]  # writing needs no session


def _sink_status(job: DaggerJob) -> dict[str, Any]:
    try:
        return json.loads(job.status_path.read_text())["sinks"]["influx"]
    except (OSError, ValueError, KeyError):
        return {}


def test_status_shows_the_retry_counting_up_then_none_once_influxdb_answers(tmp_path: Path) -> None:
    with _serving(lambda: InfluxServer(tmp_path / "influx", *free_ports(2))) as influx:
        db = "retrying"
        influx.create_database(db)
        job = _job(tmp_path, influx.url, db, "timeout_s: 1\nmax_backoff_s: 1\nmax_retries: 60")
        start_sinks(job.sinks)
        pid = influx.process.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # up but not answering: each write times out after timeout_s
        errors: list[BaseException] = []
        writer = threading.Thread(target=lambda: _catch(errors, job.write_rows, _rows(), 0), daemon=True)
        try:
            writer.start()
            seen: list[dict[str, Any]] = []

            def counted_to_3() -> bool:
                retrying = _sink_status(job).get("retrying")
                if retrying and (not seen or seen[-1] != retrying):
                    seen.append(retrying)
                return bool(retrying) and retrying["attempt"] >= 3

            wait_until("status.json to show retry 3", counted_to_3, 120, every_s=0.1)
        finally:
            os.kill(pid, signal.SIGCONT)
        writer.join(60)
        assert not writer.is_alive() and errors == []

        attempts = [r["attempt"] for r in seen]
        assert attempts == sorted(set(attempts)) and attempts[-1] >= 3  # counts up, one entry a retry
        assert {r["of"] for r in seen} == {60}
        assert len({r["since"] for r in seen}) == 1  # the first failure of this write
        assert all(r["since"] < r["next_at"] <= r["since"] + 60 for r in seen)
        assert {r["error"] for r in seen} == {f"cannot reach {influx.url}: ReadTimeout"}

        final = _sink_status(job)
        assert "retrying" not in final  # the write succeeded: no retry to show
        assert (final["writes"], final["failures"], final["rows_written"]) == (1, 0, 2)
        assert final["retries"] >= attempts[-1]
        assert influx_points(influx, db, "m", "num_of_bookings", TAGS) == {
            (int(W1.timestamp()), "1", "-7830489120239730688", "BIKE"): 3,
            (int(W2.timestamp()), "2", "33444", "CAR"): 5,
        }


def test_a_sink_that_gives_up_leaves_no_retry_behind(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # no InfluxDB started there: refused at once
    job = _job(tmp_path, url, "nowhere", "max_backoff_s: 0.2\nmax_retries: 2")
    sink = job.sinks[0]
    written: list[dict[str, Any]] = []

    def listen(s: Any) -> None:  # what status.json held right after each report
        job.on_sink_retry(s)
        written.append(_sink_status(job))

    sink.retry_listener = listen
    with pytest.raises(SinkError, match="giving up writing to InfluxDB"):
        job.write_rows(_rows(), 7)
    assert [w.get("retrying", {}).get("attempt") for w in written] == [1, 2, None]
    assert [w.get("retrying", {}).get("error") for w in written] == [
        f"cannot reach {url}: ConnectionError"
    ] * 2 + [None]
    assert written[-1]["failures"] == 1 and written[-1]["retries"] == 2
    assert "retrying" not in _sink_status(job)


def test_a_retry_left_by_a_killed_run_is_not_shown_by_the_next(tmp_path: Path) -> None:
    job = _job(tmp_path, "http://127.0.0.1:9", "db", "")
    job.status_path.parent.mkdir(parents=True)
    job.status_path.write_text(
        json.dumps(
            {
                "state": "running",
                "sinks": {
                    "influx": {
                        "retries": 4,
                        "retrying": {"attempt": 4, "of": 15, "next_at": 1.0, "since": 0.5, "error": "x"},
                    }
                },
            }
        )
    )
    again = _job(tmp_path, "http://127.0.0.1:9", "db", "")
    assert again.progress.sinks == {"influx": {"retries": 4}}


def _catch(errors: list[BaseException], fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as exc:  # noqa: BLE001 - handed to the test
        errors.append(exc)
