"""The one health model of daggers and clusters: pure functions over plain data.

Every surface asks this module what a dagger or a cluster is: the console (dagger list, detail, clusters
and the health toast), ``daggers dagger list/show`` (and ``--json``), ``daggers cluster health``, the
controller's ``/metrics`` and the platform alerts. Nothing here reads a file, a database or a clock:
the callers pass the registry's rows (as dicts), the progress samples, the controller's heartbeat, the
last probe of the cluster's parts, and ``now``.

A dagger is in exactly one of :data:`DAGGER_STATES`:

``running``
    it reads what arrives; its lag is small. A micro-batch in flight is reading (see ``stalled``). Between
    batches it is idle only when nothing waits and its rows/s shows nothing read (:func:`between_batches`).
``catching up``
    it is behind: its lag after its newest batch is at least ``catching_up_lag``, and is not shown to grow
    (its reason says "not growing" only when its troughs show it falling). Batches too slow for a trend (a
    fused group's, fewer than six in ``lag_window_max_s``) do not change that: the newest batch's lag is the
    evidence, whatever the run's kind. The lag a catching-up or lagging
    reason gives as now is the lag figure shown beside it (``52,000 records behind``); other figures are
    named (``after its batches it fell from 50,000 to 44,000``).
``lagging``
    its lag grows over the lag window (:mod:`job.control.lag_trend`, as Burrow's warning: no reading is
    zero, the lag after each batch is no lower than after the one before (a one-batch dip aside: evidence
    must outlast one micro-batch), it grew by ``lag_growth_min``, and
    the dagger left records behind or holds more than the window's span of arrivals, its troughs risen before
    the newest too; slow batches alone, or one long batch among short ones, never make it lagging).
``stalled``
    its process is alive, yet it reported nothing for ``stall_after_s``, or read no row for
    ``stall_after_s`` while records wait on its topics, or its brokers do not answer (no batch and its
    brokers' end offsets unreadable for ``brokers_silent_after_s``, or one micro-batch when longer), or a
    sink has been retrying a write for ``sink_stall_after_s``. A restart after a crash does not reset this
    evidence: the samples of the run before count (a deploy or a rollback, which starts with no restarts,
    starts afresh: it has ``stall_after_s`` from its start to read a row). Two faults at once are both named.
    A micro-batch in flight (:func:`batch_in_flight`) is reading: it is not "read no row" nor "no report",
    and the reason names it once it has run for one micro-batch (``first batch after restart running for
    68 s (24,504 records wait)``), until it has run for ``batch_stall_after_s``: then it is stalled.
``crash-looping``
    it crashed and waits for its next retry (``next_retry_at``), or it was restarted at least
    ``crash_loop_restarts`` times in a row and its current run has not yet read rows, written them and run
    for ``recovered_after_s`` (nor is older than ``crash_window_s``); its reason says ``up 30 s`` from its
    query's start (:func:`came_up_at`), ``relaunched 100 s ago, its query not started yet`` before. Once it has (:func:`streak_ended`), its
    crashes in a row are over: it shows 0 restarts, and the controller records 0. A run that only reports
    (its brokers do not answer) does not end the streak, and before its first report the stall evidence of
    the runs before stands. When its last lag read failed, the reason says so beside the crash's text
    (``crashed: …; its brokers do not answer: end offsets unreadable for 35 s: …``): a crash while a broker
    is frozen need not name the broker.

The lag window holds at least six micro-batches: ``lag_window_s``, stretched back up to ``lag_window_max_s``
when batches are slow, and never across a gap in the readings longer than ``controller_silent_s`` (a
controller that was down): a state changes only on evidence that outlasts a batch.
``failed``
    its controller gave up restarting it.
``stopped``
    it was stopped (or never deployed) on purpose. A dagger that should run while its old run stops (a
    restart, a new version) is not stopped: it shows what the old run shows ("replacing its run: …").
``starting``
    its controller started a run (a first start, a restart, or a new version rolling out) that has not
    reported yet, for at most ``start_timeout_s``: a deploy of an edited spec reads ``rolling out version 3:
    its new run started 4 s ago, no report yet``. It is healthy for its cluster (a rollover degrades nothing),
    shows no figure, and the stall evidence of the runs before a restart after a crash still stands.
``unknown``
    no fresh report: its controller is silent (no heartbeat for ``controller_silent_s``), or it waits for
    its controller to start it.

Figures (rows/s, lag, batch time) carry the time they were measured and their age; a dagger that is
stopped, failed, crash-looping or unknown shows none. A lag is unknown (no figure, "lag unknown: …" its
reason) when its brokers' end offsets are behind its position: they lost records or answered wrongly. Rows/s is the rows read over the wall time of the
last ``rate_window_s`` of samples (:mod:`job.control.rates`), never one batch's rate; while its brokers do
not answer it is not current (its time is the last batch's).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from job.control.lag_trend import MIN_BATCHES, MIN_SPAN, Reading, lag_trend, newest_trough
from job.control.rates import Counted, batch_interval, rows_rate

RUNNING, CATCHING_UP, LAGGING, STALLED = "running", "catching up", "lagging", "stalled"
STARTING = "starting"
CRASH_LOOPING, FAILED, STOPPED, UNKNOWN = "crash-looping", "failed", "stopped", "unknown"
#: Every dagger state, best first.
DAGGER_STATES = (RUNNING, STARTING, CATCHING_UP, LAGGING, STALLED, CRASH_LOOPING, FAILED, STOPPED, UNKNOWN)
HEALTHY, DEGRADED, UNHEALTHY = "healthy", "degraded", "unhealthy"
#: Every cluster state, best first (a cluster is the worst of its parts).
CLUSTER_STATES = (HEALTHY, DEGRADED, UNHEALTHY)
#: What each dagger state makes of its cluster.
CLUSTER_LEVEL_OF = {
    RUNNING: HEALTHY,
    STARTING: HEALTHY,
    CATCHING_UP: HEALTHY,
    STOPPED: HEALTHY,
    LAGGING: DEGRADED,
    UNKNOWN: DEGRADED,
    STALLED: UNHEALTHY,
    CRASH_LOOPING: UNHEALTHY,
    FAILED: UNHEALTHY,
}
#: Environment variables that override a threshold: DAGGERS_HEALTH_STALL_AFTER_S=30.
ENV_PREFIX = "DAGGERS_HEALTH_"
_LIVE = (RUNNING, CATCHING_UP, LAGGING, STALLED)


class HealthSettings(BaseModel):
    """The thresholds of the health model (the same for every surface)."""

    model_config = ConfigDict(extra="forbid")

    controller_silent_s: float = Field(
        default=30.0,
        gt=0,
        description="A controller heartbeat older than this makes the controller silent: "
        "its cluster is unhealthy and its daggers unknown.",
    )
    stall_after_s: float = Field(
        default=90.0,
        gt=0,
        description="A live dagger that reported nothing for this long, or read no row for "
        "this long while records wait on its topics, is stalled.",
    )
    start_timeout_s: float = Field(
        default=300.0,
        gt=0,
        description="A starting dagger with no report this long after its start is stalled "
        "(before that it is unknown).",
    )
    crash_loop_restarts: int = Field(
        default=2,
        ge=1,
        description="Restarts in a row that make a running dagger crash-looping while its run "
        "is younger than crash_window_s (a crashed dagger waiting for its retry "
        "is crash-looping at once).",
    )
    crash_window_s: float = Field(
        default=600.0,
        gt=0,
        description="How long after a restart a dagger with crash_loop_restarts restarts "
        "counts as crash-looping at most.",
    )
    recovered_after_s: float = Field(
        default=60.0,
        gt=0,
        description="A restarted dagger that has read and written rows and run for this long is no longer "
        "crash-looping, however many restarts came before.",
    )
    sink_stall_after_s: float = Field(
        default=30.0,
        gt=0,
        description="A sink retrying one write for this long makes its dagger stalled (with "
        "the sink, the attempt and the next try in the reason).",
    )
    batch_stall_after_s: float = Field(
        default=300.0,
        gt=0,
        description="A micro-batch still running this long after it started makes its dagger stalled; "
        "before, a dagger with a batch in flight is reading (not stalled for rows it has not reported yet).",
    )
    lag_window_s: float = Field(
        default=60.0,
        gt=0,
        description="The window over which a growing lag makes a dagger lagging (stretched to hold at "
        "least six micro-batches).",
    )
    lag_window_max_s: float = Field(
        default=300.0,
        gt=0,
        description="How far back the lag window stretches to hold six slow micro-batches (fewer in it: "
        "no verdict on the lag's trend).",
    )
    brokers_silent_after_s: float = Field(
        default=20.0,
        gt=0,
        description="No batch and the brokers' end offsets unreadable for this long (or one micro-batch, "
        "when longer) make a dagger stalled: its brokers do not answer.",
    )
    rate_window_s: float = Field(
        default=60.0,
        gt=0,
        description="Rows/s is the rows read over this much wall time of samples (three micro-batches, "
        "when longer).",
    )
    lag_growth_min: int = Field(
        default=1000, ge=1, description="Records the lag must grow by over lag_window_s to count as lagging."
    )
    catching_up_lag: int = Field(
        default=10000, ge=1, description="A lag of at least this many records, not growing, is catching up."
    )
    figure_fresh_s: float = Field(
        default=30.0,
        gt=0,
        description="A figure (rows/s, lag, batch time) older than this is shown as old, with its age.",
    )
    probe_stale_s: float = Field(
        default=60.0,
        gt=0,
        description="A probe of the cluster's master, brokers and InfluxDB older than this "
        "leaves those parts unknown (the cluster degraded).",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HealthSettings:
        """Return the settings with each field overridden by ``DAGGERS_HEALTH_<FIELD>`` (upper case) when set,
        so the controller, the command line and the console judge alike. Raises pydantic.ValidationError."""
        env = os.environ if environ is None else environ
        given = {name: env[key] for name in cls.model_fields if (key := f"{ENV_PREFIX}{name.upper()}") in env}
        return cls.model_validate(given)


@dataclass(frozen=True)
class Point:
    """One progress sample: when, the rows read in all so far, and the lag then (None when unknown)."""

    at: float
    input_rows: int
    lag: int | None = None


@dataclass(frozen=True)
class DaggerFacts:
    """What is recorded about one dagger: its desired state, the controller's status row (as the keys of
    ``job.control.models.DaggerStatus``), its status.json (``progress``), recent samples, and its
    controller's heartbeat."""

    desired_state: str
    actual_state: str = "created"
    restarts: int = 0
    started_at: float | None = None
    running_version: int | None = None
    next_restart_at: float | None = None
    last_error: str | None = None
    progress: Mapping[str, Any] = field(default_factory=dict)
    lag: int | None = None
    lag_at: float | None = None
    lag_error: str | None = None
    lag_error_at: float | None = None
    lag_unknown: str | None = None
    samples: Sequence[Point] = ()
    controller_heartbeat: float | None = None

    @classmethod
    def of(
        cls,
        desired_state: str,
        status: Mapping[str, Any] | None,
        *,
        heartbeat: float | None,
        samples: Iterable[Point] = (),
    ) -> DaggerFacts:
        """Return the facts of a dagger from its desired state, its status row as a dict (None: never
        deployed), its samples and its controller's heartbeat."""
        st = status or {}
        return cls(
            desired_state=desired_state,
            actual_state=str(st.get("actual_state") or "created"),
            restarts=int(st.get("restarts") or 0),
            started_at=st.get("started_at"),
            running_version=st.get("running_version"),
            next_restart_at=st.get("next_restart_at"),
            last_error=st.get("last_error"),
            progress=dict(st.get("progress") or {}),
            lag=st.get("lag"),
            lag_at=st.get("lag_at"),
            lag_error=st.get("lag_error"),
            lag_error_at=st.get("lag_error_at"),
            lag_unknown=st.get("lag_unknown"),
            samples=tuple(sorted(samples, key=lambda p: p.at)),
            controller_heartbeat=heartbeat,
        )


