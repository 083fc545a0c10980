"""The controller of one cluster: make what runs match what the registry asks for.

``daggers controller --cluster NAME`` runs this loop on the cluster's gateway machine. Every round it

* starts each ``isolation: dedicated`` dagger as its own process and Spark application
  (``python -m job.control.launch <spec> --master <cluster master>``), and places each
  ``isolation: shared`` one (the default) as a streaming query into a shared application host of the
  cluster (see :mod:`job.control.hosts` and :mod:`job.shared.host`: a host is started when one is
  needed, restarted when it dies, and each dagger in it is started, stopped and replaced alone), from
  the version the registry names, on the checkpoint of that version's epoch (so a compatible edit
  resumes where the last one ended);
* stops a dagger gracefully (SIGTERM: the runner finishes its query and exits; SIGKILL after
  ``stop_timeout_s``), and rolls a running one over to a new version or restart generation;
* notices a crash, records its exit code and last error (from the failure record the dagger wrote, else
  from its log), and restarts it after an exponential back-off, at most ``max_restarts`` times in a row
  before giving up (``failed``);
* hands daggers over when they move to another cluster (see :mod:`job.control.handoff`): stops the
  ones leaving this cluster, starts arriving ones only once the old cluster has stopped them, and
  takes over the running daggers of a cluster that names this one as its failover when that
  cluster's controller heartbeat has been stale for ``failover_after_s``;
* records the progress the dagger's StreamingQueryListener writes to ``<checkpoint>/status.json``
  (rates, batch duration, late rows, bad records), its consumer lag, a sample for sparklines, the
  controller's heartbeat and the cluster's health.

Daggers are independent of the controller: stopping the controller leaves them running, and the
next controller adopts them again (by PID and process start time). Spec files are written with
``${VAR}`` references unresolved and mode 0600; the cluster's ``DAGGERS_BOOTSTRAP`` and
``DAGGERS_INFLUX`` are set in each dagger's environment.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from job.common.exits import how_it_ended
from job.control import handoff, specs, udf_carry
from job.control.agent import SAMPLE_FIELDS, ClusterAgent
from job.control.errors import ConflictError, RegistryError
from job.control.health_model import (
    DaggerFacts,
    HealthSettings,
    Point,
    came_up_at,
    cluster_health,
    dagger_health,
    streak_ended,
    up_since,
)
from job.control.hosts import HostCommand, HostedRun, SharedHosts, default_host_command, hosted_marker
from job.control.metrics import DaggerSeries, HealthMetrics, MetricsServer, serve
from job.control.models import Sample
from job.control.processes import (
    LOG_ROTATE_BYTES,
    Command,
    DaggerProcess,
    Proc,
    Standby,
    StandbyCommand,
    default_command,
    default_standby_command,
    exit_error,
    tail_file,
)
from job.control.registry import Registry
from job.errors import DaggerError, SpecError
from job.query.failure_record import FailureRecord, read_failure
from job.query.liveness import QUERY_FILE, read_json
from job.stack.process import group_members, pid_alive, process_start_time

if TYPE_CHECKING:
    from job.control.remote import RemoteClusterAgent

log = logging.getLogger("daggers.controller")


#: How long a probe of the cluster's parts waits for an answer before its part reads ``slow`` (the probe itself
#: waits longer on a busy machine before it counts as unanswered: see :class:`job.control.health.Patience`).
PROBE_TIMEOUT_S = 3.0


class ControllerSettings(BaseModel):
    """How a controller paces itself and treats crashes."""

    model_config = ConfigDict(extra="forbid")

    poll_interval_s: float = Field(default=1.0, gt=0, description="Seconds between two reconcile rounds.")
    health_interval_s: float = Field(default=10.0, gt=0, description="Seconds between two health probes.")
    lag_interval_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between two consumer-lag reads per dagger (a batch that read rows brings the "
        "next read forward, to no less than a fifth of this after the one before).",
    )
    max_restarts: int = Field(
        default=5, ge=0, description="Crashes in a row restarted before a dagger is left failed."
    )
    backoff_initial_s: float = Field(
        default=2.0, ge=0, description="Wait before the first restart after a crash."
    )
    backoff_max_s: float = Field(
        default=120.0, ge=0, description="Longest wait between restarts (it doubles)."
    )
    stable_after_s: float = Field(
        default=300.0,
        gt=0,
        description="A run up this long (from its query's start: a relaunch into a host that is gone is not up) "
        "forgets the crashes before it (as does one that has read and written "
        "rows and run for the health model's recovered_after_s).",
    )
    stop_timeout_s: float = Field(
        default=60.0, gt=0, description="Seconds a graceful stop (SIGTERM) may take before SIGKILL."
    )
    heartbeat_stale_s: float = Field(
        default=15.0, gt=0, description="A controller heartbeat older than this counts as gone."
    )
    failover_after_s: float = Field(
        default=60.0,
        gt=0,
        description="Take over the running daggers of a cluster that names this one "
        "as its failover once its controller heartbeat is this old.",
    )
    handoff_quiet_s: float = Field(
        default=60.0,
        gt=0,
        description="A moved dagger whose old controller is gone, on another host: "
        "start it once its liveness file has been quiet this long.",
    )
    sample_retention_s: float = Field(default=3600.0, gt=0, description="How long progress samples are kept.")
    standby: bool = Field(
        default=True,
        description="On local masters, keep one dagger process started and warm "
        "(Python, JVM, Spark session) for the next deploy, which then "
        "skips Spark's start-up. It costs one idle JVM on the gateway.",
    )
    daggers_per_host: int = Field(
        default=50,
        ge=1,
        description="Shared daggers placed in one shared application host at most; "
        "a further one starts another host.",
    )
    standby_every_s: float = Field(
        default=30.0,
        ge=0,
        description="Start a standby process at most this often (a failing one "
        "is not restarted in a tight loop).",
    )
    metrics_port: int | None = Field(
        default=0,
        ge=0,
        le=65535,
        description="Serve Prometheus metrics at http://metrics_host:PORT/metrics; "
        "0 takes a port from the OS, None serves none. The URL is "
        "recorded with the heartbeat (cluster's controller_metrics_url).",
    )
    metrics_host: str = Field(default="127.0.0.1", description="The address /metrics listens on.")


def _isolation(spec_text: str) -> str:
    """Return the spec's ``isolation`` (``shared`` when it names none or cannot be read)."""
    try:
        return str(specs.raw_spec(spec_text).get("isolation") or "shared")
    except DaggerError:
        return "shared"


