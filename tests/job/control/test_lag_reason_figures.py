"""The lag a catching-up or lagging reason gives is the lag its view shows beside the state (the console's
row, ``daggers dagger show``, /metrics all show the health model's lag figure). A tester read "… N records
behind, 480269 after its newest batch": two unnamed figures, one of them (the newest batch's trough) not the
lag shown, and neither in the thousands format every other figure has. Over any lag readings the controller
can record, the reason's "now" figure is the lag shown, formatted ``480,269``; a figure of another moment is
named (``after its batches it fell from 50,000 to 44,000``); no lag shown, none said to be now."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from job.control.health_model import (
    CATCHING_UP,
    LAGGING,
    DaggerFacts,
    HealthSettings,
    Point,
    dagger_health,
)

S = HealthSettings()
NOW = 10_000.0

# one batch: (seconds since the batch before, rows it read, its lag readings as (seconds after it, lag))
_batch = st.tuples(
    st.floats(2.0, 14.0),
    st.integers(0, 400_000),
    st.lists(st.tuples(st.floats(0.2, 1.8), st.integers(0, 900_000)), min_size=1, max_size=3),
)


def _facts(batches: list[tuple[float, int, list[tuple[float, int]]]], last_read_failed: bool) -> DaggerFacts:
    """What the controller records: a progress sample at each batch, a sample at each lag read (when it was
    asked for, with the rows read then), and the newest read in the status row (None after a failed read)."""
    span = sum(gap for gap, _, _ in batches) + 2.0
    at, rows = NOW - span, 0
    samples: list[Point] = []
    lag = lag_at = None
    for gap, read, reads in batches:
        at, rows = at + gap, rows + read
        samples.append(Point(at=at, input_rows=rows))
        for after, value in reads:
            samples.append(Point(at=at + after, input_rows=rows, lag=value))
            lag, lag_at = value, at + after + 0.5  # recorded the round after it was asked for
    progress = {"updated_at": at, "batch_at": at, "input_rows": rows, "batch_duration_ms": 1500}
    return DaggerFacts(
        desired_state="running",
        actual_state="running",
        started_at=NOW - span - 60.0,
        progress=progress,
        lag=None if last_read_failed else lag,
        lag_at=lag_at,
        lag_error="Source error: the brokers did not answer in 5 s" if last_read_failed else None,
        lag_error_at=NOW - 1.0 if last_read_failed else None,
        samples=samples,
        controller_heartbeat=NOW - 1.0,
    )


_BEHIND = [(6.0, 1000, [(0.5, 50_000), (1.5, 52_000)])] * 10
_GROWING = [(6.0, 1000, [(0.5, 20_000 + 5000 * i), (1.5, 480_269 + i)]) for i in range(10)]


@settings(max_examples=400, deadline=None)
@given(batches=st.lists(_batch, min_size=6, max_size=16), last_read_failed=st.booleans())
@example(batches=_BEHIND, last_read_failed=False)
@example(batches=_BEHIND, last_read_failed=True)
@example(batches=_GROWING, last_read_failed=False)
@example(batches=_GROWING, last_read_failed=True)
def test_the_reason_gives_the_lag_its_view_shows(
    batches: list[tuple[float, int, list[tuple[float, int]]]], last_read_failed: bool
) -> None:
    h = dagger_health(_facts(batches, last_read_failed), NOW, S)
    assert not re.search(r"\d{4}", h.reason), h.reason  # 480,269, never 480269
    if h.state not in (CATCHING_UP, LAGGING):
        return
    now = re.match(r"(?:lag )?([\d,]+) (?:records behind|growing)", h.reason)
    if h.lag is None:  # no lag shown: none is said to be now, and any figure says when it held
        assert now is None, h.reason
        assert h.reason.startswith(("lag not read now, ", "lag (not read now) growing")), h.reason
        return
    assert now is not None, h.reason
    assert now.group(1) == f"{int(h.lag.value):,}", (h.reason, h.lag)
    # every other figure of the reason is a named one: a trough after its batches, or a one-batch dip
    rest = h.reason[now.end() :]
    for figure in re.finditer(r"[\d,]{5,}", rest):
        before = rest[: figure.start()]
        assert re.search(r"(fell from |to |\(|→ |newest batch's )$", before), (h.reason, figure.group())


def test_the_tester_s_case_reads_one_lag() -> None:
    """Behind, the newest batch's trough at 50,000 and the lag read since at 52,000: the reason says the
    52,000 the view shows, once, and not the trough as a second unnamed figure."""
    h = dagger_health(_facts(_BEHIND, False), NOW, S)
    assert h.lag is not None and h.lag.value == 52_000
    assert (h.state, h.reason) == (
        CATCHING_UP,
        "52,000 records behind; not shown to grow or to fall yet, over 10 batches in 55 s",
    )


def test_a_growing_lag_reads_the_lag_its_view_shows() -> None:
    """Lagging: the lag read since its newest batch (480,278) is the one shown and said; the troughs are named."""
    h = dagger_health(_facts(_GROWING, False), NOW, S)
    assert h.lag is not None and h.lag.value == 480_278
    assert (h.state, h.reason) == (
        LAGGING,
        "lag 480,278 growing over 10 batches in 55 s: after each batch it was no lower than after the one "
        "before (20,000 → 65,000), and each time the next batch left records unread",
    )