@dataclass(frozen=True)
class Figure:
    """A measured value, when it was measured, and its age at ``now``; ``fresh`` when younger than
    ``figure_fresh_s``."""

    value: float
    at: float
    age_s: float
    fresh: bool


@dataclass(frozen=True)
class DaggerHealth:
    """A dagger's state, why, and its figures (None when it shows none)."""

    state: str
    reason: str
    next_retry_at: float | None = None
    restarts: int = 0
    rows_per_s: Figure | None = None
    lag: Figure | None = None
    batch_ms: Figure | None = None
    watermark_age_s: float | None = None
    sink_errors: int = 0
    late_rows_dropped: int = 0
    #: The late rows are an upper bound: a fused member's stream's, before its WHERE (job.query.late).
    late_rows_upper_bound: bool = False
    #: Why its lag is unknown though its brokers answered (their end offsets are behind its position).
    lag_unknown: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dataclasses.asdict(self)


def _age(now: float, then: float) -> float:
    return round(max(now - then, 0.0), 1)


def _figure(value: float | None, at: float | None, now: float, s: HealthSettings) -> Figure | None:
    if value is None or at is None:
        return None
    return Figure(value=float(value), at=float(at), age_s=_age(now, at), fresh=now - at <= s.figure_fresh_s)


def last_rows_at(samples: Sequence[Point]) -> float | None:
    """Return when the newest sample that read rows (its ``input_rows`` above the sample before) was taken,
    or None when no two samples show rows read."""
    found = None
    for before, after in zip(samples, samples[1:], strict=False):
        if after.input_rows > before.input_rows:
            found = after.at
    return found


