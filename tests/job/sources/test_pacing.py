"""When the source plans an empty micro-batch so that Spark closes windows in a short batch."""

from __future__ import annotations

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
    assert _run(pacer, [1.0, 9.0, 10.5, 11.5, 12.5, 31.0, 32.0]) == [False, True, False, True, False, False, True]
