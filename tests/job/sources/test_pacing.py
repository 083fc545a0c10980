"""When the source plans an empty micro-batch so that Spark closes windows in a short batch."""

from __future__ import annotations

from job.sources.pacing import ClosePacer, boundary_before

T0 = 1_800_000_000.0  # a whole minute since the epoch


def test_boundaries_are_every_period_shifted_by_the_delay() -> None:
    assert boundary_before(T0 + 10.0, 60_000, 10_000) == T0 + 10.0
    assert boundary_before(T0 + 9.999, 60_000, 10_000) == T0 - 50.0
    assert boundary_before(T0 + 69.0, 60_000, 10_000) == T0 + 10.0
    assert boundary_before(T0 + 0.7, 500, 0) == T0 + 0.5


def _run(pacer: ClosePacer, times: list[float]) -> list[bool]:
    """Plan at each of ``times`` (offsets from T0); every plan that is not held reads new data."""
    held = []
    for t in times:
        hold = pacer.hold(T0 + t)
        if not hold:
            pacer.planned(T0 + t)
        held.append(hold)
    return held


def test_one_empty_batch_after_the_first_batch_planned_past_each_boundary() -> None:
    pacer = ClosePacer(60_000, 10_000)
    # boundaries at 10 and 70. The plan at 10.1 is too close to the boundary to hold its events (slack 0.25 s);
    # the plan at 10.3 read them, so the next one is empty; one empty batch per boundary.
    times = [5.0, 9.5, 10.1, 10.3, 11.7, 13.1, 14.5, 70.2, 70.4, 71.0, 72.4]
    assert _run(pacer, times) == [False, False, False, False, True, False, False, False, False, True, False]


def test_no_empty_batch_at_the_start_or_without_windows() -> None:
    # the first plan comes after a boundary: the batches before it were another run's
    assert _run(ClosePacer(60_000, 10_000), [11.0, 12.0, 13.0]) == [False, False, False]
    assert _run(ClosePacer(0, 10_000), [5.0, 11.0, 12.0, 71.0, 72.0]) == [False] * 5


def test_a_plan_with_no_new_data_does_not_count_as_reading_past_the_boundary() -> None:
    pacer = ClosePacer(60_000, 10_000)
    assert _run(pacer, [5.0]) == [False]
    assert pacer.hold(T0 + 11.0) is False  # nothing new at 11: not recorded as planned
    assert pacer.hold(T0 + 12.0) is False
    pacer.planned(T0 + 12.0)  # data at 12
    assert pacer.hold(T0 + 13.0) is True
    assert pacer.hold(T0 + 14.0) is False


def test_a_hop_window_closes_every_slide() -> None:
    pacer = ClosePacer(10_000, 0)  # HOP with a 10-s slide, no watermark delay
    times = [1.0, 10.5, 11.5, 12.5, 20.5, 21.5, 31.0, 32.0]
    assert _run(pacer, times) == [False, False, True, False, False, True, False, True]
