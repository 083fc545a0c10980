"""Golden tests of the health model: plain data in, exact states and figures out (no service, no clock)."""

from __future__ import annotations

from typing import Any

import pytest

from job.control.health_model import (
    CATCHING_UP,
    CRASH_LOOPING,
    DEGRADED,
    FAILED,
    HEALTHY,
    LAGGING,
    RUNNING,
    STALLED,
    STARTING,
    STOPPED,
    UNHEALTHY,
    UNKNOWN,
    DaggerFacts,
    Figure,
    HealthSettings,
    Point,
    cluster_health,
    dagger_health,
    last_rows_at,
    watermark_age,
)
from job.control.lag_trend import LagTrend, lag_trend

NOW = 1_000_000.0
S = (
    HealthSettings()
)  # controller_silent 30, stall 90, start 300, crash 2 in 600, lag 1000/60 s, catch-up 10000
BEAT = NOW - 2  # a fresh controller heartbeat


def progress(updated: float, batch: float | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "updated_at": updated,
        "batch_at": updated if batch is None else batch,
        "input_rows_per_s": 950.0,
        "batch_duration_ms": 1200,
        **extra,
    }


def sawtooth(
    start: float, end: float, lows: tuple[int, int, int], high: int, step: float = 2.5
) -> tuple[Point, ...]:
    """Samples every ``step`` s of a lag that climbs by ``high`` over a 10-s batch (four samples of one batch:
    the rows read in all move once per tooth) and drops back to the third's low when the next commits."""
    n = int((end - start) / step) + 1
    third = (end - start) / 3
    out = []
    for i in range(n):
        at = start + i * step
        low = lows[min(int((at - start) / third), 2)]
        out.append(Point(at=at, input_rows=1000 * (i // 4 + 1), lag=low + int(high * ((i % 4) / 4))))
    return tuple(out)


def reading(
    start: float, end: float, step: float = 5.0, lag: int = 100, growth: int = 0
) -> tuple[Point, ...]:
    """Samples every ``step`` s from ``start`` to ``end`` with rows read in each and the lag growing."""
    n = int((end - start) / step) + 1
    return tuple(
        Point(at=start + i * step, input_rows=1000 * (i + 1), lag=lag + growth * i) for i in range(n)
    )


def facts(**kw: Any) -> DaggerFacts:
    base: dict[str, Any] = {
        "desired_state": "running",
        "actual_state": "running",
        "started_at": NOW - 1000,
        "controller_heartbeat": BEAT,
    }
    return DaggerFacts(**{**base, **kw})


CASES: list[tuple[str, DaggerFacts, str, str]] = [
    (
        "never deployed",
        facts(desired_state="stopped", actual_state="created", started_at=None),
        STOPPED,
        "never deployed",
    ),
    ("stopped on purpose", facts(desired_state="stopped", actual_state="stopped"), STOPPED, "stopped"),
    (
        "stopped, controller silent",
        facts(desired_state="stopped", actual_state="stopped", controller_heartbeat=NOW - 500),
        STOPPED,
        "stopped",
    ),
    (
        "stopping",
        facts(desired_state="stopped", actual_state="stopping", progress=progress(NOW - 1)),
        STOPPED,
        "stopping",
    ),
    (
        "running but its controller is silent",
        facts(progress=progress(NOW - 1), lag=0, lag_at=NOW - 1, controller_heartbeat=NOW - 31),
        UNKNOWN,
        "its controller is silent for 31 s",
    ),
    (
        "no controller ever",
        facts(actual_state="pending", controller_heartbeat=None),
        UNKNOWN,
        "no controller has reported",
    ),
    (
        "pending with a controller",
        facts(actual_state="pending"),
        STARTING,
        "starting: waiting for its controller to start it",
    ),
    (
        "failed",
        facts(actual_state="failed", restarts=6, last_error="Sink error: refused"),
        FAILED,
        "gave up after 6 crashes in a row: Sink error: refused",
    ),
    (
        "crashed, retry due",
        facts(
            actual_state="crashed", restarts=1, next_restart_at=NOW + 4, last_error="Source error: no records"
        ),
        CRASH_LOOPING,
        "crashed: Source error: no records; restart 1 in 4 s",
    ),
    (
        "crashed while its brokers do not answer",
        facts(
            actual_state="crashed",
            restarts=1,
            next_restart_at=NOW + 4,
            last_error="Dagger error: killed by signal 9",
            lag=None,
            lag_at=NOW - 60,
            lag_error="Source error: the brokers did not answer in 5 s",
            lag_error_at=NOW - 35,
        ),
        CRASH_LOOPING,
        "crashed: Dagger error: killed by signal 9; its brokers do not answer: end offsets unreadable for 35 s: "
        "Source error: the brokers did not answer in 5 s; restart 1 in 4 s",
    ),
    (
        "restarted twice, relaunched 100 s ago, no report",
        facts(restarts=2, started_at=NOW - 100, progress=progress(NOW - 200), last_error="boom"),
        CRASH_LOOPING,
        "restarted 2 times in a row, relaunched 100 s ago, its query not started yet: boom",
    ),
    (
        "restarted twice, its query up 30 s of the 100 since its relaunch",
        facts(
            restarts=2,
            started_at=NOW - 100,
            progress=progress(NOW - 1, query_started_at=NOW - 30),
            last_error="boom",
        ),
        CRASH_LOOPING,
        "restarted 2 times in a row, up 30 s: boom",
    ),
    (
        "restarted twice, up long ago",
        facts(
            restarts=2,
            started_at=NOW - 700,
            progress=progress(NOW - 1),
            lag=0,
            lag_at=NOW - 1,
            samples=reading(NOW - 120, NOW - 1),
        ),
        RUNNING,
        "reading",
    ),
    (
        "starting, no report yet",
        facts(actual_state="starting", started_at=NOW - 20, running_version=1),
        STARTING,
        "starting version 1: started 20 s ago, no report yet",
    ),
    (
        "starting, no report after 301 s",
        facts(actual_state="starting", started_at=NOW - 301),
        STALLED,
        "no report 301 s after its start",
    ),
    (
        "report from before this start",
        facts(actual_state="starting", started_at=NOW - 20, progress=progress(NOW - 40)),
        STARTING,
        "rolling out a new run: its new run started 20 s ago, no report yet",
    ),
    (
        "a new version rolling out, its old run's report the last",
        facts(actual_state="starting", started_at=NOW - 1, running_version=3, progress=progress(NOW - 2)),
        STARTING,
        "rolling out version 3: its new run started 1 s ago, no report yet",
    ),
    (
        "restarted once after a crash, no report yet",
        facts(actual_state="starting", started_at=NOW - 4, restarts=1, running_version=2),
        STARTING,
        "restarting version 2 after 1 crash: its new run started 4 s ago, no report yet",
    ),
    (
        "reading, small lag",
        facts(progress=progress(NOW - 1), lag=100, lag_at=NOW - 2, samples=reading(NOW - 120, NOW - 1)),
        RUNNING,
        "reading",
    ),
    (
        "idle, nothing to read",
        facts(progress=progress(NOW - 1, batch=NOW - 600), lag=0, lag_at=NOW - 2),
        RUNNING,
        "idle: nothing new to read",
    ),
    (
        "idle reports with a backlog (a fused member in a burst): never nothing new to read",
        facts(progress=progress(NOW - 1, batch=NOW - 20), lag=133_444, lag_at=NOW - 2),
        CATCHING_UP,
        "133,444 records behind; not shown to grow or to fall yet, one batch seen (a trend takes 6)",
    ),
    (
        "silent process (broker paused)",
        facts(progress=progress(NOW - 91), lag=5000, lag_at=NOW - 95),
        STALLED,
        "no report for 91 s",
    ),
    (
        "idle reports but records wait",
        facts(
            progress=progress(NOW - 1, batch=NOW - 200),
            lag=3000,
            lag_at=NOW - 2,
            samples=(Point(NOW - 200, 500, 0), Point(NOW - 100, 500, 3000), Point(NOW - 1, 500, 3000)),
        ),
        STALLED,
        "read no row for 200 s while 3,000 records wait",
    ),
    (
        "idle reports, brokers unreadable",
        facts(
            progress=progress(NOW - 2, batch=NOW - 100),
            lag=None,
            lag_at=NOW - 95,
            lag_error="Source error: timed out",
            samples=(Point(NOW - 100, 500, 0),),
        ),
        STALLED,
        "its brokers do not answer: no batch for 100 s, end offsets unreadable for 95 s: Source error: timed out",
    ),
    (
        "idle, brokers unreadable for 30 s: longer than a batch",
        facts(
            progress=progress(NOW - 2, batch=NOW - 100),
            lag=None,
            lag_at=NOW - 30,
            lag_error="Source error: timed out",
        ),
        STALLED,
        "its brokers do not answer: no batch for 100 s, end offsets unreadable for 30 s: Source error: timed out",
    ),
    (
        "reads little (batches minutes apart), brokers unreadable for 50 s: the gap is not a batch's time",
        facts(
            progress=progress(NOW - 2, batch=NOW - 140),
            lag=None,
            lag_at=NOW - 50,
            lag_error="Source error: timed out",
            samples=(Point(NOW - 400, 100, 0), Point(NOW - 270, 200, 0), Point(NOW - 140, 300, 0)),
        ),
        STALLED,
        "its brokers do not answer: no batch for 140 s, end offsets unreadable for 50 s: Source error: timed out",
    ),
    (
        "idle, brokers unreadable for 15 s only",
        facts(
            progress=progress(NOW - 2, batch=NOW - 100),
            lag=None,
            lag_at=NOW - 15,
            lag_error="Source error: timed out",
        ),
        RUNNING,
        "end offsets unreadable for 15 s, last batch 100 s ago (stalled when both pass 20 s): Source error: timed out",
    ),
    (
        "restarted while its brokers do not answer",
        facts(
            progress=progress(NOW - 2, batch=NOW - 130),
            started_at=NOW - 20,
            lag=None,
            lag_at=NOW - 130,
            lag_error="Source error: timed out",
            samples=(Point(NOW - 140, 500, 0), Point(NOW - 130, 600, 10)),
        ),
        STALLED,
        "its brokers do not answer: no batch for 130 s, end offsets unreadable for 130 s: Source error: "
        "timed out",
    ),
    (
        "restarted after a stall, no report yet: still stalled, same cause",
        facts(
            progress=progress(NOW - 40, batch=NOW - 130),
            started_at=NOW - 15,
            restarts=1,
            lag=None,
            lag_at=NOW - 130,
            lag_error="Source error: timed out",
            samples=(Point(NOW - 140, 500, 0), Point(NOW - 130, 600, 10), Point(NOW - 40, 600)),
        ),
        STALLED,
        "its brokers do not answer: no batch for 130 s (restarted 15 s ago, no report yet), end offsets "
        "unreadable for 130 s: Source error: timed out",
    ),
    (
        "restarted after a stall, reports idle with no batch yet: still stalled",
        facts(
            progress=progress(NOW - 2, batch=0.0),
            started_at=NOW - 15,
            restarts=1,
            lag=None,
            lag_at=NOW - 130,
            lag_error="Source error: timed out",
            samples=(Point(NOW - 140, 500, 0), Point(NOW - 130, 600, 10), Point(NOW - 2, 0)),
        ),
        STALLED,
        "its brokers do not answer: no batch for 130 s, end offsets unreadable for 130 s: Source error: timed out",
    ),
    (
        "deployed (a rollback) after a failed run, no batch yet: it starts afresh",
        facts(
            progress=progress(NOW - 2, batch=0.0),
            started_at=NOW - 15,
            lag=4000,
            lag_at=NOW - 3,
            samples=(
                Point(NOW - 900, 500),
                Point(NOW - 890, 600),
                Point(NOW - 2, 0),
                Point(NOW - 3, 0, 4000),
            ),
        ),
        RUNNING,
        "started 15 s ago: no batch yet",
    ),
    (
        "brokers failing for 25 s after a good read 60 s ago: the outage counts from the first failure",
        facts(
            progress=progress(NOW - 2, batch=NOW - 100),
            lag=None,
            lag_at=NOW - 60,
            lag_error="Source error: timed out",
            lag_error_at=NOW - 25,
        ),
        STALLED,
        "its brokers do not answer: no batch for 100 s, end offsets unreadable for 25 s: Source error: timed out",
    ),
    (
        "brokers failing for 10 s only: not yet stalled, however old the last good read",
        facts(
            progress=progress(NOW - 2, batch=NOW - 100),
            lag=None,
            lag_at=NOW - 60,
            lag_error="Source error: timed out",
            lag_error_at=NOW - 10,
        ),
        RUNNING,
        "end offsets unreadable for 10 s, last batch 100 s ago (stalled when both pass 20 s): "
        "Source error: timed out",
    ),
    (
        "restarted after reading no row while records wait, no report yet",
        facts(
            progress=progress(NOW - 30, batch=NOW - 200),
            started_at=NOW - 15,
            restarts=1,
            lag=4000,
            lag_at=NOW - 3,
            samples=(Point(NOW - 210, 500), Point(NOW - 200, 600), Point(NOW - 3, 600, 4000)),
        ),
        STALLED,
        "read no row for 200 s while 4,000 records wait (restarted 15 s ago, no report yet)",
    ),
    (
        "restarted twice, up 100 s, reports but reads nothing: its streak goes on",
        facts(
            restarts=2,
            started_at=NOW - 100,
            progress=progress(NOW - 1, batch=NOW - 300, input_rows=5000),
            lag=None,
            lag_at=NOW - 300,
            lag_error="Source error: timed out",
        ),
        CRASH_LOOPING,
        "restarted 2 times in a row, up 100 s: no error; its brokers do not answer: end offsets unreadable for "
        "300 s: Source error: timed out",
    ),
    (
        "restarted twice, up 100 s, reads but its sink wrote nothing: its streak goes on",
        facts(
            restarts=2,
            started_at=NOW - 100,
            progress=progress(NOW - 1, input_rows=5000, sinks={"influx": {"rows_written": 0}}),
            lag=0,
            lag_at=NOW - 1,
        ),
        CRASH_LOOPING,
        "restarted 2 times in a row, up 100 s: no error",
    ),
    (
        "idle on an empty topic: no lag yet",
        facts(progress=progress(NOW - 2, batch=NOW - 900), lag=None, lag_at=None),
        RUNNING,
        "idle: nothing new to read",
    ),
    (
        "lag growing",
        facts(
            progress=progress(NOW - 1),
            lag=5100 + 12 * 1000,
            lag_at=NOW - 1,
            samples=reading(NOW - 60, NOW - 1, lag=5100, growth=1000),
        ),
        LAGGING,
        "lag 17,100 growing over 12 batches in 55 s: after each batch it was no lower than after the one before "
        "(5,100 → 16,100), and each time the next batch left records unread",
    ),
    (
        "a tall saw-tooth, bounded",
        facts(
            progress=progress(NOW - 1),
            lag=11500,
            lag_at=NOW - 1,
            samples=sawtooth(NOW - 60, NOW - 1, lows=(1000, 1800, 1400), high=12000),
        ),
        RUNNING,
        "reading",
    ),
    (
        "a saw-tooth that falls behind",
        facts(
            progress=progress(NOW - 1),
            lag=19000,
            lag_at=NOW - 1,
            samples=sawtooth(NOW - 60, NOW - 1, lows=(3000, 8000, 14000), high=5000),
        ),
        LAGGING,
        "lag 19,000 growing over 6 batches in 58 s: after each batch it was no lower than after the one before "
        "(3,000 → 14,000), and each time the next batch left records unread",
    ),
    (
        "behind, swinging, not growing",
        facts(
            progress=progress(NOW - 1),
            lag=97000,
            lag_at=NOW - 1,
            samples=sawtooth(NOW - 60, NOW - 1, lows=(45000, 47000, 44000), high=52000),
        ),
        CATCHING_UP,
        "97,000 records behind, not growing: after its batches it fell from 45,000 to 44,000, over 6 batches in "
        "58 s",
    ),
    (
        "behind with a batch longer than the window",
        facts(
            progress=progress(NOW - 1, batch_duration_ms=24_000),
            lag=30000,
            lag_at=NOW - 1,
            samples=reading(NOW - 60, NOW - 1, lag=30000, step=24),
        ),
        CATCHING_UP,
        "30,000 records behind; not shown to grow or to fall yet, over 3 batches in 48 s (a trend takes 6)",
    ),
    (
        "lag growing, too little history",
        facts(
            progress=progress(NOW - 1),
            lag=5100,
            lag_at=NOW - 1,
            samples=reading(NOW - 20, NOW - 1, lag=100, growth=1000),
        ),
        RUNNING,
        "reading",
    ),
    (
        "behind and shrinking",
        facts(
            progress=progress(NOW - 1),
            lag=20000,
            lag_at=NOW - 1,
            samples=reading(NOW - 60, NOW - 1, lag=80000, growth=-5000),
        ),
        CATCHING_UP,
        "20,000 records behind, not growing: after its batches it fell from 80,000 to 25,000, over 12 batches in "
        "55 s",
    ),
    (
        "behind, too little history to tell",
        facts(
            progress=progress(NOW - 1),
            lag=20000,
            lag_at=NOW - 1,
            samples=reading(NOW - 20, NOW - 1, lag=20000),
        ),
        CATCHING_UP,
        "20,000 records behind; not shown to grow or to fall yet, over 4 batches in 15 s (a trend takes 6)",
    ),
    (
        "a sink retrying for 12 s",
        facts(
            progress=progress(
                NOW - 1,
                sinks={
                    "influx": {
                        "failures": 7,
                        "retrying": {
                            "attempt": 7,
                            "of": 15,
                            "next_at": NOW + 12,
                            "since": NOW - 12,
                            "error": "HTTP 503",
                        },
                    }
                },
            ),
            lag=100,
            lag_at=NOW - 1,
        ),
        RUNNING,
        "sink retrying: influx, attempt 7/15, next in 12 s, failing for 12 s: HTTP 503",
    ),
    (
        "a sink retrying for 31 s",
        facts(
            progress=progress(
                NOW - 95,
                sinks={
                    "influx": {"retrying": {"attempt": 9, "of": 15, "next_at": NOW + 20, "since": NOW - 131}}
                },
            ),
            lag=9000,
            lag_at=NOW - 1,
        ),
        STALLED,
        "sink retrying: influx, attempt 9/15, next in 20 s, failing for 131 s",
    ),
    (
        "restarted twice, up 100 s with reports",
        facts(
            restarts=2,
            started_at=NOW - 100,
            progress=progress(NOW - 1, input_rows=5000, sinks={"influx": {"rows_written": 40}}),
            lag=0,
            lag_at=NOW - 1,
            samples=reading(NOW - 120, NOW - 1),
        ),
        RUNNING,
        "reading",
    ),
    (
        "restarted twice, up 30 s with reports",
        facts(restarts=2, started_at=NOW - 30, progress=progress(NOW - 1), last_error="boom"),
        CRASH_LOOPING,
        "restarted 2 times in a row, up 30 s: boom",
    ),
]


@pytest.mark.parametrize(("facts_", "state", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_dagger_states(facts_: DaggerFacts, state: str, reason: str) -> None:
    h = dagger_health(facts_, NOW, S)
    assert (h.state, h.reason) == (state, reason)


def test_a_stopped_or_silent_dagger_shows_no_figures() -> None:
    p = progress(NOW - 1, watermark="1970-01-12T13:46:30.000Z")
    for f in (
        facts(desired_state="stopped", actual_state="stopped", progress=p, lag=7, lag_at=NOW - 1),
        facts(progress=p, lag=7, lag_at=NOW - 1, controller_heartbeat=NOW - 60),
        facts(actual_state="crashed", progress=p, lag=7, lag_at=NOW - 1, next_restart_at=NOW + 8),
    ):
        h = dagger_health(f, NOW, S)
        assert (h.rows_per_s, h.lag, h.batch_ms, h.watermark_age_s) == (None, None, None, None), h.state


def test_figures_carry_their_age() -> None:
    sinks = {"influx": {"failures": 2}, "kafka": {"failures": 1}}
    h = dagger_health(
        facts(
            progress=progress(
                NOW - 4, batch=NOW - 4, watermark="1970-01-12T13:46:20Z", sinks=sinks, late_rows_dropped=9
            ),
            lag=250,
            lag_at=NOW - 40,
            samples=reading(NOW - 60, NOW - 4),
        ),
        NOW,
        S,
    )
    assert h.state == RUNNING
    assert h.rows_per_s == Figure(200.0, NOW - 5, 5.0, True)  # 1000 rows every 5 s, not Spark's 950
    assert h.batch_ms == Figure(1200.0, NOW - 4, 4.0, True)
    assert h.lag == Figure(250.0, NOW - 40, 40.0, False)  # read 40 s ago: old, and said so
    assert h.watermark_age_s == 20.0  # 1970-01-12T13:46:20Z is 999,980
    assert (h.sink_errors, h.late_rows_dropped) == (3, 9)


def test_an_idle_dagger_reads_zero_rows_per_second_not_its_last_rate() -> None:
    idle = (
        Point(NOW - 300, 5000),
        Point(NOW - 200, 5000, 0),
        Point(NOW - 100, 5000, 0),
        Point(NOW - 3, 5000, 0),
    )
    h = dagger_health(
        facts(progress=progress(NOW - 3, batch=NOW - 300), lag=0, lag_at=NOW - 1, samples=idle), NOW, S
    )
    assert h.rows_per_s == Figure(0.0, NOW - 3, 3.0, True)
    assert h.batch_ms == Figure(1200.0, NOW - 300, 300.0, False)


def test_a_stalled_dagger_shows_its_figures_as_old() -> None:
    h = dagger_health(
        facts(
            progress=progress(NOW - 120), lag=313_900, lag_at=NOW - 2, samples=reading(NOW - 240, NOW - 120)
        ),
        NOW,
        S,
    )
    assert h.state == STALLED
    assert h.rows_per_s == Figure(200.0, NOW - 120, 120.0, False)


def test_helpers() -> None:
    assert last_rows_at((Point(1, 10), Point(2, 10), Point(3, 15), Point(4, 15))) == 3
    assert last_rows_at((Point(1, 10),)) is None
    six = [(NOW - 60 + 12 * i, 10 + 30 * i, i) for i in range(6)]  # six batches, one reading each
    trend = lag_trend(six, NOW, 60)
    assert trend == LagTrend(
        span_s=60.0,
        batches=6,
        lows=(10, 70, 130),
        first_high=40,
        low=10,
        latest=160,
        first=10,
        last=160,
        decreases=0,
        ends=(10, 160),
        left_behind=4,
        judged=5,
        arrival_per_s=155 / 60,  # 5 rows read and 150 more waiting, in 60 s
        horizon_s=60,
    )
    assert trend.growing(150) and not trend.growing(151)
    # the batches after the first read all that waited after it: records were not left behind each time
    assert not lag_trend([(at, lag, 20 * b) for at, lag, b in six], NOW, 60).growing(1)  # type: ignore[union-attr]
    dip = [(at, lag - 40 * (i == 3), b) for i, (at, lag, b) in enumerate(six)]  # one trough went down...
    assert lag_trend(dip, NOW, 60).growing(1)  # type: ignore[union-attr]  # ...and the next made it up
    fell = [(at, (10, 40, 70, 60, 65, 160)[i], b) for i, (at, _, b) in enumerate(six)]
    assert not lag_trend(fell, NOW, 60).growing(1)  # type: ignore[union-attr]  # 65: two batches below 70
    with_zero = [*six[:2], (NOW - 40, 0, 1), *six[2:]]
    assert not lag_trend(with_zero, NOW, 60).growing(1)  # type: ignore[union-attr]
    assert lag_trend(six[3:], NOW, 60) is None  # three batches: a third of one batch is one tooth
    assert lag_trend([(at - 40, lag, b) for at, lag, b in six], NOW, 60) is None  # spans 20 of 60 s
    flat = [(NOW - 60 + 12 * i, (0, 50)[i % 2], i) for i in range(6)]
    assert not lag_trend(flat, NOW, 60).growing(1)  # type: ignore[union-attr]
    assert watermark_age("1970-01-01T00:00:00.000Z", NOW) is None
    assert watermark_age("not a time", NOW) is None


def probe(
    spark: bool = True, kafka: bool = True, influx: bool = True, failures: int = 2, refused: bool = False
) -> dict[str, Any]:
    """A probe of the three parts; a failed one has ``failures`` unanswered probes in a row (or ``refused``)."""

    def part(ok: bool, error: str) -> dict[str, Any]:
        return (
            {"ok": ok, "error": None}
            if ok
            else {"ok": False, "error": error, "failures": failures, "refused": refused}
        )

    return {
        "spark": part(spark, "no ALIVE worker"),
        "kafka": part(kafka, "all brokers down"),
        "influx": part(influx, "ConnectionError"),
    }


CLUSTERS: list[
    tuple[str, float | None, dict[str, Any] | None, float | None, list[str], str, tuple[str, ...]]
] = [
    ("all good", BEAT, probe(), NOW - 5, [RUNNING, STOPPED, CATCHING_UP], HEALTHY, ()),
    ("a version rolling out degrades nothing", BEAT, probe(), NOW - 5, [RUNNING, STARTING], HEALTHY, ()),
    (
        "silent controller",
        NOW - 45,
        probe(),
        NOW - 5,
        [UNKNOWN],
        UNHEALTHY,
        ("controller silent for 45 s", "1 dagger unknown"),
    ),
    (
        "no controller, never probed",
        None,
        None,
        None,
        [],
        UNHEALTHY,
        (
            "no controller has reported",
            "master never probed",
            "brokers never probed",
            "InfluxDB never probed",
        ),
    ),
    (
        "broker down",
        BEAT,
        probe(kafka=False),
        NOW - 5,
        [RUNNING],
        UNHEALTHY,
        ("brokers down (2 probes in a row unanswered): all brokers down",),
    ),
    (
        "broker refused",
        BEAT,
        probe(kafka=False, failures=1, refused=True),
        NOW - 5,
        [RUNNING],
        UNHEALTHY,
        ("brokers down (refused the connection): all brokers down",),
    ),
    (
        "one unanswered probe: slow, not down",
        BEAT,
        probe(kafka=False, failures=1),
        NOW - 5,
        [RUNNING],
        HEALTHY,
        (),
    ),
    (
        "old probe",
        BEAT,
        probe(kafka=False),
        NOW - 61,
        [RUNNING],
        DEGRADED,
        ("master last probed 61 s ago", "brokers last probed 61 s ago", "InfluxDB last probed 61 s ago"),
    ),
    (
        "a lagging dagger",
        BEAT,
        probe(),
        NOW - 5,
        [RUNNING, LAGGING, LAGGING],
        DEGRADED,
        ("2 daggers lagging",),
    ),
    (
        "a crash loop beats a lag",
        BEAT,
        probe(),
        NOW - 5,
        [LAGGING, CRASH_LOOPING],
        UNHEALTHY,
        ("1 dagger lagging", "1 dagger crash-looping"),
    ),
    (
        "stalled and failed",
        BEAT,
        probe(influx=False),
        NOW - 5,
        [STALLED, FAILED],
        UNHEALTHY,
        (
            "InfluxDB down (2 probes in a row unanswered): ConnectionError",
            "1 dagger stalled",
            "1 dagger failed",
        ),
    ),
]


@pytest.mark.parametrize(
    ("beat", "probe_", "probe_at", "states", "state", "reasons"),
    [c[1:] for c in CLUSTERS],
    ids=[c[0] for c in CLUSTERS],
)
def test_cluster_states(
    beat: float | None,
    probe_: dict[str, Any] | None,
    probe_at: float | None,
    states: list[str],
    state: str,
    reasons: tuple[str, ...],
) -> None:
    h = cluster_health(beat, probe_, probe_at, states, NOW, S)
    assert (h.state, h.reasons) == (state, reasons)


def test_cluster_parts_and_counts() -> None:
    h = cluster_health(NOW - 40, probe(spark=False), NOW - 1, [RUNNING, RUNNING, UNKNOWN], NOW, S)
    assert h.parts == {"controller": "silent", "spark": "down", "kafka": "ok", "influx": "ok"}
    assert h.daggers == {RUNNING: 2, UNKNOWN: 1}
    assert (h.controller_age_s, h.probe_age_s) == (40.0, 1.0)
    slow = cluster_health(BEAT, probe(influx=False, failures=1), NOW - 3, [], NOW, S)
    assert (slow.parts["influx"], slow.state, slow.probe_age_s) == ("slow", HEALTHY, 3.0)
    stale = cluster_health(BEAT, probe(), NOW - 180, [], NOW, S)
    assert (stale.parts, stale.probe_age_s) == (
        {"controller": "ok", "spark": "stale", "kafka": "stale", "influx": "stale"},
        180.0,
    )


def test_settings_from_the_environment() -> None:
    s = HealthSettings.from_env(
        {"DAGGERS_HEALTH_STALL_AFTER_S": "20", "DAGGERS_HEALTH_CRASH_LOOP_RESTARTS": "3", "OTHER": "x"}
    )
    assert (s.stall_after_s, s.crash_loop_restarts, s.lag_window_s) == (20.0, 3, 60.0)
