"""A gathering source's pacing (job.sources.pacing) when record stamps do not move with the wall clock.

``test_pacing`` simulates stamps that follow the clock a fixed lag behind. Here the newest stamp waiting is any
function of wall time (a replay faster or slower than the clock, a producer that stops or bursts, a partition
whose stamps run minutes ahead of the others and stop: the newest stamp the source probes then stays put while
the other partitions' records keep coming), and a batch costs a fixed part plus a part per record it reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from job.sources.pacing import ClosePacer, boundary_before

T0 = 1_800_000_000.0  # a whole hour since the epoch
STEP = 0.05  # the simulator's resolution (seconds of wall time)
GATHER_S = 8.0

Stamps = Callable[[float], float]  # the newest record stamp on the brokers at a wall time, seconds after T0
Arrived = Callable[[float], float]  # the records arrived by a wall time


@dataclass(frozen=True)
class Batch:
    start: float
    end: float
    what: str  # "read", "hold" (the closing batch the pacer asks for), "tick" (a quiet topic's closing batch)
    newest: float  # the newest stamp it read (-inf for a batch that reads nothing)
    records: float


def simulate(
    pacer: ClosePacer, stamp: Stamps, cost: Callable[[float], float], seconds: float, arrived: Arrived
) -> list[Batch]:
    """Run ``pacer`` as Spark runs the source (job.sources.kafka ``latestOffset``): a trigger a second, the next
    plan when the last batch ended; a batch reading ``n`` records takes ``cost(n)`` (one reading none
    ``cost(0)``), and after a batch that read, a plan with nothing new makes one closing batch."""
    out: list[Batch] = []
    now, read_to, unclosed = 0.0, -1.0, False
    while now < seconds:
        pacer.plan_starts(now)
        waiting = arrived(now) - arrived(read_to) if read_to >= 0 else 1.0
        batch = None
        if pacer.hold():
            unclosed = False
            batch = Batch(now, now + cost(0.0), "hold", -math.inf, 0.0)
        elif waiting > 0:
            if pacer.worth_reading(T0 + stamp(now), now):
                pacer.planned(T0 + stamp(now), now)
                batch = Batch(now, now + cost(waiting), "read", stamp(now), waiting)
                read_to, unclosed = now, True
        elif unclosed:
            unclosed = False
            batch = Batch(now, now + cost(0.0), "tick", -math.inf, 0.0)
        if batch is None:
            now += 1.0
            continue
        out.append(batch)
        now = max(now + 1.0, batch.end)
    return out


def closing_latencies(
    batches: list[Batch], stamp: Stamps, period_s: int, delay_s: int, until: float
) -> list[tuple[float, float, float]]:
    """Return, for each boundary the stamps pass before wall time ``until``, (boundary, the wall time its
    closing record arrived, the seconds from then until the batch after the one that read it ended: the
    window's result is out). Raises StopIteration when a window never closes."""
    out = []
    boundary = boundary_before(T0 + stamp(0.0), period_s * 1000, delay_s * 1000) - T0 + period_s
    t = 0.0
    while t < until:
        if stamp(t) < boundary - 1e-6:
            t += STEP
            continue
        reads_it = next(b for b in batches if b.what == "read" and b.newest >= boundary - 1e-6)
        closes_it = next(b for b in batches if b.start >= reads_it.end)
        out.append((boundary, t, closes_it.end - t))
        boundary += period_s
    return out


def _linear(fixed: float, per_record: float) -> Callable[[float], float]:
    return lambda n: fixed + per_record * n


def _stuck_ahead(t: float) -> float:
    """One partition's producer runs 3 minutes ahead and stops at wall 69 (stamp 249, 1 s before the boundary
    at 250 of 60-s windows closed 10 s late): the newest stamp stays there until the others reach it."""
    return t + 180.0 if t < 69.0 else max(249.0, t)


def test_a_newest_stamp_stuck_before_a_boundary_does_not_grow_the_batches() -> None:
    """While the newest stamp stays just before a boundary and records keep coming, the batches must not grow (a
    version that held until the closing record came let each hold run twice the last batch, and the batch after
    it read all the hold gathered: 7, 10, 15, 21 s batches, and the window after waited 29 s): the source
    gathers as far from a boundary, and the window that closes when the stamps move on leaves within seconds."""
    pacer = ClosePacer(60_000, 10_000, gather_s=GATHER_S)
    cost = _linear(0.5, 0.45)  # a batch of 8 s of records: 4.1 s
    batches = simulate(pacer, _stuck_ahead, cost, 400.0, lambda t: t)
    stuck = [b for b in batches if 80.0 < b.start < 249.0 and b.what == "read"]
    assert max(b.records for b in stuck) <= 2 * GATHER_S, stuck
    assert len(stuck) >= (249.0 - 80.0) / (2 * GATHER_S)
    latencies = closing_latencies(batches, _stuck_ahead, 60, 10, 370.0)
    assert [b for b, _, _ in latencies] == [190.0, 250.0, 310.0]
    assert all(lat < cost(2 * GATHER_S) + 1.0 + cost(0.0) + cost(2 * GATHER_S) for _, _, lat in latencies), (
        latencies
    )


def test_a_newest_stamp_stuck_within_the_lead_does_not_read_at_every_trigger() -> None:
    """While the newest stamp stays within the lead of a boundary but further from it than a batch (the
    partition ahead stopped at 246.5, 3.5 s before the boundary at 250), records keep coming: the source read
    them at every trigger for minutes (140 batches in 140 s); it gathers them once stamps following the clock
    would have brought the boundary."""
    stamp = lambda t: t + 180.0 if t < 66.5 else max(246.5, t)  # noqa: E731
    pacer = ClosePacer(60_000, 10_000, gather_s=GATHER_S)
    cost = _linear(0.5, 0.2)
    batches = simulate(pacer, stamp, cost, 420.0, lambda t: t)
    stuck = [b for b in batches if 100.0 < b.start < 240.0 and b.what == "read"]
    assert 140.0 / GATHER_S - 1 <= len(stuck) <= 140.0 / GATHER_S + 1, stuck
    latencies = closing_latencies(batches, stamp, 60, 10, 390.0)
    assert [b for b, _, _ in latencies] == [190.0, 250.0, 310.0, 370.0]
    assert all(lat < 2 * cost(2 * GATHER_S) + 1.0 + cost(0.0) for _, _, lat in latencies), latencies


#: how the newest stamp moves in a stretch of wall time: (stamp seconds per wall second, records per second)
KINDS = {
    "clock": (1.0, 1.0),
    "replay-fast": (3.0, 1.0),
    "replay-slow": (0.5, 1.0),
    "stuck": (0.0, 1.0),  # a partition ahead stopped: the others' records come, the newest stamp stays
    "quiet": (0.0, 0.0),  # the topic goes quiet
    "burst": (1.0, 4.0),
}


def piecewise(lag_s: float, stretches: list[tuple[str, float, float]]) -> tuple[Stamps, Arrived]:
    """Return the newest stamp and the records arrived by a wall time: ``stretches`` of (kind, wall seconds,
    stamp jump at its start; a quiet stretch's at its end), then the clock; stamps start ``lag_s`` behind."""
    starts: list[tuple[float, float, float, str]] = []  # wall, stamp, records, kind at the stretch's start
    t, s, n, carry = 0.0, -lag_s, 0.0, 0.0
    for kind, length, jump in stretches:
        jump, carry = (0.0, carry + jump) if kind == "quiet" else (carry + jump, 0.0)
        starts.append((t, s + jump, n, kind))
        s, t, n = s + jump + KINDS[kind][0] * length, t + length, n + KINDS[kind][1] * length
    end = (t, s + carry, n, "clock")

    def at(w: float) -> tuple[float, float]:
        t0, s0, n0, kind = next((x for x in reversed(starts) if x[0] <= w), end) if w < end[0] else end
        return s0 + KINDS[kind][0] * (w - t0), n0 + KINDS[kind][1] * (w - t0)

    return (lambda w: at(w)[0]), (lambda w: at(w)[1])


@settings(max_examples=400, deadline=None)
@example(0.5, 0.45, 60, 10, -180.0, [("clock", 69.0, 0.0), ("stuck", 180.0, 0.0)])  # _stuck_ahead
@example(0.2, 0.4, 10, 0, 0.2, [("clock", 38.0, 0.0), ("replay-slow", 60.0, 0.0)])
@given(
    fixed=st.floats(0.05, 1.5),
    per_record=st.floats(0.0, 0.45),
    period_s=st.sampled_from([10, 60, 300]),
    delay_s=st.sampled_from([0, 10]),
    lag_s=st.sampled_from([0.2, 5.0, 300.0, -120.0]),
    stretches=st.lists(
        st.tuples(
            st.sampled_from(sorted(KINDS)), st.floats(5.0, 120.0), st.sampled_from([0.0, 0.0, 3.0, 40.0])
        ),
        max_size=5,
    ),
)
def test_whatever_the_stamps_do_batches_stay_gathered_and_every_window_closes(
    fixed: float,
    per_record: float,
    period_s: int,
    delay_s: int,
    lag_s: float,
    stretches: list[tuple[str, float, float]],
) -> None:
    """Stamps that replay faster or slower than the clock, stop while records keep coming, jump, go quiet,
    run minutes behind or ahead: no batch reads more than twice ``gather_s`` of records (but the first), a
    stamp that stays put makes no batch per trigger, and every window a record's stamp passes closes within two such batches, a
    trigger and a closing batch of the arrival of that record."""
    case = (fixed, per_record, period_s, delay_s, lag_s, stretches)
    top_rate = max(KINDS[k][1] for k, _, _ in [*stretches, ("clock", 0.0, 0.0)])
    assume(top_rate * per_record <= 0.45)  # the dagger keeps up
    stamp, arrived = piecewise(lag_s, stretches)
    cost = _linear(fixed, per_record)
    seconds = sum(length for _, length, _ in stretches) + 2 * period_s + 40.0
    batches = simulate(
        ClosePacer(period_s * 1000, delay_s * 1000, gather_s=GATHER_S), stamp, cost, seconds, arrived
    )
    assert all(b.records <= top_rate * (2 * GATHER_S + 1.0) for b in batches[1:]), case
    # a stamp that stays put is no boundary coming: no read per trigger once the lead (at most a period),
    # then twice a batch, have passed
    start, settle = 0.0, period_s + 3 * max(cost(top_rate * 2 * GATHER_S), 1.0) + 1.0
    for kind, length, _ in stretches:
        if kind == "stuck" and length > settle + 2 * GATHER_S:
            reads = [b for b in batches if start + settle <= b.start < start + length and b.what == "read"]
            assert len(reads) <= (length - settle) / GATHER_S + 1, (case, reads)
        start += length
    # the batch in flight when the record comes, the trigger after it, the closing batch of the boundaries a
    # jump of the stamps passed (it read the one before), the batch that reads it, its closing one
    bound = 2 * max(cost(top_rate * 4 * GATHER_S), 1.0) + 1.0 + 2 * cost(0.0)
    for boundary, came, latency in closing_latencies(batches, stamp, period_s, delay_s, seconds - 30.0):
        if came > 3 * GATHER_S:  # the lead measured
            assert latency <= bound, (case, boundary, came, latency)
