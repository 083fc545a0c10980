"""Platform alerts: the health of running daggers, judged without any rule.

The engine asks a :class:`DaggerHealthSource` for each dagger's :class:`DaggerHealth`. Today
:class:`CheckpointHealthSource` reads what a dagger leaves in its checkpoint folder
(``status.json`` written by ``job.query.runner`` after every micro-batch, and Spark's offset log) and asks
the broker for the topics' end offsets to compute consumer lag. The control plane can plug in a
registry-backed source later: anything with a ``daggers()`` method returning DaggerHealth works.

Checks (each one alert per dagger, label ``dagger``):

* ``platform-dagger-down``: CRIT when the dagger reports ``failed``, or has reported no progress for
  ``down_after`` (a dagger that was stopped on purpose, state ``stopped``, is not down);
* ``platform-restart-loop``: CRIT when it restarted ``restarts`` times within ``within`` (or, from a source
  that counts them itself, ``recent_restarts`` times, e.g. the control plane's crashes in a row);
* ``platform-consumer-lag``: WARN/CRIT when the records behind the end of its topics exceed the thresholds;
* ``platform-bad-records``: WARN/CRIT when the share of records that did not decode, since the last
  check, exceeds the thresholds (judged once at least ``min_records`` arrived);
* ``platform-sink-failures``: CRIT when a sink write failed since the last check, WARN when writes
  had to be retried.

From a source that judges daggers with the control plane's health model (:class:`RegistryHealthSource`,
``platform.registry``), four more, from the model's states (job.control.health_model):

* ``platform-crash-looping``: CRIT while the dagger is crash-looping;
* ``platform-stalled``: CRIT while it is stalled;
* ``platform-lagging``: WARN while its lag grows;
* ``platform-controller-silent``: CRIT while the controller of a cluster is silent (label ``cluster``,
  one alert per cluster).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from alerting.config import PlatformSpec
from alerting.durations import format_duration
from alerting.state import Level
from alerting.store import HealthSample
from job.common.words import counted

if TYPE_CHECKING:
    from job.control import ControlPlane

log = logging.getLogger("daggers.alerts")

DaggerState = Literal["running", "stopped", "failed", "unknown"]
#: A worker's status.json state as a DaggerState (any other: unknown).
_WORKER_STATES: dict[str, DaggerState] = {"running": "running", "stopped": "stopped", "failed": "failed"}
DOWN, RESTARTS, LAG, BAD, SINKS = (
    "platform-dagger-down",
    "platform-restart-loop",
    "platform-consumer-lag",
    "platform-bad-records",
    "platform-sink-failures",
)
CRASH_LOOPING, STALLED, LAGGING, SILENT = (
    "platform-crash-looping",
    "platform-stalled",
    "platform-lagging",
    "platform-controller-silent",
)
PLATFORM_CHECKS = (DOWN, RESTARTS, LAG, BAD, SINKS, CRASH_LOOPING, STALLED, LAGGING, SILENT)


@dataclass(frozen=True)
class DaggerHealth:
    """What is known about one dagger now. Counters are totals since the dagger's checkpoint began."""

    name: str
    team: str | None = None
    state: DaggerState = "unknown"
    last_progress_at: float | None = None
    restart_times: tuple[float, ...] = ()
    recent_restarts: int | None = None  # a source that counts restarts itself (e.g. crashes in a row)
    input_rows: int = 0
    bad_records: int = 0
    sink_failures: int = 0
    sink_retries: int = 0
    sink_last_error: str | None = None
    consumer_lag: int | None = None
    error: str | None = None
    # from the control plane's health model (RegistryHealthSource): its state and why, the cluster, and
    # whether that cluster's controller is silent
    health_state: str | None = None
    health_reason: str = ""
    cluster: str | None = None
    controller_silent: bool = False


@runtime_checkable
class DaggerHealthSource(Protocol):
    """Anything that can list the daggers to watch and their health."""

    def daggers(self) -> list[DaggerHealth]:
        """Return the health of every watched dagger (a dagger that cannot be read has ``error`` set)."""
        ...


# ---- reading a checkpoint -----------------------------------------------------------------------