def lag_readings(
    samples: Sequence[Point], lag: int | None, lag_at: float | None, input_rows: int
) -> list[Reading]:
    """Return the lag readings of the samples, ``(at, lag, rows read in all)``; the newest lag read (``lag``
    at ``lag_at``, ``input_rows`` read then) only when no sample carries a lag (the controller records each
    read as a sample)."""
    out: list[Reading] = [(p.at, p.lag, p.input_rows) for p in samples if p.lag is not None]
    if not out and lag is not None and lag_at is not None:
        out.append((lag_at, lag, input_rows))
    return out


def ran_and_wrote(started_at: float, progress: Mapping[str, Any]) -> bool:
    """Return True when the run that started at ``started_at`` reported a batch that read rows, and its sinks
    wrote rows (a run whose progress names no sink: that read rows)."""
    batch_at = float(progress.get("batch_at") or progress.get("updated_at") or 0.0)
    if batch_at < started_at or int(progress.get("input_rows") or 0) <= 0:
        return False
    sinks = [sink for sink in (progress.get("sinks") or {}).values() if isinstance(sink, Mapping)]
    return not sinks or any(int(sink.get("rows_written") or 0) > 0 for sink in sinks)


def streak_ended(
    started_at: float | None, progress: Mapping[str, Any], now: float, s: HealthSettings
) -> bool:
    """Return True when the run that started at ``started_at`` has read rows and written since its start
    (:func:`ran_and_wrote`) and run for ``recovered_after_s``: its crashes in a row are over (the rule that
    ends crash-looping; the controller then records 0 restarts, and the next crash starts a new streak). A
    run that only reported (its brokers do not answer, its sink refuses) does not end it."""
    if not started_at:
        return False
    return ran_and_wrote(started_at, progress) and now - up_since(started_at, progress) >= s.recovered_after_s


