"""A graceful stop waits for the windows its last batch closed: ``DaggerJob.settle`` against a query whose
status follows a timeline on a fake clock (unit test; the real stop is in the control and CLI tests)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from job.query import runner
from job.query.runner import DaggerJob
from tests.helpers import FakeClock


class Query:
    """A query whose trigger is active in the given spans of the clock, with data waiting in ``data``; each
    trigger reports its progress as it ends."""

    def __init__(
        self,
        clock: FakeClock,
        active: list[tuple[float, float]],
        data: list[tuple[float, float]] | None = None,
    ) -> None:
        self.clock, self.active, self.data = clock, active, data or []
        self.isActive = True

    @property
    def status(self) -> dict[str, bool]:
        t = self.clock.now
        return {
            "isTriggerActive": any(a <= t < b for a, b in self.active),
            "isDataAvailable": any(a <= t < b for a, b in self.data),
        }

    @property
    def lastProgress(self) -> SimpleNamespace | None:  # noqa: N802 (pyspark's name)
        ended = [(k, a) for k, (a, b) in enumerate(self.active) if b <= self.clock.now]
        return SimpleNamespace(batchId=ended[-1][0], timestamp=ended[-1][1]) if ended else None


def settle(monkeypatch: pytest.MonkeyPatch, query: Query, clock: FakeClock) -> float:
    monkeypatch.setattr(runner, "time", clock)
    DaggerJob.settle(SimpleNamespace(query=query, _interval_s=1.0))  # type: ignore[arg-type]
    return clock.now


def test_a_batch_longer_than_the_grace_is_waited_for_and_then_its_no_data_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FakeClock()
    # the stop comes 1 s into an 11-s batch; the no-data batch that writes its windows follows it
    query = Query(clock, active=[(0.0, 11.0), (11.5, 12.5)])
    done = settle(monkeypatch, query, clock)
    assert (
        12.5 + 1.5 <= done < 12.5 + 1.5 + 0.3
    )  # idle for a trigger interval + 0.5 s after the no-data batch


def test_an_idle_query_stops_after_one_idle_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    assert 1.5 <= settle(monkeypatch, Query(clock, active=[]), clock) < 1.8


def test_a_stream_that_never_goes_idle_stops_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    # a batch every second, data always waiting: the grace counts from the end of the batch in progress
    spans = [(float(k), k + 0.6) for k in range(100)]
    done = settle(monkeypatch, Query(clock, active=spans, data=[(0.0, 1000.0)]), clock)
    assert 10.5 <= done < 10.8  # 10 s after the batch in progress (0-0.6 s, seen every 0.1 s) ended


def test_a_batch_that_never_ends_is_left_after_most_s(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    assert 45.0 <= settle(monkeypatch, Query(clock, active=[(0.0, 1000.0)]), clock) < 45.2


def test_triggers_back_to_back_are_not_one_long_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    # a broker that is down: each trigger waits 10 s for it, the next starts at once (never seen idle); the
    # first ends with its progress report, and the grace counts from there (it took most_s, 45 s)
    spans = [(10.0 * k, 10.0 * (k + 1)) for k in range(10)]
    assert 20.0 <= settle(monkeypatch, Query(clock, active=spans), clock) < 20.2
