"""``daggers demo`` is repeatable: a second run on a running stack shows the same counts (it used to double
them), announces its reset, and explains the partial first minute and the open newest minutes."""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console

from job.cli.demo import run_demo
from job.produce.generator import generate
from job.stack.local import LocalStack
from job.stack.ports import free_ports

pytestmark = pytest.mark.integration

NOW = datetime(2026, 3, 2, 9, 5, 37, tzinfo=UTC)  # events from 09:02:37: a partial first minute
EVENTS, MINUTES = 3000, 3


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    local = LocalStack(tmp_path / "state")
    broker_port, influx_port = free_ports(2)
    local.up(broker="tansu", broker_port=broker_port, influx_port=influx_port)
    try:
        yield local
    finally:
        local.down()


def _completed_per_window() -> dict[int, int]:
    """Completed bookings per closed window (its end, s: a point's time): the watermark is the newest event
    less 10 s."""
    start = NOW - timedelta(minutes=MINUTES)
    rows = generate(
        "booking", EVENTS, seed=42, start=start, duration_s=MINUTES * 60, out_of_order_fraction=0.02
    ).table.to_pylist()
    watermark = max(r["event_timestamp"] for r in rows).timestamp() - 10
    out: Counter[int] = Counter()
    for r in rows:
        end = int(r["event_timestamp"].timestamp()) // 60 * 60 + 60
        if r["status"] == "COMPLETED" and end <= watermark:
            out[end] += 1
    return dict(out)


def test_a_second_demo_gives_the_same_counts(stack: LocalStack) -> None:
    outputs, results = [], []
    for _ in range(2):
        buffer = io.StringIO()
        results.append(
            run_demo(
                stack.state_dir,
                events=EVENTS,
                minutes=MINUTES,
                now=NOW,
                console=Console(file=buffer, width=200),
            )
        )
        outputs.append(buffer.getvalue())
    assert results[0] == results[1]
    got = {int(r["time"]): r["total"] for r in results[1]["bookings_per_s2"]}  # type: ignore[call-overload]
    assert got == _completed_per_window()
    assert sorted(got) == [int(datetime(2026, 3, 2, 9, m, tzinfo=UTC).timestamp()) for m in (3, 4, 5)]
    text = outputs[1]
    assert "reset: dropped the measurements bookings_per_s2 and drivers_per_s2 in database daggers" in text
    topics = [re.search(r"this run's events go to new topics \*-(demo-\d{8}-\d{6})", out) for out in outputs]
    assert all(topics) and topics[0].group(1) != topics[1].group(1)  # type: ignore[union-attr]
    assert (
        "the first window (ending 09:03) holds a partial minute: the events start at 09:02:37, so it counts "
        "only 23 of its 60 seconds"
    ) in text
    assert "windows ending 09:06 and later are still open, so not written yet" in text