def up_since(started_at: float, progress: Mapping[str, Any]) -> float:
    """Return when the run that started at ``started_at`` came up: its query's start (status.json's
    ``query_started_at``; a shared host that was gone starts it long after the run was assigned), else
    ``started_at``."""
    query = float(progress.get("query_started_at") or 0.0)
    return query if query >= started_at else started_at


def came_up_at(started_at: float, progress: Mapping[str, Any]) -> float | None:
    """Return when the run that started at ``started_at`` came up: its query's start (status.json's
    ``query_started_at``), or ``started_at`` for a run whose reports do not record it; None while it has not:
    no report from this run (a relaunch into a shared host that is gone), or its query not started yet."""
    if float(progress.get("updated_at") or 0.0) < started_at:
        return None
    if "query_started_at" not in progress:
        return started_at
    query = float(progress.get("query_started_at") or 0.0)
    return query if query >= started_at else None


def rate_window(samples: Sequence[Counted], progress: Mapping[str, Any], s: HealthSettings) -> float:
    """Return the wall time rows/s is taken over: ``rate_window_s``, or three micro-batches when longer (the
    one window of every surface: the figure and the chart)."""
    batch_s = float(progress.get("batch_duration_ms") or 0) / 1000.0
    return max(s.rate_window_s, 3 * batch_interval(samples, batch_s))


def rows_figure(f: DaggerFacts, now: float, s: HealthSettings, current: bool = True) -> Figure | None:
    """Return rows/s: the rows read over the wall time of the newest ``rate_window_s`` of samples (three
    micro-batches when longer), as of the newest sample; not ``current`` (its brokers do not answer): as of
    the last batch, and not fresh (None when no two samples up to it are kept). None with fewer than two
    samples."""
    rate = rows_rate(f.samples, rate_window(f.samples, f.progress, s))
    if rate is None:
        return None
    if current:
        return _figure(round(rate.rows_per_s, 1), rate.until, now, s)
    # as of the last batch: the rate of the samples up to it (one value, one time), never later idle ones
    at = float(f.progress.get("batch_at") or last_rows_at(f.samples) or rate.until)
    upto = [p for p in f.samples if p.at <= at]
    then = rows_rate(upto, rate_window(upto, f.progress, s)) if len(upto) >= 2 else None
    if then is None:  # the samples up to the last batch are gone: unknown, never a false 0
        return None
    return Figure(value=round(then.rows_per_s, 1), at=at, age_s=_age(now, at), fresh=False)


def batch_in_flight(progress: Mapping[str, Any], started: float) -> tuple[int, float] | None:
    """Return (id, when it started) of the micro-batch the run that started at ``started`` is running
    (status.json's ``running_batch``, written when the batch starts and cleared when it is reported), or
    None: no batch runs, or the one recorded is a run's before (a process killed during its batch)."""
    batch = progress.get("running_batch")
    if not isinstance(batch, Mapping) or batch.get("since") is None:
        return None
    since = float(batch["since"])
    return (int(batch.get("id", -1)), since) if since >= started else None


#: ``state`` of the progress its controller records when a dagger comes to rest (its run stopped or failed
#: for good): a start after it is a start, not a roll-out.
AT_REST = ("stopped", "failed")


def starting_words(f: DaggerFacts, up_s: float) -> str:
    """Return what a run that has not reported yet is, ``up_s`` after its start: ``rolling out version 3: its
    new run started 4 s ago, no report yet`` (a run before it reported and ran until this one replaced it: a
    new version or a restart), ``restarting after 1 crash: …``, or ``starting version 1: started 4 s ago, no
    report yet`` (a first start, or a start after a stop: :data:`AT_REST`)."""
    version = f" version {f.running_version}" if f.running_version is not None else ""
    if f.restarts > 0:
        crashes = f"{f.restarts} crash{'es' if f.restarts != 1 else ''}"
        return f"restarting{version} after {crashes}: its new run started {up_s:.0f} s ago, no report yet"
    replaced = f.progress.get("state") not in AT_REST  # the run before it ran until this one replaced it
    if float(f.progress.get("updated_at") or 0.0) > 0.0 and replaced:  # a run before this one reported
        return f"rolling out{version or ' a new run'}: its new run started {up_s:.0f} s ago, no report yet"
    return f"starting{version}: started {up_s:.0f} s ago, no report yet"


def _batch_words(batch_id: int, ran_s: float, first: bool, carried: bool) -> str:
    """Return ``batch 110 running for 68 s`` (``first batch after restart …`` for a run's first)."""
    what = f"batch {batch_id}" if not first else "first batch after restart" if carried else "first batch"
    return f"{what} running for {ran_s:.0f} s"


