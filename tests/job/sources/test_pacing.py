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
    # one trigger a second, the newest record waiting stamped 0.2 s before the wall time
    waiting = [(float(t), t - 0.2) for t in range(0, 24)] + [(float(t), t - 0.2) for t in range(60, 76)]
    got = [
        f"{int(now)}:{what}"
        for (now, _), what in zip(waiting, _reads(pacer, waiting), strict=True)
        if what != "wait"
    ]
    # the first read crosses the boundary at -50: an empty batch; then a read every 4 s until the records
    # waiting are within 4 s of the boundary at 10, at every trigger until one crosses it, the empty batch
    # that closes the window, and every 4 s again
    assert got == [
        "0:read",
        "1:hold",
        "4:read",
        "7:read",
        "8:read",
        "9:read",
        "10:read",
        "11:read",
        "12:hold",
        "15:read",
        "19:read",
        "23:read",
        "60:read",
        "64:read",
        "67:read",
        "68:read",
        "69:read",
        "70:read",
        "71:read",
        "72:hold",
        "75:read",
    ]


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
