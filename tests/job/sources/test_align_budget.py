"""A plan's look-ups of record times end at its budget (job.sources.align.BUDGET_S), a fetch under way too.

On noida-db a fetch could take longer than the whole budget: the plan overran it (median 2.86 s, 10.16 s
at most: "no answer to a fetch ... within 10 s"), since a fetch already under way waited out its own
10-s timeout. A unit test: the broker is a socket that takes the connection and never answers."""

from __future__ import annotations

import socket
import time

import pytest

from job.errors import SourceError
from job.sources.align import aligned_limit, record_times
from job.sources.offsets import driver_consumer


def test_a_fetch_that_does_not_answer_ends_at_the_plans_budget() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        consumer = driver_consumer(f"127.0.0.1:{silent.getsockname()[1]}")
        try:
            start, end = {"t": {"0": 0, "1": 0}}, {"t": {"0": 1000, "1": 1000}}
            began = time.monotonic()
            with pytest.raises(SourceError, match=r"^record times not all found within 0.5 s$"):
                aligned_limit(start, end, 100, lambda want: record_times(consumer, want), budget_s=0.5)
            took = time.monotonic() - began
            # outside a plan, a fetch keeps its own timeout
            began = time.monotonic()
            with pytest.raises(SourceError, match=r"^no answer to a fetch of t\[0\] at 50 within 1.0 s$"):
                record_times(consumer, {("t", "0"): 50}, timeout=1.0)
            alone = time.monotonic() - began
        finally:
            consumer.close()
    assert 0.5 <= took < 0.7, took  # 10.0 s before (the fetch's own timeout)
    assert 1.0 <= alone < 1.2, alone