def between_batches(waiting: int | None, rows_per_s: Figure | None, since_batch_s: float) -> str:
    """Return what a dagger that reported since its last batch, with none in flight, is doing, in words its
    figures do not contradict: ``reading: 7,540 records wait; last batch 3 s ago`` while its lag shows records
    waiting (however few: only a lag of 0 is nothing new), ``caught up: nothing new to read; last batch 3 s
    ago`` when none wait but its rows/s shows rows read in its window (an average that decays after a burst),
    else ``idle: nothing new to read`` (its lag 0 or not read yet, and its rows/s 0 or none)."""
    last = f"last batch {max(since_batch_s, 0.0):.0f} s ago"
    if waiting:
        return f"reading: {waiting:,} record{' waits' if waiting == 1 else 's wait'}; {last}"
    if rows_per_s is not None and rows_per_s.value > 0:
        return f"caught up: nothing new to read; {last}"
    return "idle: nothing new to read"


def sink_retrying(progress: Mapping[str, Any], now: float) -> tuple[str, float] | None:
    """Return the reason and how long it has lasted when a sink retries a write (status.json's
    ``sinks.<name>.retrying``: attempt, of, next_at, since, error), else None."""
    for name, sink in (progress.get("sinks") or {}).items():
        retry = sink.get("retrying") if isinstance(sink, Mapping) else None
        if not isinstance(retry, Mapping):
            continue
        since = float(retry.get("since") or now)
        next_at = retry.get("next_at")
        when = f", next in {max(float(next_at) - now, 0):.0f} s" if next_at is not None else ""
        error = f": {retry['error']}" if retry.get("error") else ""
        return (
            f"sink retrying: {name}, attempt {retry.get('attempt', '?')}/{retry.get('of', '?')}{when}, "
            f"failing for {max(now - since, 0):.0f} s{error}"
        ), max(now - since, 0.0)
    return None


def event_watermark(watermark: Any) -> str | None:
    """Return a query's event-time watermark as Spark reported it (ISO 8601, ``Z``), or None when the query
    has none: Spark reports the epoch (``1970-01-01T00:00:00.000Z``) for a query without event time, and for
    one whose batches have seen no event time yet."""
    if not isinstance(watermark, str) or not watermark or watermark.startswith("1970-01-01"):
        return None
    return watermark