def backoff_delay(crashes: int, initial_s: float, max_s: float) -> float:
    """Return the wait before restart number ``crashes`` (1, 2, ...): ``initial * 2**(crashes-1)``, capped."""
    return min(initial_s * 2.0 ** max(crashes - 1, 0), max_s)


@dataclass
class _Item:
    """A snapshot of one dagger and its status, taken at the start of a round."""

    id: int
    name: str
    team: str
    desired: str
    deleted: bool
    version: int
    generation: int
    spec_text: str
    epoch: int
    status: dict[str, Any] = field(default_factory=dict)
    leaving: bool = False  # moved away: stop it here, then hand it over
    arriving_from: str | None = None  # moved here from this cluster: start it once the old one let go
    from_heartbeat: float | None = None  # the heartbeat of the cluster it arrives from

    @property
    def ref(self) -> str:
        return f"{self.team}/{self.name}"


def running_cause(progress: Any, query_up: bool, started: float) -> str:
    """Return why a dagger started at ``started`` reads as running, given its ``status.json`` (``progress``)
    and whether its query reported that it started: a batch, only when one was reported since (the file
    also moves before any, e.g. at each wait of a sink that retries to start)."""
    batch_at = float(progress.get("batch_at") or 0.0) if isinstance(progress, dict) else 0.0
    if batch_at and batch_at >= started:
        return "first batch reported"
    return "query started" if query_up else "reported, no batch yet"


def _sample(dagger_id: int, at: float, progress: dict[str, Any], lag: int | None) -> Sample:
    """Return a progress sample of ``progress`` taken at ``at`` (with the lag read then, or None)."""
    return Sample(
        dagger_id=dagger_id,
        at=at,
        input_rows=int(progress.get("input_rows") or 0),
        input_rows_per_s=float(progress.get("input_rows_per_s") or 0.0),
        processed_rows_per_s=float(progress.get("processed_rows_per_s") or 0.0),
        batch_duration_ms=int(progress.get("batch_duration_ms") or 0),
        lag=lag,
    )


