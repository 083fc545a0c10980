"""Golden cases of the health model on a busy machine (2 cores at load 42-52): what an outside tester saw, as
simulated daggers (busy_dagger.py: records arriving at a rate, micro-batches of uneven length, the lag read
every 5 s and soon after each batch), judged every 5 s as a scraper of /metrics samples them. Each case counts
the state changes and checks the reasons and figures shown."""

from __future__ import annotations

import random

from job.control.health_model import (
    CATCHING_UP,
    CRASH_LOOPING,
    LAGGING,
    RUNNING,
    STALLED,
    DaggerFacts,
    Figure,
    HealthSettings,
    Point,
    dagger_health,
    lag_readings,
    up_since,
)
from job.control.lag_trend import lag_trend
from tests.job.control.busy_dagger import Batch, BusyDagger, batches_of, changes, timeline

S = HealthSettings()


def test_a_bounded_lag_with_slow_batches_never_reads_as_lagging() -> None:
    """200 records/s read by batches of 5 to 17 s (lag 0.1k-3.6k, as in clean runs): a window of seconds held
    one or two batches a third and read a tooth as growth ("lag 2662 growing: its lowest in the last 18 s
    (2286) is above its highest in the first…") 5 times in 11 minutes. Judged over six batches or more, two
    to a third, the dagger stays running."""
    rng = random.Random(51)
    dagger = BusyDagger(rate=lambda t: 200.0, batches=batches_of([rng.uniform(5, 17) for _ in range(80)]))
    verdicts = timeline(dagger, 120, 780)
    assert changes(verdicts) == []
    assert {h.state for _, h in verdicts} == {RUNNING}
    assert max(h.lag.value for _, h in verdicts if h.lag) == 6050  # bounded: a 17-s batch of 200/s, and more


def test_a_window_stretches_to_six_slow_batches() -> None:
    """Batches of 17 s: the 60-s window holds three or four; it stretches back to hold six (102 s)."""
    dagger = BusyDagger(rate=lambda t: 200.0, batches=batches_of([17.0] * 30))
    facts = dagger.facts(400.0)
    from job.control.health_model import lag_readings
    from job.control.lag_trend import lag_trend

    trend = lag_trend(lag_readings(facts.samples, None, None, 0), 400.0, 60.0, max_window_s=300.0)
    assert trend is not None
    assert (trend.batches, trend.span_s) == (6, 90.0)


def _gap_samples(after: list[int]) -> tuple[Point, ...]:
    """Lag troughs of 17-s batches read up to 300 s, nothing while the controller is down (300-360 s), then
    17-s batches whose troughs are ``after``."""
    before = [Point(at=130.0 + 17 * i, input_rows=1000 * i, lag=500) for i in range(10)]
    then = [Point(at=361.0 + 17 * i, input_rows=100_000 + 1000 * i, lag=lag) for i, lag in enumerate(after)]
    return (*before, *then)


def test_no_verdict_across_a_controller_that_was_down() -> None:
    """Both daggers went lagging together 72 s after a controller restart: readings from before the gap were
    judged with those after. Across a gap longer than controller_silent_s they are not: the four batches
    after it are too few for a verdict."""
    after = [3000, 3100, 3050, 3200]
    now = 361.0 + 61  # a minute after the restart
    progress = {"updated_at": now - 1, "batch_at": now - 1, "input_rows": 200_000, "batch_duration_ms": 1500}
    f = DaggerFacts(
        desired_state="running",
        actual_state="running",
        started_at=0.0,
        progress=progress,
        lag=3200,
        lag_at=now - 1,
        samples=_gap_samples(after),
        controller_heartbeat=now - 1,
    )
    h = dagger_health(f, now, S)
    assert (h.state, h.reason) == (RUNNING, "reading")
    readings = lag_readings(f.samples, None, None, 0)
    assert lag_trend(readings, now, 60.0, max_window_s=300.0, max_gap_s=S.controller_silent_s) is None
    joined = lag_trend(readings, now, 60.0, max_window_s=300.0, max_gap_s=120.0)  # judged across the gap
    assert joined is not None and joined.first == 500