def read_status(checkpoint: Path) -> dict[str, Any] | None:
    """Return ``<checkpoint>/status.json`` as a dict, or None when it does not exist or does not parse."""
    try:
        data = json.loads((checkpoint / "status.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def committed_offsets(checkpoint: Path) -> dict[str, dict[str, int]] | None:
    """Return the source offsets of the newest micro-batch Spark committed (``{topic: {partition: next}}``),
    merged over the query's sources; None when nothing was committed yet."""
    spark = checkpoint / "spark"
    try:
        commits = sorted(int(p.name) for p in (spark / "commits").iterdir() if p.name.isdigit())
    except OSError:
        return None
    if not commits:
        return None
    try:
        lines = (spark / "offsets" / str(commits[-1])).read_text().splitlines()
    except OSError:
        return None
    merged: dict[str, dict[str, int]] = {}
    for line in lines[2:]:  # "v1", the batch metadata, then one line per source
        try:
            offsets = json.loads(line)
        except ValueError:
            continue
        if isinstance(offsets, dict):
            for topic, parts in offsets.items():
                if isinstance(parts, dict):
                    merged.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return merged


def kafka_end_offsets(
    bootstrap: str, topics: list[str], consumer_config: dict[str, str] | None = None, timeout: float = 10.0
) -> dict[str, dict[str, int]]:
    """Return the true end offset of every partition of ``topics`` (see job.sources.offsets.end_offsets).

    Raises:
        job.errors.SourceError: the broker cannot be reached or a topic does not exist.
    """
    from job.sources.offsets import driver_consumer, end_offsets, partitions_of

    consumer = driver_consumer(bootstrap, consumer_config)
    try:
        return end_offsets(consumer, partitions_of(consumer, topics, bootstrap, timeout), timeout)
    finally:
        consumer.close()


def lag_of(committed: dict[str, dict[str, int]] | None, ends: dict[str, dict[str, int]]) -> int:
    """Return the records between the committed offsets and the ends (a partition not read yet counts whole
    from offset 0, i.e. its end). Raises LagUnknown when an end is below the committed offset (the broker lost
    records or answered wrongly: no lag, never 0)."""
    from job.control.lag import LagUnknown
    from job.query.offset_log import behind_reason, ends_behind

    if behind := ends_behind(committed or {}, ends):
        raise LagUnknown(behind_reason(behind))
    total = 0
    for topic, parts in ends.items():
        for part, end in parts.items():
            done = (committed or {}).get(topic, {}).get(part, 0)
            total += max(0, end - done)
    return total


@dataclass
class WatchedDagger:
    """A dagger the CheckpointHealthSource reads: its name, team, checkpoint and sources."""

    name: str
    checkpoint: Path
    team: str | None = None
    sources: list[tuple[str, list[str], dict[str, str]]] = field(
        default_factory=list
    )  # (bootstrap, topics, config)


class CheckpointHealthSource:
    """Reads each watched dagger's checkpoint folder; computes consumer lag with the broker's end offsets."""

    def __init__(
        self,
        daggers: list[WatchedDagger],
        *,
        lag: bool = True,
        end_offsets: Callable[..., dict[str, dict[str, int]]] = kafka_end_offsets,
    ) -> None:
        self.watched = daggers
        self.lag = lag
        self._end_offsets = end_offsets

    @classmethod
    def from_platform(
        cls, spec: PlatformSpec, resolve: Callable[[str], Path], state_dir: Path
    ) -> CheckpointHealthSource:
        """Return a source for the daggers of a platform spec (spec files resolved with ``resolve``).

        Raises:
            job.errors.SpecError: a dagger spec file is missing or invalid.
        """
        from job.spec import load_spec

        watched = []
        for entry in spec.dagger_entries():
            dagger = load_spec(resolve(entry.spec))
            watched.append(
                WatchedDagger(
                    name=dagger.name,
                    team=entry.team or spec.team,
                    checkpoint=dagger.resolved_checkpoint(state_dir),
                    sources=[
                        (s.bootstrap_servers, list(s.topics), dict(s.consumer_config)) for s in dagger.streams
                    ],
                )
            )
        return cls(watched)

    def daggers(self) -> list[DaggerHealth]:
        return [self._health(w) for w in self.watched]

    def _health(self, w: WatchedDagger) -> DaggerHealth:
        status = read_status(w.checkpoint)
        if status is None:
            return DaggerHealth(
                name=w.name,
                team=w.team,
                state="unknown",
                error=f"no status.json in {w.checkpoint} (never ran?)",
            )
        sinks = status.get("sinks") or {}
        failures = sum(int((s or {}).get("failures") or 0) for s in sinks.values())
        retries = sum(int((s or {}).get("retries") or 0) for s in sinks.values())
        last_error = next(
            (str(s.get("last_error")) for s in sinks.values() if s and s.get("last_error")), None
        )
        state = str(status.get("state") or "running")
        restarts = tuple(float(t) for t in status.get("restart_times") or [] if isinstance(t, int | float))
        lag: int | None = None
        error = None
        if self.lag and w.sources:
            try:
                committed = committed_offsets(w.checkpoint)
                lag = 0
                for bootstrap, topics, config in w.sources:
                    lag += lag_of(committed, self._end_offsets(bootstrap, topics, config))
            except Exception as exc:  # the broker may be down: report it, keep the other checks
                error = f"consumer lag unknown: {getattr(exc, 'message', None) or type(exc).__name__}"
                lag = None
        return DaggerHealth(
            name=w.name,
            team=w.team,
            state=_WORKER_STATES.get(state, "unknown"),
            last_progress_at=float(status["updated_at"]) if status.get("updated_at") else None,
            restart_times=restarts,
            input_rows=int(status.get("input_rows") or 0),
            bad_records=int(status.get("bad_records") or 0),
            sink_failures=failures,
            sink_retries=retries,
            sink_last_error=last_error,
            consumer_lag=lag,
            error=error,
        )


class RegistryHealthSource:
    """Every live dagger of a control-plane registry the user may see, judged by the health model."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane  # the embedded plane: it judges health by its own settings

    @classmethod
    def from_url(cls, url: str, user: str) -> RegistryHealthSource:
        """Return a source over the registry at ``url`` as ``user``. Raises RegistryError."""
        from job.control import ControlPlane, Registry

        return cls(ControlPlane(Registry(url), user))

    def daggers(self) -> list[DaggerHealth]:
        from job.control.health_model import FAILED, STOPPED, UNKNOWN, controller_silent

        plane = self.plane
        silent = {
            c.name: controller_silent(c.controller_heartbeat, plane.clock(), plane.health_settings)
            for c in plane.clusters()
        }
        out = []
        for d in plane.daggers():
            state = d.state
            legacy: DaggerState = (
                "failed"
                if state == FAILED
                else "stopped"
                if state == STOPPED
                else "unknown"
                if state == UNKNOWN
                else "running"
            )
            sinks = (d.progress.get("sinks") or {}).values()
            out.append(
                DaggerHealth(
                    name=d.name,
                    team=d.team,
                    state=legacy,
                    last_progress_at=d.progress.get("updated_at"),
                    recent_restarts=d.restarts,
                    input_rows=int(d.progress.get("input_rows") or 0),
                    bad_records=int(d.progress.get("bad_records") or 0),
                    sink_failures=sum(int((x or {}).get("failures") or 0) for x in sinks),
                    sink_retries=sum(int((x or {}).get("retries") or 0) for x in sinks),
                    consumer_lag=d.lag if d.health.get("lag") else None,
                    error=d.last_error if state == FAILED else None,
                    health_state=state,
                    health_reason=str(d.health.get("reason") or ""),
                    cluster=d.cluster,
                    controller_silent=silent.get(d.cluster, False),
                )
            )
        return out


# ---- judging health -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One platform check's result for one dagger."""

    check: str
    dagger: str
    team: str
    level: Level
    value: float | None
    condition: str
    message: str
    group: dict[str, str] | None = None  # the alert's group labels (default: {"dagger": dagger})


def sample_of(h: DaggerHealth, at: float) -> HealthSample:
    """Return the counters of ``h`` to keep until the next check."""
    return HealthSample(
        h.name,
        at,
        {
            "input_rows": h.input_rows,
            "bad_records": h.bad_records,
            "sink_failures": h.sink_failures,
            "sink_retries": h.sink_retries,
        },
    )


def _above(value: float, warn: float | None, crit: float | None) -> tuple[Level, str]:
    if crit is not None and value > crit:
        return Level.CRIT, f"above {crit:g}"
    if warn is not None and value > warn:
        return Level.WARN, f"above {warn:g}"
    return Level.OK, "ok"


def judge(h: DaggerHealth, previous: HealthSample | None, spec: PlatformSpec, at: float) -> list[Finding]:
    """Return one Finding per enabled check for dagger ``h`` at time ``at``.

    ``previous`` is the sample stored at the last check (rates and sink failures are judged on what
    changed since; without one, on the totals). A check that cannot be judged (no data) is left out,
    so its alert keeps its level.
    """
    team = h.team or spec.team
    out: list[Finding] = []

    def add(check: str, level: Level, value: float | None, condition: str, message: str) -> None:
        out.append(Finding(check, h.name, team, level, value, condition, message))

    # down
    if h.state == "failed":
        add(
            DOWN,
            Level.CRIT,
            None,
            "reports failed",
            f"dagger {h.name} has failed" + (f": {h.error}" if h.error else ""),
        )
    elif h.state == "stopped":
        add(DOWN, Level.OK, None, "stopped on purpose", f"dagger {h.name} was stopped")
    elif h.last_progress_at is not None:
        silent = at - h.last_progress_at
        down = silent > spec.down_after
        add(
            DOWN,
            Level.CRIT if down else Level.OK,
            silent,
            f"no progress for {format_duration(spec.down_after)}",
            f"dagger {h.name} reported no progress for {format_duration(silent)}"
            if down
            else f"dagger {h.name} reported progress {format_duration(max(silent, 0))} ago",
        )
    elif h.error and "status.json" in h.error:
        add(DOWN, Level.CRIT, None, "no status", f"dagger {h.name}: {h.error}")
    # restart loop
    if spec.restart_loop is not None:
        window = format_duration(spec.restart_loop.within)
        if h.recent_restarts is not None:
            count, span = h.recent_restarts, "in a row"
        else:
            count, span = (
                len([t for t in h.restart_times if at - t <= spec.restart_loop.within]),
                f"in {window}",
            )
        looping = count >= spec.restart_loop.restarts
        add(
            RESTARTS,
            Level.CRIT if looping else Level.OK,
            float(count),
            f"{counted(spec.restart_loop.restarts, 'restart')} within {window}",
            f"dagger {h.name} restarted {counted(count, 'time')} {span}",
        )
    # consumer lag
    if spec.consumer_lag is not None and h.consumer_lag is not None:
        level, cond = _above(float(h.consumer_lag), spec.consumer_lag.warn, spec.consumer_lag.crit)
        add(
            LAG,
            level,
            float(h.consumer_lag),
            cond,
            f"dagger {h.name} is {h.consumer_lag} records behind its topics",
        )
    # bad records
    if spec.bad_record_rate is not None:
        base = previous.values if previous is not None else {}
        bad = h.bad_records - int(base.get("bad_records", 0))
        rows = h.input_rows - int(base.get("input_rows", 0))
        if bad < 0 or rows < 0:  # the checkpoint was reset: judge the totals
            bad, rows = h.bad_records, h.input_rows
        if bad + rows >= spec.bad_record_rate.min_records:
            rate = bad / (bad + rows)
            level, cond = _above(rate, spec.bad_record_rate.warn, spec.bad_record_rate.crit)
            add(
                BAD,
                level,
                rate,
                cond,
                f"dagger {h.name}: {bad} of {counted(bad + rows, 'record')} did not decode ({rate:.2%})",
            )
    # sink failures
    if spec.sink_failures:
        base = previous.values if previous is not None else {}
        failed = h.sink_failures - int(base.get("sink_failures", 0))
        retried = h.sink_retries - int(base.get("sink_retries", 0))
        failed, retried = max(failed, 0), max(retried, 0)
        level = Level.CRIT if failed else Level.WARN if retried else Level.OK
        detail = f": {h.sink_last_error}" if h.sink_last_error and level > Level.OK else ""
        add(
            SINKS,
            level,
            float(failed),
            "a sink write failed" if failed else "sink writes retried" if retried else "ok",
            f"dagger {h.name}: {failed} sink writes failed and {retried} were retried since the last check{detail}",
        )
    if h.health_state is not None:
        out.extend(_model_findings(h, team))
    return out


def _model_findings(h: DaggerHealth, team: str) -> list[Finding]:
    """Return the findings of the health model's states for ``h`` (see the module docstring)."""
    from job.control.health_model import CRASH_LOOPING as LOOP
    from job.control.health_model import LAGGING as LAGS
    from job.control.health_model import STALLED as STALL

    out = []
    for check, state, level in (
        (CRASH_LOOPING, LOOP, Level.CRIT),
        (STALLED, STALL, Level.CRIT),
        (LAGGING, LAGS, Level.WARN),
    ):
        on = h.health_state == state
        out.append(
            Finding(
                check,
                h.name,
                team,
                level if on else Level.OK,
                None,
                f"dagger is {state}",
                f"dagger {h.name} is {state}: {h.health_reason}"
                if on
                else f"dagger {h.name} is {h.health_state}",
            )
        )
    if h.cluster is not None:
        out.append(
            Finding(
                SILENT,
                h.name,
                team,
                Level.CRIT if h.controller_silent else Level.OK,
                None,
                "controller silent",
                f"the controller of cluster {h.cluster} is silent"
                if h.controller_silent
                else f"the controller of cluster {h.cluster} reports",
                group={"cluster": h.cluster},
            )
        )
    return out
