"""When the source plans an empty micro-batch so that Spark closes windows in a short batch."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from job.sources.pacing import ClosePacer, boundary_before

T0 = 1_800_000_000.0  # a whole minute since the epoch


def test_boundaries_are_every_period_shifted_by_the_delay() -> None:
    assert boundary_before(T0 + 10.0, 60_000, 10_000) == T0 + 10.0
    assert boundary_before(T0 + 9.999, 60_000, 10_000) == T0 - 50.0
    assert boundary_before(T0 + 69.0, 60_000, 10_000) == T0 + 10.0
    assert boundary_before(T0 + 0.7, 500, 0) == T0 + 0.5


def _run(pacer: ClosePacer, newest: list[float]) -> list[bool]:
    """Plan one batch per entry: held, or reading records up to one stamped T0 + the entry."""
    held = []
    for t in newest:
        hold = pacer.hold()
        if not hold:
            pacer.planned(T0 + t)
        held.append(hold)
    return held


def test_one_empty_batch_after_each_batch_that_reads_past_a_boundary() -> None:
    pacer = ClosePacer(60_000, 10_000)  # boundaries at 10 and 70
    assert pacer.hold() is False  # nothing planned yet
    # the first batch reads records past the boundary at -50: one empty batch; the batch reading a record
    # stamped 10.0 is followed by one; a batch whose records are all older than a boundary is not
    newest = [5.0, 9.0, 9.5, 9.99, 10.0, 11.0, 13.0, 69.0, 71.0, 72.0, 73.0]
    assert _run(pacer, newest) == [False, True, False, False, False, True, False, False, False, True, False]


def test_no_empty_batch_without_windows_and_none_for_older_records() -> None:
    assert _run(ClosePacer(0, 10_000), [5.0, 11.0, 12.0, 71.0, 72.0]) == [False] * 5
    pacer = ClosePacer(60_000, 10_000)
    assert _run(pacer, [11.0, 12.0]) == [False, True]
    pacer.planned(T0 - 100.0)  # a batch of older records (another partition) keeps the newest seen
    assert _run(pacer, [12.5, 13.0]) == [False, False]


def test_a_hop_window_closes_every_slide() -> None:
    pacer = ClosePacer(10_000, 0)  # HOP with a 10-s slide, no watermark delay
    assert _run(pacer, [1.0, 9.0, 10.5, 11.5, 12.5, 31.0, 32.0]) == [
        False,
        True,
        False,
        True,
        False,
        False,
        True,
    ]


def _reads(pacer: ClosePacer, waiting: list[tuple[float, float]]) -> list[str]:
    """Plan one batch per (wall time, newest waiting record): 'hold' (the empty closing batch), 'read' or
    'wait' (read at window close: the records stay in Kafka)."""
    out = []
    for now, newest in waiting:
        pacer.plan_starts(now)
        if pacer.hold():
            out.append("hold")
        elif pacer.worth_reading(T0 + newest, now):
            pacer.planned(T0 + newest, now)
            out.append("read")
        else:
            out.append("wait")
    return out


def test_read_at_close_reads_only_what_closes_a_window_then_closes_it() -> None:
    pacer = ClosePacer(60_000, 10_000, read_at_close=True)  # boundaries at 10 and 70 (event time)
    # one trigger a second, records stamped with the wall time: the first read is eager (and crosses the
    # boundary at -50, so an empty batch follows); then nothing until a record is stamped past 10.0
    waiting = [
        (0.0, 0.0),
        (1.0, 1.0),
        (2.0, 2.0),
        (9.0, 9.0),
        (10.0, 9.99),
        (11.0, 10.2),
        (12.0, 11.0),
        (13.0, 12.0),
        (69.0, 69.0),
        (71.0, 70.5),
        (72.0, 71.5),
        (130.0, 100.0),
        (131.0, 101.0),
    ]
    assert _reads(pacer, waiting) == [
        "read",
        "hold",
        "wait",
        "wait",
        "wait",
        "read",
        "hold",
        "wait",
        "wait",
        "read",
        "hold",
        "wait",
        "read",
    ]
    # (131.0: no boundary crossed, but a period of wall time has passed since the read at 71.0)


def test_read_at_close_without_windows_or_stamps_reads_every_batch() -> None:
    assert (
        _reads(ClosePacer(0, 10_000, read_at_close=True), [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)])
        == ["read"] * 3
    )
    pacer = ClosePacer(60_000, 10_000, read_at_close=True)
    pacer.planned(T0 + 1.0, 0.0)
    assert pacer.worth_reading(None, 1.0) is True  # a capped batch: its newest record is not known
    assert pacer.worth_reading(T0 + 2.0, 1.0) is False
    assert ClosePacer(60_000, 10_000).worth_reading(T0 + 2.0, 1.0) is True  # off by default


def test_gather_reads_every_gather_s_far_from_a_boundary_and_every_trigger_near_one() -> None:
    pacer = ClosePacer(60_000, 10_000, gather_s=4.0)  # boundaries at 10 and 70 (event time)
    # one trigger a second, every batch over within it, the newest record waiting stamped 0.2 s before the
    # wall time
    waiting = [(float(t), t - 0.2) for t in range(0, 76)]
    got = [
        f"{int(now)}:{what}"
        for (now, _), what in zip(waiting, _reads(pacer, waiting), strict=True)
        if what != "wait"
    ]
    # the first read crosses the boundary at -50: an empty batch. The read at 4 is the first gathered one;
    # it took 1 s (the next plan came a trigger later), so the lead is 1.5 * 1 + 0.5 = 2 s: a read every 4 s
    # until the records waiting are within 2 s of the boundary at 10, then at every trigger until one
    # crosses it, the empty batch that closes the window, and every 4 s again
    assert got == [
        "0:read",
        "1:hold",
        "4:read",
        "8:read",
        "9:read",
        "10:read",
        "11:read",
        "12:hold",
        *[f"{t}:read" for t in range(15, 68, 4)],
        "69:read",
        "70:read",
        "71:read",
        "72:hold",
        "75:read",
    ]
    assert pacer.lead_s() == 2.0


def _simulate(
    pacer: ClosePacer, cost: Callable[[float], float], seconds: float, lag_s: float = 0.2
) -> list[tuple[float, float, str]]:
    """Run ``pacer`` as Spark runs a source: a trigger a second, the next plan when the last batch ended.
    Records arrive stamped with the wall time, ``lag_s`` late; a batch reading ``s`` seconds of them takes
    ``cost(s)`` (an empty one ``cost(0)``). Return each batch as (start, end, what): "gathered" (a read
    ``gather_s`` after the last one), "read", "hold" (empty)."""
    out: list[tuple[float, float, str]] = []
    now, read_to, last_read = 0.0, 0.0, -math.inf
    while now < seconds:
        pacer.plan_starts(now)
        newest = now - lag_s
        if pacer.hold():
            what, took = "hold", cost(0.0)
        elif newest > read_to and pacer.worth_reading(T0 + newest, now):
            what = "gathered" if now - last_read >= pacer.gather_s else "read"
            pacer.planned(T0 + newest, now)
            took, read_to, last_read = cost(newest - read_to), newest, now
        else:
            now += 1.0
            continue
        out.append((now, now + took, what))
        now = max(now + 1.0, now + took)
    return out


def _in_flight(batches: list[tuple[float, float, str]], at: float) -> str:
    return next((what for start, end, what in batches if start <= at < end), "none")


def test_the_lead_follows_how_long_a_gathered_batch_takes() -> None:
    # a batch of s seconds of records takes 0.4 + 0.3 s per second of records: a gathered one (8 s) 2.8 s
    pacer = ClosePacer(60_000, 10_000, gather_s=8.0)
    batches = _simulate(pacer, lambda s: 0.4 + 0.3 * s, 200.0)
    # the next plan comes when a batch ends: its length is what the pacer measures
    took = [end - start for start, end, what in batches if what == "gathered"][-3:]
    assert 2.8 <= max(took) < 3.1
    assert pacer.lead_s() == 1.5 * max(took) + 0.5
    # the closing record of each window (stamped 10, 70, 130, 190) arrives while no gathered batch runs,
    # and the batch that reads it starts at once after the short one in flight
    for boundary in (10.2, 70.2, 130.2, 190.2):
        assert _in_flight(batches, boundary) in ("read", "none")
        reads_it = next(start for start, _, what in batches if start >= boundary and what != "hold")
        assert reads_it - boundary < 1.5
    # far from a boundary it reads every 8 s (at the first plan 8 s after the last read): 4 batches in 40 s
    # where reading at every trigger takes 39
    gathered = [start for start, _, what in batches if what == "gathered" and 80 < start < 120]
    assert all(8.0 <= b - a < 9.0 for a, b in zip(gathered, gathered[1:], strict=False))
    assert len([b for b in batches if 80 < b[0] < 120]) == 4
    eager = _simulate(ClosePacer(60_000, 10_000), lambda s: 0.4 + 0.3 * s, 200.0)
    assert len([b for b in eager if 80 < b[0] < 120]) == 39


def test_before_a_gathered_batch_was_timed_the_lead_is_gather_s() -> None:
    pacer = ClosePacer(60_000, 10_000, gather_s=8.0)
    assert pacer.lead_s() == 8.0
    pacer.plan_starts(0.0)
    pacer.planned(T0 + 0.0, 0.0)  # the first read is not a gathered one
    pacer.plan_starts(30.0)
    assert pacer.lead_s() == 8.0
    # a gathered batch that ran 50 s: the lead is at most a window period
    assert pacer.worth_reading(T0 + 40.0, 40.0) is True
    pacer.planned(T0 + 40.0, 40.0)
    pacer.plan_starts(90.0)
    assert pacer.lead_s() == 60.0


@settings(max_examples=200, deadline=None)
@given(
    fixed=st.floats(0.05, 1.5),
    per_s=st.floats(0.0, 0.45),
    period_s=st.sampled_from([10, 30, 60, 300]),
    delay_s=st.sampled_from([0, 2, 10]),
)
def test_a_steady_machine_never_has_a_gathered_batch_in_flight_at_a_boundary(
    fixed: float, per_s: float, period_s: int, delay_s: int
) -> None:
    """Whatever a batch costs, as long as the dagger keeps up and its batches cost the same from one minute to
    the next, the record that closes a window never waits for a gathered batch."""
    pacer = ClosePacer(period_s * 1000, delay_s * 1000, gather_s=8.0)
    batches = _simulate(pacer, lambda s: fixed + per_s * s, 4 * period_s + 30.0)
    first_timed = next(end for _, end, what in batches if what == "gathered")
    for k in range(1, 5):
        boundary = k * period_s + delay_s + 0.2
        if boundary > first_timed + 8.0 + period_s / 2:
            assert _in_flight(batches, boundary) != "gathered", (boundary, batches)


def test_gather_gives_way_to_read_at_close_and_needs_windows_and_stamps() -> None:
    both = ClosePacer(60_000, 10_000, read_at_close=True, gather_s=4.0)
    both.planned(T0 + 11.0, 0.0)
    assert [both.worth_reading(T0 + 11.0 + t, t) for t in (5.0, 50.0, 60.0)] == [False, False, True]
    assert _reads(ClosePacer(0, 10_000, gather_s=4.0), [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)]) == ["read"] * 3
    pacer = ClosePacer(60_000, 10_000, gather_s=4.0)
    pacer.planned(T0 + 11.0, 0.0)
    assert pacer.worth_reading(T0 + 12.0, 1.0) is False
    assert (
        pacer.worth_reading(None, 1.0) is True
    )  # a capped batch (catching up): its newest record is not known
