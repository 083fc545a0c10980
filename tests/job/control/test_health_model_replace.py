"""Golden cases of the health model from a second outside trial on a busy machine: rows/s over slow batches, a
new version replacing a run that is still alive, a deploy or a rollback that starts afresh, two faults at
once, and a reason that agrees with its state."""

from __future__ import annotations

import random

from job.control.health_model import HealthSettings, Point
from job.control.rates import rows_rate
from tests.job.control.busy_dagger import BusyDagger, batches_of, timeline

S = HealthSettings()


def test_rows_per_s_of_slow_batches_is_not_above_what_arrives() -> None:
    """10,000 records/s read by batches of 25 to 35 s: a window of three batches counted three batches' rows
    from a sample taken after the batch before them (16,153 rows/s shown for a producer sending at most
    11k/s). The span starts when the count it starts from was reported: at most the noise of uneven batches."""
    rng = random.Random(9)
    dagger = BusyDagger(rate=lambda t: 10000.0, batches=batches_of([rng.uniform(25, 35) for _ in range(30)]))
    values = [h.rows_per_s.value for _, h in timeline(dagger, 200, 700) if h.rows_per_s is not None]
    assert (min(values), max(values)) == (9241.4, 10767.1)  # 13621.8 at most when the span started late


def test_the_span_of_a_rate_starts_when_its_first_count_was_reported() -> None:
    """Batches at 0, 30, 60 and 90 s read 300k rows each; lag reads at 5-s steps repeat the count between.
    Over a 90-s window ending at 95 s, the rows of the batches at 30, 60 and 90 s arrived over 90 s (0-90)."""
    points = [Point(at=float(t), input_rows=300_000 * (t // 30)) for t in range(0, 100, 5)]
    rate = rows_rate(points, 90.0)
    assert rate is not None
    assert (rate.rows_per_s, rate.since, rate.until) == (10_000.0, 0.0, 95.0)