def test_a_producer_faster_than_the_dagger_is_lagging_and_stays_so() -> None:
    """3,000 records/s into a dagger that reads 2,600/s in batches of 17 s (its lag swings 44k a batch): the
    tester saw lagging for one sample, running at lag 52.6k while it rose, running ↔ catching up 7 times in 5
    minutes and "catching up … not growing" while the lag went 15.6k → 39.3k. One change, to lagging, with
    the troughs that show it; rows/s is what the dagger reads, not Spark's per-batch rate."""
    dagger = BusyDagger(
        rate=lambda t: 200.0 if t < 300 else 3000.0,
        batches=batches_of([5.0] * 60) + batches_of([17.0] * 40, start=300, limit=44_200),
    )
    verdicts = timeline(dagger, 300, 900)
    # behind from the first batches of the burst; lagging once a batch leaves records the next does not read
    assert changes(verdicts) == [(320.0, RUNNING, CATCHING_UP), (420.0, CATCHING_UP, LAGGING)]
    at_600 = dict(verdicts)[600.0]
    assert at_600.reason == (
        "lag 192,800 growing over 6 batches in 95 s: after each batch it was no lower than after the one "
        "before (128,800 → 162,800), and each time the next batch left records unread"
    )
    assert all(2000 < h.rows_per_s.value < 3000 for t, h in verdicts if t >= 400 and h.rows_per_s)


def test_catching_up_says_not_growing_only_with_the_samples_that_show_it() -> None:
    """A backlog of 56k read off at 100/s more than arrives (3,000 a 10-s batch): catching up, and "not
    growing" with the troughs that show it, one change in four minutes. Read at 10/s less than arrives, it is
    behind, its troughs rising within the batches' swing: not said to grow, nor to shrink."""
    dagger = BusyDagger(
        rate=lambda t: 3000.0 if t < 20 else 200.0, batches=batches_of([10.0] * 40, limit=3000)
    )
    verdicts = timeline(dagger, 55, 300)
    assert changes(verdicts) == []  # behind from its first batches on: too few for a trend, not for its lag
    assert dict(verdicts)[55.0].reason == (
        "55,000 records behind; not shown to grow or to fall yet, over 5 batches in 55 s (a trend takes 6)"
    )
    h = dagger.judge(150.0)
    assert (h.state, h.reason) == (
        CATCHING_UP,
        "44,000 records behind, not growing: after its batches it fell from 50,000 to 44,000, over 7 batches in "
        "60 s",
    )
    slower = BusyDagger(
        rate=lambda t: 3000.0 if t < 20 else 200.0, batches=batches_of([10.0] * 40, limit=1900)
    )
    h = slower.judge(150.0)
    assert (h.state, h.reason) == (
        CATCHING_UP,
        "59,400 records behind; not shown to grow or to fall yet, over 7 batches in 60 s",
    )


def test_a_frozen_broker_stalls_the_dagger_within_a_batch_or_two() -> None:
    """The broker SIGSTOPped at 300 s for 182 s: no batch, its end offsets unreadable, idle reports every 2 s.
    The tester saw running with "no batch for 81 s: its brokers do not answer" from +20 s to +81 s and rows/s
    0 as a fresh figure; stalled only at +90 s. Now: stalled after brokers_silent_after_s (20 s; the next
    verdict, 25 s in), one change there and one back, and rows/s not current (as of the last batch)."""
    dagger = BusyDagger(
        rate=lambda t: 200.0,
        batches=batches_of([5.0] * 60) + batches_of([5.0] * 60, start=482),
        lag_fails=lambda t: 300 <= t < 482,
        idle_every_s=2.0,
    )
    verdicts = timeline(dagger, 280, 560)
    assert changes(verdicts) == [(325.0, RUNNING, STALLED), (490.0, STALLED, RUNNING)]
    h = dict(verdicts)[380.0]
    assert h.reason == (
        "its brokers do not answer: no batch for 80 s, end offsets unreadable for 85 s: Source error: the brokers "
        "did not answer in 5 s"
    )
    # one value with one time: the rate as of the last batch, old (never the idle reports' 0 at that time)
    assert h.rows_per_s == Figure(value=200.0, at=300.0, age_s=80.0, fresh=False)


def test_a_stopped_sink_is_one_change_toward_the_fault_and_one_back() -> None:
    """InfluxDB stopped at 300 s: the batch waits on its write (the first failure 60 s in, then retries) and
    commits at 721 s; the backlog is read in the next batch. One change to stalled (the sink named), then
    catching up while that batch reads the 84,400 records behind, and running once it has."""

    def sinks(t: float) -> dict[str, object]:
        retry = {"attempt": 3, "of": 15, "next_at": t + 10, "since": 360.0, "error": "connection refused"}
        return {"sinks": {"influx": {"failures": 0, "retrying": retry}}} if 360 <= t < 721 else {}

    dagger = BusyDagger(
        rate=lambda t: 200.0,
        batches=[*batches_of([5.0] * 60), Batch(300.0, 721.0), *batches_of([8.0] + [5.0] * 60, start=721)],
        extra_progress=sinks,
    )
    verdicts = timeline(dagger, 280, 900)
    assert changes(verdicts) == [
        (390.0, RUNNING, STALLED),
        (725.0, STALLED, CATCHING_UP),
        (730.0, CATCHING_UP, RUNNING),
    ]
    assert dict(verdicts)[400.0].reason == (
        "sink retrying: influx, attempt 3/15, next in 10 s, failing for 40 s: connection refused"
    )


