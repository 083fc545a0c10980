"""A simulated dagger on a busy machine, for the health model's golden tests: records arrive at a rate, micro-
batches of uneven length read them, and a controller reads the lag every 5 s and soon after each batch that
read rows. It yields what the controller records (progress samples, lag samples, the status row) at any time,
so a test can judge the dagger as every surface does and count its state changes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from job.control.health_model import DaggerFacts, DaggerHealth, HealthSettings, Point, dagger_health

READ_EVERY_S = 5.0  # the controller's lag_interval_s
READ_AFTER_BATCH_S = 1.0  # a batch that read rows brings the next read forward (one round later)


@dataclass
class Batch:
    """One micro-batch: planned at ``start`` (it reads what has arrived then, at most ``limit`` records),
    committed and reported at ``end``."""

    start: float
    end: float
    limit: int | None = None
    rows: int = 0


@dataclass
class BusyDagger:
    """Records arriving at ``rate(t)`` per second; ``batches`` read them. ``lag_fails`` says when the brokers'
    end offsets cannot be read; ``idle_every_s`` adds idle reports (updated_at moves, batch_at does not)
    while no batch runs; ``silent`` are the spans a controller was down (nothing recorded). With
    ``reports_batch_start`` the dagger reports each batch's start (``running_batch``; updated_at moves);
    ``run_started_at`` and ``restarts`` are its current run's (a restart), when not ``started_at`` and 0."""

    rate: Callable[[float], float]
    batches: list[Batch]
    lag_fails: Callable[[float], bool] = lambda t: False
    idle_every_s: float | None = None
    silent: Sequence[tuple[float, float]] = ()
    started_at: float = 0.0
    extra_progress: Callable[[float], dict[str, Any]] = lambda t: {}
    reports_batch_start: bool = False
    run_started_at: float | None = None
    restarts: int = 0
    _arrived_steps: list[float] = field(default_factory=lambda: [0.0])

    def arrived(self, t: float) -> int:
        """Records on the topics at ``t`` (the rate integrated in 0.5-s steps)."""
        steps = self._arrived_steps
        while self.started_at + 0.5 * (len(steps) - 1) < t:
            at = self.started_at + 0.5 * (len(steps) - 1)
            steps.append(steps[-1] + self.rate(at) * 0.5)
        i = max(int((t - self.started_at) / 0.5), 0)
        at = self.started_at + 0.5 * i
        return int(steps[i] + self.rate(at) * (t - at))

    def __post_init__(self) -> None:
        committed = 0
        for b in self.batches:
            planned = self.arrived(b.start)
            take = planned - committed if b.limit is None else min(planned - committed, b.limit)
            b.rows = take
            committed += take

    def committed(self, t: float) -> tuple[int, Batch | None]:
        """Rows read in all by the batches committed by ``t``, and the newest of them."""
        rows, last = 0, None
        for b in self.batches:
            if b.end <= t:
                rows, last = rows + b.rows, b
        return rows, last

    def _down(self, t: float) -> bool:
        return any(a <= t < b for a, b in self.silent)

    def reads(self, until: float) -> list[float]:
        """When the controller read the lag up to ``until``."""
        times, t, last = [], self.started_at, -1e9
        ends = sorted(b.end for b in self.batches if b.rows > 0)
        while t <= until:
            due = t - last >= READ_EVERY_S or any(0 < t - e <= READ_AFTER_BATCH_S and last < e for e in ends)
            if due and not self._down(t):
                times.append(t)
                last = t
            t = round(t + 1.0, 6)  # the controller's rounds
        return times

    def facts(self, now: float, window_s: float = 420.0) -> DaggerFacts:
        """The facts the surfaces judge at ``now``: the samples of the last ``window_s``, the status row."""
        points: list[Point] = []
        for b in self.batches:
            if now - window_s <= b.end <= now and not self._down(b.end):
                points.append(Point(at=b.end, input_rows=self.committed(b.end)[0]))
        if self.idle_every_s:
            t = self.started_at
            while t <= now:
                rows, last = self.committed(t)
                running = any(b.start <= t < b.end for b in self.batches)
                if (
                    not running
                    and last is not None
                    and t > last.end
                    and t >= now - window_s
                    and not self._down(t)
                ):
                    points.append(Point(at=t, input_rows=rows))
                t += self.idle_every_s
        running: tuple[int, Batch] | None = None
        if self.reports_batch_start:
            for i, b in enumerate(self.batches):
                if now - window_s <= b.start <= now and not self._down(b.start):
                    points.append(Point(at=b.start, input_rows=self.committed(b.start)[0]))
                if b.start <= now < b.end:
                    running = (i, b)
        lag = lag_at = lag_error = None
        for t in self.reads(now):
            if self.lag_fails(t):
                lag_error = "Source error: the brokers did not answer in 5 s"
                continue
            rows, _ = self.committed(t)
            lag, lag_at, lag_error = self.arrived(t) - rows, t, None
            if t >= now - window_s:
                points.append(Point(at=t, input_rows=rows, lag=lag))
        rows, last = self.committed(now)
        updates = [p.at for p in points if p.lag is None]
        updated = max(updates) if updates else (last.end if last else None)
        progress: dict[str, Any] = {}
        if last is not None and updated is not None:
            progress = {
                "updated_at": updated,
                "batch_at": last.end,
                "input_rows": rows,
                "input_rows_per_s": last.rows / max(last.end - last.start, 0.001),  # a per-batch rate
                "batch_duration_ms": int((last.end - last.start) * 1000),
                **self.extra_progress(now),
            }
            if running is not None:
                progress["running_batch"] = {"id": running[0], "since": running[1].start}
        status = {
            "actual_state": "running",
            "started_at": self.started_at if self.run_started_at is None else self.run_started_at,
            "restarts": self.restarts,
            "progress": progress,
            "lag": lag,
            "lag_at": lag_at,
            "lag_error": lag_error,
        }
        return DaggerFacts.of("running", status, heartbeat=now - 1.0, samples=points)

    def judge(self, now: float, s: HealthSettings | None = None) -> DaggerHealth:
        """The health model's verdict at ``now``."""
        return dagger_health(self.facts(now), now, s or HealthSettings())


def timeline(
    dagger: BusyDagger, start: float, end: float, every_s: float = 5.0
) -> list[tuple[float, DaggerHealth]]:
    """The verdicts from ``start`` to ``end``, every ``every_s`` (as a scraper samples /metrics)."""
    out, t = [], start
    while t <= end:
        out.append((t, dagger.judge(t)))
        t += every_s
    return out


def changes(verdicts: list[tuple[float, DaggerHealth]]) -> list[tuple[float, str, str]]:
    """The state changes of a timeline: (when, from, to)."""
    return [
        (t, a.state, b.state)
        for (_, a), (t, b) in zip(verdicts, verdicts[1:], strict=False)
        if a.state != b.state
    ]


def batches_of(lengths: Sequence[float], start: float = 0.0, limit: int | None = None) -> list[Batch]:
    """Batches back to back of the given lengths (seconds) from ``start``."""
    out, t = [], start
    for length in lengths:
        out.append(Batch(start=t, end=t + length, limit=limit))
        t += length
    return out
