"""A run being killed (a stop that did not end in time) ends its sink's retries: the write in progress raises
at its next wait instead of retrying for minutes (a shared host cannot kill one query's thread)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from job.errors import SinkError
from job.sinks.influx import InfluxSink
from job.spec import InfluxSinkSpec
from job.stack.ports import free_port


def test_an_aborted_sink_stops_retrying_at_its_next_wait() -> None:
    waits: list[float] = []
    port = free_port()  # nothing listens: every write is refused
    spec = InfluxSinkSpec.model_validate(
        {
            "type": "influx",
            "url": f"http://127.0.0.1:{port}",
            "database": "d",
            "measurement": "m",
            "max_retries": 15,
        }
    )

    def sleep(delay: float) -> None:
        waits.append(delay)
        if len(waits) == 2:
            sink.abort("its controller stopped it")

    sink = InfluxSink(spec, sleep=sleep)
    table = pa.table(
        {
            "n": pa.array([1], pa.int64()),
            "window_timestamp": pa.array(
                [datetime(2026, 3, 2, 8, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")
            ),
        }
    )
    with pytest.raises(SinkError) as info:
        sink.write(table, 0)
    assert info.value.message == (
        f"sink influx stopped retrying after attempt 3: its controller stopped it: cannot reach "
        f"http://127.0.0.1:{port}: ConnectionError"
    )
    assert (len(waits), sink.metrics.retries, sink.metrics.retrying) == (2, 3, None)