def test_rows_per_second_is_never_one_empty_batch() -> None:
    """A dagger reading 150 rows/s whose newest batch found nothing new (a no-data batch: 0 rows, Spark's rate
    0) showed "0 rows/s" with no age in 13% of samples; and Spark's per-batch rate (rows over the batch's
    duration) showed 25,050.7 rows/s for a producer sending 3,000. Rows/s is rows over wall time."""
    samples = tuple(Point(at=900.0 + 5 * i, input_rows=750 * i, lag=300) for i in range(13))
    empty = (*samples, Point(at=961.0, input_rows=750 * 12))  # the no-data batch
    progress = {
        "updated_at": 961.0,
        "batch_at": 961.0,
        "input_rows": 9000,
        "input_rows_per_s": 0.0,
        "batch_duration_ms": 300,
    }
    f = DaggerFacts(
        desired_state="running",
        actual_state="running",
        started_at=0.0,
        progress=progress,
        lag=300,
        lag_at=960.0,
        samples=empty,
        controller_heartbeat=961.0,
    )
    h = dagger_health(f, 962.0, S)
    assert h.rows_per_s == Figure(value=150.0, at=961.0, age_s=1.0, fresh=True)
    spark = {**progress, "input_rows_per_s": 25_050.7}
    assert (
        dagger_health(DaggerFacts(**{**f.__dict__, "progress": spark}), 962.0, S).rows_per_s == h.rows_per_s
    )


def test_a_healthy_run_ends_the_streak_of_crashes() -> None:
    """A broker freeze left a dagger at restarts=2; 20 minutes of healthy running later it still showed 2
    (and a later bad version was given up after 4 crashes of its own). Once its run has reported and run for
    recovered_after_s, the model shows 0 restarts (the controller records 0 too)."""
    progress = {"updated_at": 999.0, "batch_at": 999.0, "input_rows": 5000, "batch_duration_ms": 900}
    base = {
        "desired_state": "running",
        "actual_state": "running",
        "restarts": 2,
        "progress": progress,
        "controller_heartbeat": 999.0,
        "last_error": "Source error: timed out",
    }
    looping = dagger_health(DaggerFacts(**{**base, "started_at": 970.0}), 1000.0, S)
    assert (looping.state, looping.restarts) == (CRASH_LOOPING, 2)
    healthy = dagger_health(DaggerFacts(**{**base, "started_at": 1000.0 - 1200}), 1000.0, S)
    assert healthy.restarts == 0
    # assigned 20 minutes ago into a host that was gone, its query up 40 s: not yet over (up from its query)
    late_query = {**progress, "query_started_at": 960.0}
    relaunched = dagger_health(
        DaggerFacts(**{**base, "started_at": 1000.0 - 1200, "progress": late_query}), 1000.0, S
    )
    assert relaunched.restarts == 2
    assert (
        up_since(1000.0 - 1200, late_query) == 960.0 and up_since(970.0, {"query_started_at": 900.0}) == 970.0
    )


def test_a_backlog_reads_the_same_whatever_the_batches_length() -> None:
    """Issue 51: fused members read ``running`` with a backlog where a plain dagger with the same backlog read
    ``catching up``. A fused group runs one query for all its members: its batches are long (70 s here), so
    its lag window (stretched to lag_window_max_s, 300 s) never holds the six batches a trend takes, and the
    trend's verdict (catching up) never came. A backlog of 30,000 kept by batches that read what arrives: the
    same state whatever the batches' length, its lag after its newest batch (not a trend) the evidence."""

    def kept_behind(length: float) -> BusyDagger:
        n = int(1000 / length) + 2
        burst = lambda t: 60000.0 if t < 0.5 else 1000.0  # noqa: E731
        return BusyDagger(rate=burst, batches=batches_of([length] * n, start=1.0, limit=int(1000 * length)))

    plain, fused = kept_behind(10.0), kept_behind(70.0)
    assert {h.state for _, h in timeline(plain, 300, 900)} == {CATCHING_UP}
    assert {h.state for _, h in timeline(fused, 300, 900)} == {CATCHING_UP}
    assert fused.judge(500.0).reason == (
        "76,000 records behind; not shown to grow or to fall yet, over 5 batches in 285 s (a trend takes 6)"
    )