def watermark_age(watermark: Any, now: float) -> float | None:
    """Return how old a Spark watermark (ISO 8601, ``Z``) is at ``now``; None for none or the epoch."""
    watermark = event_watermark(watermark)
    if watermark is None:
        return None
    try:
        return _age(now, datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def _sink_errors(progress: Mapping[str, Any]) -> int:
    return sum(
        int((s or {}).get("failures") or 0)
        for s in (progress.get("sinks") or {}).values()
        if isinstance(s, dict)
    )


def controller_silent(heartbeat: float | None, now: float, s: HealthSettings) -> bool:
    """Return True when the controller has no heartbeat younger than ``controller_silent_s``."""
    return heartbeat is None or now - heartbeat > s.controller_silent_s


def brokers_unanswered(f: DaggerFacts, now: float) -> str:
    """Return ``; its brokers do not answer: end offsets unreadable for 35 s: …`` when its last lag read
    failed (a crash's own text may not name them: a frozen broker), else "". The outage counts from the
    first failed read in a row, as a stalled dagger's does."""
    if not f.lag_error:
        return ""
    since = float(f.lag_error_at or f.lag_at or now)
    return f"; its brokers do not answer: end offsets unreadable for {max(now - since, 0.0):.0f} s: {f.lag_error}"


def dagger_health(f: DaggerFacts, now: float, s: HealthSettings | None = None) -> DaggerHealth:
    """Return the state of the dagger described by ``f`` at ``now`` (see the module docstring)."""
    s = s or HealthSettings()
    actual, restarts = f.actual_state, f.restarts
    if actual == "deleted" or (actual in ("created", "stopped") and f.desired_state != "running"):
        return DaggerHealth(
            STOPPED, "stopped" if actual != "created" else "never deployed", restarts=restarts
        )
    if controller_silent(f.controller_heartbeat, now, s):
        why = (
            "no controller has reported"
            if f.controller_heartbeat is None
            else f"its controller is silent for {_age(now, f.controller_heartbeat):.0f} s"
        )
        return DaggerHealth(UNKNOWN, why, restarts=restarts)
    if actual == "failed":
        return DaggerHealth(
            FAILED,
            f"gave up after {restarts} crashes in a row: {f.last_error or 'no error'}",
            restarts=restarts,
        )
    if actual == "crashed":
        retry = f.next_restart_at
        when = f"restart {restarts} in {max((retry or now) - now, 0):.0f} s" if retry else "restart pending"
        return DaggerHealth(
            CRASH_LOOPING,
            f"crashed: {f.last_error or 'no error'}{brokers_unanswered(f, now)}; {when}",
            next_retry_at=retry,
            restarts=restarts,
        )
    if actual in ("created", "stopped", "pending"):  # deployed: its controller, alive, starts it next round
        return DaggerHealth(STARTING, "starting: waiting for its controller to start it", restarts=restarts)
    if actual == "stopping" and f.desired_state == "running":
        # a restart or a new version: the old run is still finishing; what it shows is what the dagger is
        old = _live(replace(f, actual_state="running"), now, s)
        return replace(old, reason=f"replacing its run: the old one is still stopping; {old.reason}")
    if actual == "stopping":
        return DaggerHealth(STOPPED, "stopping", restarts=restarts)
    return _live(f, now, s)


def _live(f: DaggerFacts, now: float, s: HealthSettings) -> DaggerHealth:
    """Return the state of a dagger whose process runs (``starting`` or ``running``)."""
    p = f.progress
    started = float(f.started_at or 0.0)
    up_s = now - started if f.started_at else None
    updated = float(p.get("updated_at") or 0.0)
    recovered = streak_ended(f.started_at, p, now, s)
    restarts = 0 if recovered else f.restarts
    if restarts >= s.crash_loop_restarts and up_s is not None and up_s < s.crash_window_s:
        came_up = came_up_at(
            started, p
        )  # "up" from its query's start, never from a relaunch into a dead host
        up = (
            f"up {now - came_up:.0f} s"
            if came_up is not None
            else f"relaunched {up_s:.0f} s ago, its query not started yet"
        )
        return DaggerHealth(
            CRASH_LOOPING,
            f"restarted {restarts} times in a row, {up}: {f.last_error or 'no error'}{brokers_unanswered(f, now)}",
            restarts=restarts,
        )
    lag_fresh = f.lag is not None and f.lag_at is not None and now - f.lag_at <= s.stall_after_s
    lag = int(f.lag) if lag_fresh and f.lag is not None else None
    held = p.get("held_up") if isinstance(p.get("held_up"), Mapping) else None
    held = held if held is not None and float(held.get("since") or 0.0) >= started else None
    # The evidence of a stall outlives a restart: it goes back to the oldest sample, not to this run's start.
    known_since = min([started, *(pt.at for pt in f.samples)]) if f.samples else started
    # an outage counts from the first failed read (from the last good one when that is not known)
    unreadable_s = now - float(f.lag_error_at or f.lag_at or known_since)
    batch_s = float(p.get("batch_duration_ms") or 0) / 1000.0
    # one batch when longer, but never the gap of a dagger that reads little (its batches come when data does):
    # at most half the time a dagger may stay silent
    silent_after = max(s.brokers_silent_after_s, min(batch_interval(f.samples, batch_s), s.stall_after_s / 2))
    carried = f.restarts > 0  # restarted after a crash (a deploy or a rollback starts afresh)
    if (updated < started or not updated) and carried:
        # no report from this run yet: the stall evidence of the runs before still stands
        last_batch = float(p.get("batch_at") or updated or known_since)
        if f.lag_error and min(now - last_batch, unreadable_s) > silent_after:
            return DaggerHealth(
                STALLED,
                f"its brokers do not answer: no batch for {now - last_batch:.0f} s (restarted {up_s or 0:.0f} s "
                f"ago, no report yet), end offsets unreadable for {unreadable_s:.0f} s: {f.lag_error}",
                restarts=restarts,
            )
        rows_before = last_rows_at(f.samples) or last_batch
        if lag and now - rows_before > s.stall_after_s:
            return DaggerHealth(
                STALLED,
                f"read no row for {now - rows_before:.0f} s while {lag:,} records wait (restarted "
                f"{up_s or 0:.0f} s ago, no report yet)",
                restarts=restarts,
            )
    if updated < started or not updated:
        if up_s is not None and up_s > s.start_timeout_s:
            return DaggerHealth(STALLED, f"no report {up_s:.0f} s after its start", restarts=restarts)
        return DaggerHealth(STARTING, starting_words(f, up_s or 0.0), restarts=restarts)
    if "batch_at" in p and not p.get("batch_at"):  # this run reported, but no batch yet: the last one before
        batch_at = float(last_rows_at(f.samples) or known_since) if carried else started
    else:
        batch_at = float(p.get("batch_at") or updated)
    # a report since the last batch: between batches (idle only when nothing waits, see between_batches)
    idle = updated - batch_at > 0.0
    brokers_silent = bool(f.lag_error) and min(now - batch_at, unreadable_s) > silent_after
    figures = DaggerHealth(  # the figures; each verdict below replaces the state and the reason
        RUNNING,
        "",
        rows_per_s=rows_figure(f, now, s, current=not brokers_silent and held is None),
        lag=None if f.lag_unknown else _figure(f.lag, f.lag_at, now, s),
        batch_ms=_figure(p.get("batch_duration_ms"), batch_at, now, s),
        watermark_age_s=watermark_age(p.get("watermark"), now),
        sink_errors=_sink_errors(p),
        late_rows_dropped=int(p.get("late_rows_dropped") or 0),
        late_rows_upper_bound=bool(p.get("late_before_filter")),
        restarts=restarts,
        lag_unknown=f.lag_unknown or None,
    )
    sink = sink_retrying(p, now)
    if held is not None:  # its query cannot start: no figure of it is now
        held_s = max(now - float(held["since"]), 0.0)
        return replace(
            figures,
            state=STALLED if held_s >= s.sink_stall_after_s else RUNNING,
            reason=f"held up for {held_s:.0f} s: {held.get('by')}",
        )
    silent_why = (
        f"its brokers do not answer: no batch for {now - batch_at:.0f} s, end offsets unreadable "
        f"for {unreadable_s:.0f} s: {f.lag_error}"
    )
    if sink is not None and sink[1] >= s.sink_stall_after_s:  # each fault named, both when two
        return replace(
            figures, state=STALLED, reason=f"{sink[0]}; {silent_why}" if brokers_silent else sink[0]
        )
    if brokers_silent:
        return replace(figures, state=STALLED, reason=silent_why)
    in_flight = batch_in_flight(p, started)
    if in_flight is not None and (p.get("running_batch") or {}).get("planning") and not lag:
        in_flight = None  # a first plan with nothing waiting is an idle query, not a batch
    flight = ""  # the batch in flight in words, when there is one
    if in_flight is not None:
        ran_s = now - in_flight[1]
        first = not p.get("batch_at") or float(p["batch_at"]) < started  # this run reported none
        flight = _batch_words(in_flight[0], ran_s, first, carried)
        if ran_s > s.batch_stall_after_s:
            waiting = f", while {lag:,} records wait" if lag else ""
            return replace(
                figures, state=STALLED, reason=f"{flight}, over {s.batch_stall_after_s:.0f} s{waiting}"
            )
        # a batch that ran one micro-batch or more is named (shorter ones: "reading")
        flight = (f"{flight} ({lag:,} records wait)" if lag else flight) if ran_s >= silent_after else ""
    elif now - updated > s.stall_after_s:
        return replace(figures, state=STALLED, reason=f"no report for {now - updated:.0f} s")
    # a deploy or a rollback starts afresh: it has stall_after_s from its start to read a row
    since_batch = max(batch_at, started) if not carried else batch_at
    rows_at = max(last_rows_at(f.samples) or 0.0, since_batch) or known_since
    if lag and now - rows_at > s.stall_after_s:
        if in_flight is not None:  # it reads them: its batch has not been reported yet
            return replace(figures, state=RUNNING, reason=flight or "reading")
        return replace(
            figures, state=STALLED, reason=f"read no row for {now - rows_at:.0f} s while {lag:,} records wait"
        )
    if f.lag_unknown:  # the brokers answered, with end offsets behind its position: no lag, and no trend
        return replace(figures, state=RUNNING, reason=f"lag unknown: {f.lag_unknown}")
    readings = lag_readings(f.samples, lag, f.lag_at, int(p.get("input_rows") or 0))
    trend = lag_trend(
        readings, now, s.lag_window_s, max_window_s=s.lag_window_max_s, max_gap_s=s.controller_silent_s
    )
    # the one lag a reason gives as "now" is the one its view shows beside it (none: no lag read now)
    shown = None if figures.lag is None else int(figures.lag.value)
    if trend is not None and trend.growing(s.lag_growth_min):
        return replace(figures, state=LAGGING, reason=trend.reason(shown))
    # too few batches for a trend (slow ones: a fused group's): judged by its newest batch, as any dagger
    slow = (
        newest_trough(readings, now, max(s.lag_window_s, s.lag_window_max_s), s.controller_silent_s)
        if trend is None
        else None
    )
    if slow is not None and lag is not None and lag < s.catching_up_lag:
        slow = None  # its lag read now is lower: no older reading makes it behind
    last = trend.last if trend is not None else slow.lag if slow is not None else None
    if last is not None and last >= s.catching_up_lag:
        # judged from the lag's own troughs, the newest first: never from a floor over older samples
        behind = (
            f"{shown:,} records behind"
            if shown is not None
            else f"lag not read now, {last:,} records behind after its newest batch"
        )
        if trend is not None and trend.falling():
            why = f"{behind}, not growing: {trend.not_growing()}"
        elif trend is not None:
            why = f"{behind}; not shown to grow or to fall yet, over {trend.batches} batches in {trend.span_s:.0f} s"
        elif slow is not None and slow.falling():  # too few for a trend, but they show it come down
            why = f"{behind}, not growing: {slow.not_growing()}"
        else:
            n, span = (slow.batches, slow.span_s) if slow is not None else (0, 0.0)
            seen = f"over {n} batches in {span:.0f} s" if n > 1 else "one batch seen"
            # enough batches, too short a span: a trend spans most of the lag window
            takes = f"takes {MIN_BATCHES}" if n < MIN_BATCHES else f"spans {s.lag_window_s * MIN_SPAN:.0f} s"
            why = f"{behind}; not shown to grow or to fall yet, {seen} (a trend {takes})"
        return replace(figures, state=CATCHING_UP, reason=f"{why}; {flight}" if flight else why)
    if sink is not None:
        return replace(figures, state=RUNNING, reason=sink[0])
    if f.lag_error:  # not idle: nobody knows whether anything waits
        return replace(
            figures,
            state=RUNNING,
            reason=f"end offsets unreadable for {unreadable_s:.0f} s, last batch {now - batch_at:.0f} s ago "
            f"(stalled when both pass {silent_after:.0f} s): {f.lag_error}",
        )
    if flight:
        return replace(figures, state=RUNNING, reason=flight)
    if ("batch_at" in p and not p.get("batch_at")) or (not carried and batch_at < started):
        return replace(figures, state=RUNNING, reason=f"started {up_s or 0:.0f} s ago: no batch yet")
    if not idle or in_flight is not None:  # a report at a batch (or at a batch's start) is not an idle one
        return replace(figures, state=RUNNING, reason="reading")
    # the records that wait are the lag shown beside the reason (the one read now, when it is fresh)
    unread = shown if shown is not None else lag
    return replace(figures, state=RUNNING, reason=between_batches(unread, figures.rows_per_s, now - batch_at))


#: A part's states: ``ok``; ``slow``: its last probe went unanswered but the one before answered (a busy
#: machine, not yet a dead part); ``down``: two unanswered probes in a row, or a refused connection;
#: ``stale``: its probe is older than ``probe_stale_s``; ``unknown``: never probed.
PART_STATES = ("ok", "slow", "down", "stale", "unknown")
PART_LEVEL = {"ok": HEALTHY, "slow": HEALTHY, "down": UNHEALTHY, "stale": DEGRADED, "unknown": DEGRADED}


@dataclass(frozen=True)
class ClusterHealth:
    """A cluster's state (the worst of its parts), why, each part's state (:data:`PART_STATES`; the
    controller's ``ok`` or ``silent``), the age of the probe they come from, and its daggers by state."""

    state: str
    reasons: tuple[str, ...]
    parts: dict[str, str]
    daggers: dict[str, int]
    controller_age_s: float | None
    probe_age_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {**dataclasses.asdict(self), "reasons": list(self.reasons)}


def cluster_health(
    heartbeat: float | None,
    probe: Mapping[str, Any] | None,
    probe_at: float | None,
    dagger_states: Iterable[str],
    now: float,
    s: HealthSettings | None = None,
) -> ClusterHealth:
    """Return the health of a cluster from its controller's heartbeat, its last probe (``{spark, kafka,
    influx}``, each with ``ok`` and ``error``, as job.control.health.probe_cluster returns) taken at
    ``probe_at``, and its daggers' states."""
    s = s or HealthSettings()
    levels: list[str] = []
    reasons: list[str] = []
    parts: dict[str, str] = {}
    if controller_silent(heartbeat, now, s):
        parts["controller"] = "silent"
        levels.append(UNHEALTHY)
        reasons.append(
            "no controller has reported"
            if heartbeat is None
            else f"controller silent for {_age(now, heartbeat):.0f} s"
        )
    else:
        parts["controller"] = "ok"
    probe_age = _age(now, probe_at) if probe is not None and probe_at is not None else None
    for name, label in (("spark", "master"), ("kafka", "brokers"), ("influx", "InfluxDB")):
        part = (probe or {}).get(name)
        if not isinstance(part, Mapping) or probe_age is None:
            parts[name] = "unknown"
            reasons.append(f"{label} never probed")
        elif probe_age > s.probe_stale_s:
            parts[name] = "stale"
            reasons.append(f"{label} last probed {probe_age:.0f} s ago")
        elif part.get("ok"):
            parts[name] = "ok"
        elif part.get("refused") or int(part.get("failures") or 1) >= 2:
            parts[name] = "down"
            why = (
                "refused the connection"
                if part.get("refused")
                else f"{int(part.get('failures') or 1)} probes in a row unanswered"
            )
            reasons.append(f"{label} down ({why}): {part.get('error') or 'no answer'}")
        else:
            parts[name] = "slow"
        levels.append(PART_LEVEL[parts[name]])
    counts: dict[str, int] = {}
    for state in dagger_states:
        counts[state] = counts.get(state, 0) + 1
    for state in DAGGER_STATES:
        if counts.get(state) and CLUSTER_LEVEL_OF[state] != HEALTHY:
            levels.append(CLUSTER_LEVEL_OF[state])
            n = counts[state]
            reasons.append(f"{n} dagger{'s' if n != 1 else ''} {state}")
    state = max(levels, key=CLUSTER_STATES.index, default=HEALTHY)
    return ClusterHealth(
        state=state,
        reasons=tuple(reasons),
        parts=parts,
        daggers=counts,
        controller_age_s=_age(now, heartbeat) if heartbeat is not None else None,
        probe_age_s=probe_age,
    )


def is_live(state: str) -> bool:
    """Return True for the states of a dagger whose process runs and reports (running to stalled)."""
    return state in _LIVE