class Controller:
    """Reconciles the daggers of one cluster (see the module docstring)."""

    def __init__(
        self,
        registry: Registry | ClusterAgent | RemoteClusterAgent,
        cluster: str,
        state_dir: Path,
        *,
        settings: ControllerSettings | None = None,
        command: Command | None = None,
        standby_command: StandbyCommand | None = None,
        host: str | None = None,
        host_command: HostCommand | None = None,
    ) -> None:
        # the registry itself (embedded), or the server with the cluster's controller token: the same agent
        self.agent = ClusterAgent(registry, cluster) if isinstance(registry, Registry) else registry
        self.cluster_name = cluster
        self.state_dir = Path(state_dir).absolute()
        self.settings = settings or ControllerSettings()
        self.command = command or default_command
        # A custom command (tests) runs without a standby unless it brings its own.
        self.standby_command = standby_command or (default_standby_command if command is None else None)
        self._standby: Standby | None = None
        self._standby_tried = 0.0
        self.host = host or socket.gethostname()
        self.pid = os.getpid()
        self._procs: dict[int, Proc | HostedRun] = {}
        self._killed: dict[int, float] = {}  # dagger id -> the stop request its SIGKILL answered (once each)
        #: dagger id -> sink -> (when its outage began, the run and its writes then): kept across a restart
        self._sink_outage: dict[int, dict[str, tuple[float, float, int]]] = {}
        self._lag_at: dict[int, float] = {}
        # when each running lag read was asked for, and the progress then
        self._lag_asked: dict[int, dict[str, Any]] = {}
        self._streams: dict[tuple[int, int], list[tuple[str, list[str], dict[str, str]]]] = {}
        self._health_at = 0.0
        self._health_job: Future[dict[str, Any]] | None = None
        self._answered: set[str] = set()  # the parts of the probe in flight that answered
        self._slow_told: bool = False  # the probe in flight was recorded as unanswered (once)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="health")
        self._lag_pool = ThreadPoolExecutor(2, thread_name_prefix="lag")
        self._lag_jobs: dict[int, Future[tuple[int | None, str | None, str | None]]] = {}
        self._pruned_at = 0.0
        self._fencing: dict[int, tuple[Proc | HostedRun, float]] = {}
        self._waiting: set[int] = set()
        self.health_settings = HealthSettings.from_env()
        self._points: dict[int, deque[Point]] = {}
        self._probe: tuple[dict[str, Any], float] | None = None  # the last finished health probe, and when
        self.metrics = HealthMetrics(cluster)
        self._metrics_server: MetricsServer | None = None
        conf = self.agent.settings()
        self.master = conf["spark_master"]
        self.spark_ui = conf["spark_ui_url"]
        self.kafka_bootstrap = conf["kafka_bootstrap"]
        self.influx_url = conf["influx_url"]
        # Shared daggers go to hosts; a custom dagger command (tests) runs every dagger as its own
        # process unless a host command comes with it.
        self.host_command = host_command or (default_host_command if command is None else None)
        self._hosts = SharedHosts(
            self.state_dir / "shared",
            self.master,
            self._env,
            command=self.host_command,
            daggers_per_host=self.settings.daggers_per_host,
        )

    # ---- controller lock ----------------------------------------------------------------------

    def claim(self) -> None:
        """Record this controller as the cluster's; raise ConflictError when another one is alive."""
        host, pid = self.agent.holder()
        gone = host == self.host and pid is not None and pid != self.pid and not pid_alive(pid)
        self.agent.claim(self.host, self.pid, self.settings.heartbeat_stale_s, gone, self.metrics_url)

    @property
    def metrics_url(self) -> str | None:
        """Where this controller serves /metrics (None before :meth:`serve_metrics` or without it)."""
        return self._metrics_server.url if self._metrics_server is not None else None

    def serve_metrics(self) -> str | None:
        """Start serving /metrics on ``metrics_port`` (unless None or already serving); return its URL.

        Raises OSError when the port cannot be bound."""
        if self._metrics_server is None and self.settings.metrics_port is not None:
            self._metrics_server = serve(self.metrics, self.settings.metrics_port, self.settings.metrics_host)
            log.info("metrics at %s", self._metrics_server.url)
        return self.metrics_url

    def release(self) -> None:
        """Clear this controller's heartbeat and metrics URL (when it is still the recorded one)."""
        self.agent.release(self.host, self.pid)

    # ---- one round ----------------------------------------------------------------------------

    def _snapshot(self) -> list[_Item]:
        items: list[_Item] = []
        for a in self.agent.assignments():
            items.append(
                _Item(
                    id=a["id"],
                    name=a["name"],
                    team=a["team"],
                    desired=a["desired"],
                    deleted=a["deleted"],
                    version=a["version"],
                    generation=a["generation"],
                    spec_text=a["spec_text"],
                    epoch=a["epoch"],
                    status=dict(a["status"]),
                    leaving=a["leaving"],
                    arriving_from=a["arriving_from"],
                    from_heartbeat=a["from_heartbeat"],
                )
            )
        return items

    def reconcile_once(self) -> dict[int, dict[str, Any]]:
        """Run one round; return the status changes it recorded, by dagger id."""
        now = time.time()
        updates: dict[int, dict[str, Any]] = {}
        samples: list[Sample] = []
        self._fail_over()
        items = self._snapshot()
        handed: list[int] = []
        for item in items:
            before = dict(item.status)
            upd: dict[str, Any] = {}
            if item.arriving_from is None:
                self._waiting.discard(item.id)
            elif not self._arrived(item, now):
                continue  # moved here; the old cluster has not let go yet
            else:
                upd = self._take_over(item)
                handed.append(item.id)
            upd.update(self._reconcile(item, now))
            observed, new = self._observe(item, {**item.status, **upd}, now)
            upd.update(observed)
            samples.extend(new)
            changed = {k: v for k, v in upd.items() if before.get(k) != v}
            if changed:
                updates[item.id] = changed
            item.status.update(upd)
            if item.leaving and item.id not in self._procs:
                log.info("%s: stopped here; handed over to its new cluster", item.ref)
                handed.append(item.id)
        health = self._maybe_health([i for i in items if not i.leaving], now)
        if health is not None:
            self._probe = (health, now)
        self._judge([i for i in items if not i.leaving and not i.deleted], samples, now)
        self._write(updates, samples, health, now, handed)
        self._keep_standby(items, now)
        return updates

    def _reconcile(self, item: _Item, now: float) -> dict[str, Any]:
        st = item.status
        proc = self._procs.get(item.id) or self._adopt(item)
        alive = proc is not None and proc.alive()
        actual = st.get("actual_state") or "created"
        want_running = item.desired == "running" and not item.deleted and not item.leaving
        if alive:
            assert proc is not None
            stale = (
                st.get("running_version") != item.version
                or (st.get("running_generation") or 0) != item.generation
            )
            if actual == "stopping":
                return self._keep_stopping(item, proc, now)
            if not want_running or stale:
                why = f"roll over to v{item.version}" if want_running else item.desired
                log.info("%s: stopping (%s)", item.ref, why)
                proc.signal(signal.SIGTERM)
                return {"actual_state": "stopping", "stop_requested_at": now}
            return {}
        upd: dict[str, Any] = {}
        if proc is not None or (st.get("pid") and actual in ("starting", "running", "stopping")):
            upd = self._exited(item, proc, actual, now)
            actual = upd.get("actual_state", actual)
        at_rest = ("created", "stopped", "deleted", "failed")
        if (item.deleted or item.desired == "deleted" or not want_running or actual == "failed") and (
            st.get("actual_state") or "created"
        ) not in at_rest:
            # once, as it comes to rest: its run is gone, and a shared host started again must not resume it
            self._release(item)
            if st.get("progress"):  # the next start is a start, not a roll-out (health_model.AT_REST)
                upd["progress"] = {**st["progress"], "state": "failed" if actual == "failed" else "stopped"}
        if item.deleted or item.desired == "deleted":
            return {**upd, "actual_state": "deleted", "pid": None}
        if not want_running:
            if actual not in ("created", "stopped"):
                upd.update(actual_state="stopped", pid=None)
            return upd
        due = actual == "crashed" and now >= float(
            upd.get("next_restart_at", st.get("next_restart_at")) or 0.0
        )
        if actual in ("created", "pending", "stopped", "starting", "running", "stopping") or due:
            # a new version starts with its own streak of crashes
            own = {"restarts": 0} if st.get("running_version") not in (None, item.version) else {}
            return {**upd, **own, **self._launch(item, now)}
        return upd

    def _release(self, item: _Item) -> None:
        """Remove the dagger's assignment from this controller's shared hosts, where one is left."""
        if self._hosts.release(f"{item.id}-{item.name}"):
            log.info("%s: its assignment to a shared host removed (not running: %s)", item.ref, item.desired)

    def _keep_stopping(self, item: _Item, proc: DaggerProcess, now: float) -> dict[str, Any]:
        asked = float(item.status.get("stop_requested_at") or now)
        if now - asked > self.settings.stop_timeout_s and self._killed.get(item.id) != asked:
            # once per stop: a hosted run ends when its host has aborted its sinks' retries
            log.warning("%s: did not stop within %.0f s; SIGKILL", item.ref, self.settings.stop_timeout_s)
            proc.signal(signal.SIGKILL, group=True)
            self._killed[item.id] = asked
        return {}

    def _exited(self, item: _Item, proc: DaggerProcess | None, actual: str, now: float) -> dict[str, Any]:
        """Record that the dagger's process is gone: a stop that finished, or a crash."""
        self._procs.pop(item.id, None)
        self._killed.pop(item.id, None)
        code = proc.exit_code() if proc is not None else None
        # in words: a negative code is a signal; a hosted run's query ended in its host, no process exited
        ended = proc.ended_how() if proc is not None else "its process is gone"
        if proc is not None:
            proc.reap_group()
        st = item.status
        if actual == "stopping":
            log.info("%s: stopped (%s)", item.ref, ended)
            return {"actual_state": "stopped", "pid": None, "last_exit_code": code, "stop_requested_at": None}
        record = self._failure(proc, st)
        text = ""  # the log is read only when the run left no record (killed before it could write one)
        if record is None:
            text = proc.log_since_start() if proc is not None else tail_file(st.get("log_path"))
        error = exit_error(record, text, code)
        # up from its query's start: a relaunch into a host that is gone was never up, however long it waited
        came_up = came_up_at(float(st.get("started_at") or now), st.get("progress") or {})
        uptime = now - came_up if came_up is not None else 0.0
        over = uptime > self.settings.stable_after_s or streak_ended(
            st.get("started_at"), st.get("progress") or {}, now, self.health_settings
        )
        restarts = (0 if over else int(st.get("restarts") or 0)) + 1
        if restarts > self.settings.max_restarts:
            log.error("%s: crashed %d times in a row; giving up: %s", item.ref, restarts, error)
            return {
                "actual_state": "failed",
                "pid": None,
                "last_exit_code": code,
                "last_error": error,
                "restarts": restarts,
                "next_restart_at": None,
            }
        delay = backoff_delay(restarts, self.settings.backoff_initial_s, self.settings.backoff_max_s)
        log.warning("%s: crashed (%s): %s; restart %d in %.0f s", item.ref, ended, error, restarts, delay)
        return {
            "actual_state": "crashed",
            "pid": None,
            "last_exit_code": code,
            "last_error": error,
            "restarts": restarts,
            "next_restart_at": now + delay,
        }

    @staticmethod
    def _failure(proc: DaggerProcess | None, st: dict[str, Any]) -> FailureRecord | None:
        """Return the failure record of the run that just ended (the process's, else the one in the dagger's
        folder), or None when it left none: a record written before the run started is an older run's."""
        started = st.get("started_at")
        if started is None:
            return None
        if proc is not None:
            record = proc.failure()
        elif st.get("checkpoint"):
            record = read_failure(Path(st["checkpoint"]).parent)
        else:
            record = None
        return record if record is not None and record.at >= float(started) else None

    def _workdir(self, item: _Item) -> Path:
        """Return the dagger's folder: the one its checkpoint was recorded in (by any cluster's controller:
        a moved dagger resumes there), else a new one under this controller's state dir.

        Raises ConflictError when the recorded folder lies elsewhere and cannot be reached from here.
        """
        own = self.state_dir / "daggers" / f"{item.id}-{item.name}"
        recorded = item.status.get("checkpoint")
        if not recorded:
            return own
        folder = Path(recorded).parent
        if folder.is_dir() or folder == own:
            return folder
        raise ConflictError(handoff.unreachable(folder, self.cluster_name, self.host))

    def _launch(self, item: _Item, now: float) -> dict[str, Any]:
        try:
            workdir = self._workdir(item)
        except ConflictError as exc:
            log.error("%s: %s", item.ref, exc.message)
            return {"actual_state": "failed", "pid": None, "last_error": exc.message, "next_restart_at": None}
        workdir.mkdir(parents=True, exist_ok=True)
        checkpoint = workdir / f"checkpoint-{item.epoch}"
        spec_path = workdir / f"v{item.version}.yaml"
        try:  # the udf_file the spec carries goes beside this version's copy (job.control.udf_carry)
            text = udf_carry.run_text(item.spec_text, checkpoint, workdir / f"v{item.version}-udf")
        except (DaggerError, OSError) as exc:
            if isinstance(
                exc, OSError
            ):  # a file the host cannot write (its name, no space): this dagger's fault
                exc = SpecError(f"udf_file: cannot write the file the spec carries: {exc.strerror or exc}")
            error = FailureRecord.of(exc).text()
            log.error("%s: cannot write its spec to run: %s", item.ref, error)
            return {"actual_state": "failed", "pid": None, "last_error": error, "next_restart_at": None}
        spec_path.write_text(text)
        spec_path.chmod(0o600)
        log_path = workdir / "dagger.log"
        if log_path.exists() and log_path.stat().st_size > LOG_ROTATE_BYTES:
            log_path.replace(log_path.with_suffix(".log.1"))
        if self.host_command is not None and _isolation(item.spec_text) in ("shared", "fused"):
            return self._launch_shared(item, now, spec_path, workdir, checkpoint)
        (workdir / "hosted.json").unlink(missing_ok=True)
        standby = self._take_standby(item, spec_path, workdir, checkpoint)
        if standby is not None:
            proc = standby
            self._procs[item.id] = proc
            log.info(
                "%s: v%d handed to the warm standby pid %d (checkpoint %s)",
                item.ref,
                item.version,
                proc.pid,
                checkpoint,
            )
            return {
                "actual_state": "starting",
                "running_version": item.version,
                "running_generation": item.generation,
                "checkpoint": str(checkpoint),
                "host": self.host,
                "pid": proc.pid,
                "pid_start_time": proc.start_time,
                "started_at": now,
                "stop_requested_at": None,
                "next_restart_at": None,
                "log_path": str(proc.log_path),
            }
        argv = self.command(spec_path, workdir, self.master)
        env = self._env()
        with log_path.open("ab") as fh:
            offset = fh.tell()
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            fh.write(
                f"=== {stamp} controller {self.host}: starting {item.ref} v{item.version} "
                f"(checkpoint {checkpoint.name})\n".encode()
            )
            fh.flush()
            try:
                popen = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=workdir,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                return {"actual_state": "failed", "pid": None, "last_error": f"cannot start: {exc}"}
        proc = Proc(
            pid=popen.pid,
            start_time=process_start_time(popen.pid),
            log_path=log_path,
            log_offset=offset,
            popen=popen,
            state_dir=workdir,
        )
        self._procs[item.id] = proc
        log.info("%s: started v%d as pid %d (checkpoint %s)", item.ref, item.version, popen.pid, checkpoint)
        return {
            "actual_state": "starting",
            "running_version": item.version,
            "running_generation": item.generation,
            "checkpoint": str(checkpoint),
            "host": self.host,
            "pid": popen.pid,
            "pid_start_time": proc.start_time,
            "started_at": now,
            "stop_requested_at": None,
            "next_restart_at": None,
            "log_path": str(log_path),
        }

    def _launch_shared(
        self, item: _Item, now: float, spec_path: Path, workdir: Path, checkpoint: Path
    ) -> dict[str, Any]:
        """Assign the dagger to a shared host (starting one when needed); return its new status."""
        key = f"{item.id}-{item.name}"
        try:
            run = self._hosts.run(
                key, spec_path, workdir, f"v{item.version}-g{item.generation}-{now:.3f}", workdir
            )
        except OSError as exc:
            return {"actual_state": "failed", "pid": None, "last_error": f"cannot start a shared host: {exc}"}
        self._procs[item.id] = run
        with (workdir / "dagger.log").open("ab") as fh:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            fh.write(
                f"=== {stamp} controller {self.host}: {item.ref} v{item.version} runs in the shared host "
                f"pid {run.pid} ({run.host.folder.root}) as {key}; its output: {run.log_path}\n".encode()
            )
        log.info(
            "%s: v%d assigned to the shared host pid %d as %s (checkpoint %s)",
            item.ref,
            item.version,
            run.pid,
            key,
            checkpoint,
        )
        return {
            "actual_state": "starting",
            "running_version": item.version,
            "running_generation": item.generation,
            "checkpoint": str(checkpoint),
            "host": self.host,
            "pid": run.pid,
            "pid_start_time": run.start_time,
            "started_at": now,
            "stop_requested_at": None,
            "next_restart_at": None,
            "log_path": str(run.log_path),
        }

    def _env(self) -> dict[str, str]:
        return {
            **specs.dagger_env(os.environ, specs.cluster_env(self.kafka_bootstrap, self.influx_url)),
            "PYTHONUNBUFFERED": "1",
        }

    # ---- the warm standby ---------------------------------------------------------------------

    def _keep_standby(self, items: list[_Item], now: float) -> None:
        """Start a standby process when there is none, unless a dagger is starting (they would compete
        for the CPU) or one was started less than ``standby_every_s`` ago."""
        if self.standby_command is None or not self.settings.standby or not self.master.startswith("local"):
            return  # on a standalone cluster an idle application would hold executors that others need
        if self._standby is not None:
            if self._standby.popen.poll() is None:
                return
            log.warning(
                "the standby process ended (%s); see %s",
                how_it_ended(self._standby.popen.returncode),
                self._standby.log_path,
            )
            self._standby = None
        if now - self._standby_tried < self.settings.standby_every_s or any(
            i.status.get("actual_state") == "starting" for i in items
        ):
            return
        self._standby_tried = now
        folder = self.state_dir / "standby"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        ready, log_path = folder / f"{stamp}.ready", folder / f"{stamp}.log"
        try:
            with log_path.open("ab") as fh:
                popen = subprocess.Popen(
                    self.standby_command(ready, self.master),
                    stdin=subprocess.PIPE,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env=self._env(),
                    cwd=folder,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as exc:
            log.warning("cannot start a standby process: %s", exc)
            return
        self._standby = Standby(popen=popen, log_path=log_path, ready_file=ready)
        log.info("standby process pid %d starting", popen.pid)

    def _take_standby(self, item: _Item, spec_path: Path, workdir: Path, checkpoint: Path) -> Proc | None:
        """Hand the dagger to the warm standby, if one is ready; return its process (None: start one)."""
        standby = self._standby
        if standby is None or not standby.ready() or standby.popen.stdin is None:
            return None
        self._standby = None
        log_path = workdir / f"dagger-{standby.popen.pid}.log"
        try:
            standby.log_path.replace(log_path)  # the process keeps writing to the same (moved) file
            offset = log_path.stat().st_size
            standby.popen.stdin.write(
                (json.dumps({"spec": str(spec_path), "state_dir": str(workdir)}) + "\n").encode()
            )
            standby.popen.stdin.close()
        except OSError as exc:
            log.warning("the standby could not take %s (%s); starting a new process", item.ref, exc)
            standby.popen.kill()
            return None
        with contextlib.suppress(OSError):
            standby.ready_file.unlink()
        with (workdir / "dagger.log").open("ab") as fh:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            fh.write(
                f"=== {stamp} controller {self.host}: {item.ref} v{item.version} runs in the warm standby "
                f"pid {standby.popen.pid}; its output: {log_path}\n".encode()
            )
        return Proc(
            pid=standby.popen.pid,
            start_time=process_start_time(standby.popen.pid),
            log_path=log_path,
            log_offset=offset,
            popen=standby.popen,
            state_dir=workdir,
        )

    def _drop_standby(self) -> None:
        standby, self._standby = self._standby, None
        if standby is None:
            return
        with contextlib.suppress(OSError):
            if standby.popen.stdin is not None:
                standby.popen.stdin.close()  # EOF: the standby exits on its own
        try:
            standby.popen.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(standby.popen.pid, signal.SIGKILL)
            standby.popen.wait(5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group_members(standby.popen.pid):
                os.killpg(standby.popen.pid, signal.SIGKILL)

    # ---- moves and failover ---------------------------------------------------------------------

    def _fail_over(self) -> None:
        """Take over the running daggers of the clusters whose controller is gone and that fail over to this one."""
        self.agent.fail_over(self.settings.failover_after_s)

    def _arrived(self, item: _Item, now: float) -> bool:
        """Return whether a dagger moved here may start: its old cluster's controller stopped it (then
        ``arriving_from`` is clear and this is not called), or that controller is gone and so is the old
        process (stopped here when it runs on this host; see :mod:`job.control.handoff`)."""
        st = item.status
        stale_s = min(self.settings.heartbeat_stale_s, self.settings.failover_after_s)
        if item.from_heartbeat is not None and now - item.from_heartbeat < stale_s:
            self._wait(item, f"waiting for {item.arriving_from}'s controller to stop it")
            return False
        pid = st.get("pid")
        if st.get("actual_state") not in ("starting", "running", "stopping") or not pid:
            return True
        if st.get("host") != self.host:
            if handoff.liveness_quiet(st.get("checkpoint"), self.settings.handoff_quiet_s, now):
                return True
            self._wait(
                item,
                f"the controller of {item.arriving_from} is gone; waiting until pid {pid} on "
                f"{st.get('host')} stops (its liveness file is quiet for "
                f"{self.settings.handoff_quiet_s:g} s)",
            )
            return False
        fence = self._fencing.get(item.id)
        if fence is None:
            proc = self._hosted(st) or Proc(
                pid=int(pid), start_time=st.get("pid_start_time"), log_path=Path(os.devnull)
            )
            if not proc.alive():
                return True
            log.warning(
                "%s: the controller of %s is gone; stopping its pid %s before taking over",
                item.ref,
                item.arriving_from,
                pid,
            )
            proc.signal(signal.SIGTERM)
            self._fencing[item.id] = (proc, now)
            return False
        proc, asked = fence
        if proc.alive():
            if now - asked > self.settings.stop_timeout_s:
                proc.signal(signal.SIGKILL, group=True)
            return False
        proc.reap_group()
        del self._fencing[item.id]
        return True

    def _wait(self, item: _Item, why: str) -> None:
        if item.id not in self._waiting:
            self._waiting.add(item.id)
            log.info("%s: moved here from %s; %s", item.ref, item.arriving_from, why)

    def _take_over(self, item: _Item) -> dict[str, Any]:
        """Return the status of a dagger handed over to this cluster (its old process is gone)."""
        self._waiting.discard(item.id)
        log.info("%s: taking over from %s", item.ref, item.arriving_from)
        item.arriving_from = None
        if item.status.get("actual_state") in ("starting", "running", "stopping"):
            item.status.update(actual_state="stopped", pid=None, stop_requested_at=None)
            return {"actual_state": "stopped", "pid": None, "stop_requested_at": None}
        return {}

    def _adopt(self, item: _Item) -> Proc | HostedRun | None:
        """Take over a dagger process (or a shared host's query) an earlier controller on this host
        started, if it still runs."""
        st = item.status
        pid, start = st.get("pid"), st.get("pid_start_time")
        if not pid or st.get("host") != self.host or not pid_alive(int(pid), start):
            return None
        hosted = self._hosted(st)
        if hosted is not None:
            self._procs[item.id] = hosted
            log.info("%s: adopted its query in the shared host pid %s", item.ref, pid)
            return hosted
        if st.get("checkpoint") and hosted_marker(Path(st["checkpoint"]).parent) is not None:
            return None  # its host is alive but no longer holds it
        proc = Proc(
            pid=int(pid),
            start_time=start,
            log_path=Path(st.get("log_path") or os.devnull),
            state_dir=Path(st["checkpoint"]).parent if st.get("checkpoint") else None,
        )
        self._procs[item.id] = proc
        log.info("%s: adopted running pid %s", item.ref, pid)
        return proc

    def _hosted(self, st: dict[str, Any]) -> HostedRun | None:
        """Return the shared-host run of the dagger whose status is ``st``, when a live host holds it."""
        if not st.get("checkpoint"):
            return None
        return self._hosts.adopt(Path(st["checkpoint"]).parent, st.get("pid"))

    # ---- progress, lag, health ----------------------------------------------------------------

    def _observe(self, item: _Item, st: dict[str, Any], now: float) -> tuple[dict[str, Any], list[Sample]]:
        """Read a live dagger's status.json (and, now and then, its consumer lag), given its status
        ``st`` after this round's decisions; return the status changes and the samples taken: one when the
        dagger reported, one for each lag read that ended (at the time it was asked for, with the rows read
        then: the health model judges the lag batch by batch)."""
        if st.get("actual_state") not in ("starting", "running") or not st.get("checkpoint"):
            return {}, []
        checkpoint = Path(st["checkpoint"])
        progress, query = read_json(checkpoint / "status.json"), read_json(checkpoint / QUERY_FILE)
        upd: dict[str, Any] = {}
        samples: list[Sample] = []
        started = float(st.get("started_at") or 0.0)
        reported = isinstance(progress, dict) and float(progress.get("updated_at") or 0.0) >= started
        query_up = (
            isinstance(query, dict)
            and query.get("state") in ("started", "active", "idle")
            and float(query.get("at") or 0.0) >= started
        )
        if (reported or query_up) and st.get("actual_state") == "starting":
            log.info("%s: running (%s)", item.ref, running_cause(progress, query_up, started))
            upd["actual_state"] = "running"
        old = st.get("progress") or {}
        read_rows = False
        if reported and isinstance(progress, dict):
            progress = self._sink_outage_since(item.id, started, progress)
            if progress.get("updated_at") != old.get("updated_at"):
                upd["progress"] = progress
                samples.append(_sample(item.id, float(progress.get("updated_at") or now), progress, None))
                read_rows = int(progress.get("input_rows") or 0) > int(old.get("input_rows") or 0)
            if st.get("restarts") and streak_ended(st.get("started_at"), progress, now, self.health_settings):
                log.info(
                    "%s: read and wrote rows, its query up %.0f s: its crashes in a row are over",
                    item.ref,
                    now - up_since(started, progress),
                )
                upd["restarts"] = 0
        # The lag is read in the background: a broker that does not answer must not hold up the rounds
        # (and with them the heartbeat); a read's result is recorded in the round after it ends.
        job = self._lag_jobs.get(item.id)
        if job is not None and job.done():
            del self._lag_jobs[item.id]
            try:
                upd["lag"], upd["lag_error"], upd["lag_unknown"] = job.result()
            except Exception as exc:  # a lag read must never stop the controller
                upd["lag"], upd["lag_error"], upd["lag_unknown"] = (
                    None,
                    f"{type(exc).__name__}: {exc}"[:500],
                    None,
                )
            upd["lag_at"] = now if upd["lag"] is not None else st.get("lag_at")
            asked = self._lag_asked.pop(item.id, {})
            # when the first failed read in a row was asked for: an outage counts from there
            failed_since = st.get("lag_error_at") or asked.get("at", now)
            upd["lag_error_at"] = failed_since if upd["lag_error"] else None
            if upd["lag"] is not None and "at" in asked:
                samples.append(_sample(item.id, asked["at"], asked["progress"], upd["lag"]))
        since = now - self._lag_at.get(item.id, 0.0)
        interval = self.settings.lag_interval_s
        if item.id not in self._lag_jobs and (since >= interval or (read_rows and since >= interval / 5)):
            self._lag_at[item.id] = now
            self._lag_asked[item.id] = {
                "at": now,
                "progress": progress if isinstance(progress, dict) else old,
            }
            self._lag_jobs[item.id] = self._lag_pool.submit(self._lag, item, checkpoint)
        return upd, samples

    def _sink_outage_since(self, dagger_id: int, started: float, progress: dict[str, Any]) -> dict[str, Any]:
        """Return ``progress`` with each retrying sink's ``since`` set to when its outage began, though a run
        before this one saw it begin (a restart does not reset the evidence of a sink outage). An outage ends
        when a run's sink writes again."""
        known = self._sink_outage.setdefault(dagger_id, {})
        sinks = dict(progress.get("sinks") or {})
        for name, sink in sinks.items():
            if not isinstance(sink, dict):
                continue
            retry, writes = sink.get("retrying"), int(sink.get("writes") or 0)
            seen = known.get(name)
            if isinstance(retry, dict):
                since = float(retry.get("since") or 0.0)
                if seen is not None and seen[0] < since:
                    sinks[name] = {**sink, "retrying": {**retry, "since": seen[0]}}
                    since = seen[0]
                known[name] = (since, started, writes)
            elif seen is not None and (writes > seen[2] if seen[1] == started else writes > 0):
                del known[name]  # it wrote again: the outage is over
        return {**progress, "sinks": sinks} if sinks else progress

    def _judge(self, items: list[_Item], samples: list[Sample], now: float) -> None:
        """Judge this round's daggers with the health model (this controller's heartbeat is ``now``) and hand
        the verdicts to /metrics."""
        hs = self.health_settings
        keep = max(hs.stall_after_s, hs.lag_window_s, hs.lag_window_max_s, hs.rate_window_s) + 60.0
        for sample in samples:
            points = self._points.setdefault(sample.dagger_id, deque())
            points.append(Point(at=sample.at, input_rows=sample.input_rows, lag=sample.lag))
        series = []
        for item in items:
            points = self._points.get(item.id, deque())
            while points and points[0].at < now - keep:
                points.popleft()
            facts = DaggerFacts.of(item.desired, item.status, heartbeat=now, samples=points)
            series.append(DaggerSeries(item.team, item.name, dagger_health(facts, now, self.health_settings)))
        probe, probe_at = self._probe or (None, None)
        verdict = cluster_health(
            now, probe, probe_at, [d.health.state for d in series], now, self.health_settings
        )
        self.metrics.update(series, verdict, now)

    def _lag(self, item: _Item, checkpoint: Path) -> tuple[int | None, str | None, str | None]:
        """Return the dagger's lag (None before its first committed batch), why the brokers' end offsets could
        not be read, and why no lag can be told from those they answered (an end below the dagger's position);
        the lag is None in either case."""
        from job.control.lag import LagUnknown, dagger_lag

        key = (item.id, item.version)
        if key not in self._streams:
            try:
                spec = specs.parse_text(item.spec_text, self._env())
            except DaggerError as exc:
                log.warning("%s: cannot read its streams for the lag: %s", item.ref, exc.message)
                return None, None, None
            self._streams[key] = [
                (s.bootstrap_servers, list(s.topics), dict(s.consumer_config)) for s in spec.streams
            ]
        try:
            return dagger_lag(checkpoint, self._streams[key]), None, None
        except LagUnknown as exc:
            log.warning("%s: lag unknown: %s", item.ref, exc.message)
            return None, None, exc.message[:500]
        except DaggerError as exc:
            log.warning("%s: lag unknown: %s", item.ref, exc.message)
            return None, exc.message[:500], None

    def _maybe_health(self, items: list[_Item], now: float) -> dict[str, Any] | None:
        """Start a health probe in the background when one is due; return the result of a finished one
        (probes wait on network timeouts, which must not hold up reconciling)."""
        from job.control.health import count_failures, probe_cluster

        result = None
        if self._health_job is not None and self._health_job.done():
            try:
                result = count_failures(self._health_job.result(), self._probe[0] if self._probe else None)
            except Exception as exc:  # a probe must never stop the controller
                log.warning("health probe failed: %s", exc)
            self._health_job = None
        elif self._health_job is not None and not self._slow_told and self._probe is not None:
            result = self._unanswered(self._probe[0], now)
        if self._health_job is None and now - self._health_at >= self.settings.health_interval_s:
            self._health_at = now
            self._answered, self._slow_told = set(), False
            live = [i for i in items if not i.deleted]
            running = sum(1 for i in live if i.status.get("actual_state") == "running")
            self._health_job = self._pool.submit(
                probe_cluster,
                self.master,
                self.spark_ui,
                self.kafka_bootstrap,
                self.influx_url,
                daggers_running=running,
                daggers_total=len(live),
                timeout=PROBE_TIMEOUT_S,
                answered=self._answered,
            )
        return result

    def _unanswered(self, last: dict[str, Any], now: float) -> dict[str, Any] | None:
        """Return the last probe with each part whose probe in flight has not answered within its timeout
        marked unanswered (``slow``: not ``ok``, its failures in a row unchanged), once per probe; None while
        every part answers in time. A probe waits up to its timeout times the load (ten times on a busy
        machine): a frozen broker must not read ``ok`` for that long."""
        waited = now - self._health_at
        late = [n for n in ("spark", "kafka", "influx") if n not in self._answered]
        if waited <= PROBE_TIMEOUT_S or not late:
            return None
        self._slow_told = True
        out = dict(last)
        for name in late:
            part = dict(out.get(name) or {})
            out[name] = {
                **part,
                "ok": False,
                "slow": True,
                "refused": False,
                "failures": int(part.get("failures") or 0),
                "error": f"no answer for {waited:.0f} s yet (the probe still waits)",
            }
        return {**out, "ok": False}

    def _write(
        self,
        updates: dict[int, dict[str, Any]],
        samples: list[Sample],
        health: dict[str, Any] | None,
        now: float,
        handed: list[int] | None = None,
    ) -> None:
        prune = None
        if now - self._pruned_at > 60:
            self._pruned_at = now
            prune = now - self.settings.sample_retention_s
        rows = [{f: getattr(x, f) for f in SAMPLE_FIELDS} for x in samples]
        self.agent.report(updates, rows, health, handed or [], self.host, self.pid, prune, self.metrics_url)

    # ---- the loop -----------------------------------------------------------------------------

    def run_forever(self, stop: threading.Event | None = None, *, stop_daggers_on_exit: bool = False) -> None:
        """Reconcile every ``poll_interval_s`` until ``stop`` is set (or SIGTERM/SIGINT in the main thread).

        A registry that cannot be reached is retried; the daggers keep running meanwhile.
        Raises ConflictError when another controller owns the cluster.
        """
        stop = stop or threading.Event()
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: stop.set())
        self.claim()
        self.serve_metrics()  # its URL goes with every heartbeat
        log.info(
            "controller of %s on %s (pid %d), registry %s, state %s",
            self.cluster_name,
            self.host,
            self.pid,
            self.agent.where,
            self.state_dir,
        )
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    self.reconcile_once()
                except RegistryError as exc:
                    log.warning("registry unavailable, retrying: %s", exc.message)
                stop.wait(max(self.settings.poll_interval_s - (time.monotonic() - started), 0.05))
        finally:
            self.close()
            if stop_daggers_on_exit:
                self.stop_all()
            with contextlib.suppress(RegistryError):
                self.release()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def close(self) -> None:
        """Stop the standby process, the health prober and /metrics (daggers keep running)."""
        self._drop_standby()
        if self._metrics_server is not None:
            self._metrics_server.close()
            self._metrics_server = None
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._lag_pool.shutdown(wait=False, cancel_futures=True)

    def stop_all(self, timeout: float | None = None) -> None:
        """Stop every dagger this controller holds (processes and shared hosts' queries) gracefully, wait
        until they are gone, then stop the shared hosts."""
        timeout = self.settings.stop_timeout_s if timeout is None else timeout
        procs = list(self._procs.values())
        for proc in procs:
            proc.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while any(p.alive() for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        for proc in procs:
            if proc.alive():
                proc.signal(signal.SIGKILL, group=True)
            proc.reap_group()
        self._procs.clear()
        self._hosts.stop_all(timeout)
