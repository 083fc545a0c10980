"""One dagger inside a shared application host: its own Spark session, FAIR pool, query and thread.

:class:`HostedDagger` runs the same :class:`job.query.runner.DaggerJob` a dedicated dagger runs, on
``base.newSession()``: the session's temporary views (``data_stream``), UDFs (the library's and the
dagger's ``udf_file``) and SQL settings (``spark.sql.shuffle.partitions`` from ``parallelism``, the
spec's ``spark.sql.*``) are its own, while the SparkContext, the JVM, the executors and the Python
workers are shared. Its query's jobs run in the FAIR scheduler pool named after the dagger (the
``spark.scheduler.pool`` local property is set in the thread that starts the query, which Spark's
stream thread inherits), so a heavy dagger gets its fair share of task slots rather than all of them;
``light`` daggers share one FIFO pool instead (see :func:`pool_name`).
Its checkpoint, ``status.json`` and liveness ``query.json`` are written exactly as a dedicated
dagger writes them (listeners are per session: each sees only its own query).

Non-SQL ``spark_conf`` settings (memory, executors) belong to a Spark application and are ignored
here, with a warning; such a dagger should use ``isolation: dedicated``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from job.errors import DaggerError
from job.query.failure_record import FailureRecord, as_dagger_error
from job.shared.channel import HostFolder

log = logging.getLogger("daggers.shared")


#: An error of the application, not of the dagger: a Python process Spark started for the query's data
#: source did not connect back within Spark's fixed 10 s (a busy machine). The query is started again.
TRANSIENT = "Python worker failed to connect back"
MAX_TRANSIENT_RETRIES = 3


#: The one pool of every ``light`` dagger: jobs in it run first come, first served (FIFO).
LIGHT_POOL = "daggers-light"


def pool_name(key: str, light: bool = False) -> str:
    """Return the FAIR scheduler pool of the dagger ``key``: its own, or :data:`LIGHT_POOL` for a light one.

    Spark's FAIR scheduling offers a free task slot to the pool with the fewest running tasks for its
    weight, and between equals to the pool whose *name* sorts first. Light daggers run one small task at
    a time, so under load they were nearly always equals, and the first-named always won: in a host of
    50 light daggers on 2 cores, p99 grew with the name, from 11 s (l000) to 173 s (l039). In one FIFO
    pool their jobs run in the order they came; a heavy dagger keeps a pool of its own, which gets its
    share of the slots against the light pool as a whole.
    """
    return LIGHT_POOL if light else f"dagger-{key}"


def heavy_task_cap(master: str, slots: int) -> int:
    """Return how many tasks may read a micro-batch of a dagger that is not light, in a host on ``master``
    with ``slots`` task slots: on a local master, all but one from 3 slots up (0: no cap), so a light
    dagger's task never waits for a slot behind a heavy dagger's read (a host on ``local[*]`` has one slot
    more than the cores: :func:`job.shared.host.host_master`). With 2 slots a cap of 1 would halve the
    heavy dagger, and on a cluster every slot is a core: none."""
    return slots - 1 if master.startswith("local") and slots >= 3 else 0


def pool_session(base: Any, parallelism: int, pool: str) -> Any:
    """Return a new session of ``base`` for one query of the host: ``parallelism`` shuffle partitions, and
    every job the calling thread (and the stream thread it starts) submits in the FAIR pool ``pool``."""
    session = base.newSession()
    session.conf.set("spark.sql.shuffle.partitions", str(parallelism))
    session.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
    return session


class _StoppedStarting(Exception):
    """A stop (or a kill) came while the dagger was starting: it ends without starting its query."""


class HostedDagger:
    """One assignment (key + token) running in a thread of the host.

    ``jvm_alive`` tells a query failure from the loss of the whole application: when the JVM is gone
    the dagger reports nothing (its state stays as it was, like a dedicated dagger killed by a
    signal) and the host exits.
    """

    def __init__(
        self,
        key: str,
        token: str,
        spec_path: Path,
        state_dir: Path,
        base: Any,
        folder: HostFolder,
        jvm_alive: Callable[[], bool],
        start_gate: threading.Lock | None = None,
    ) -> None:
        self.key = key
        self.token = token
        self.spec_path = Path(spec_path)
        self.state_dir = Path(state_dir)
        self.base = base
        self.folder = folder
        self.jvm_alive = jvm_alive
        self.start_gate = start_gate or threading.Lock()
        self.state = "starting"
        self.error: str | None = None
        self.failure: FailureRecord | None = None  # the record of the error it failed on
        self.checkpoint: str | None = None
        self.query_id: str | None = None
        self._stop = threading.Event()
        self._aborted = False
        self._job: Any = None  # the running DaggerJob (its sinks, for abort)
        self._retries = 0
        self._pool = pool_name(key)  # LIGHT_POOL once the spec says light
        self._thread = threading.Thread(target=self._run, name=f"dagger-{key}", daemon=True)

    @property
    def pool(self) -> str:
        return self._pool

    # ---- what the host calls --------------------------------------------------------------------

    def start(self) -> None:
        """Start the dagger in its own thread (returns at once)."""
        self._report("starting")
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the dagger to stop gracefully (returns at once; see :attr:`ended`)."""
        if not self.ended:
            self._stop.set()

    def abort(self, why: str) -> None:
        """End a stop that does not end: each sink gives up the write it retries (once; see
        :meth:`job.sinks.base.Sink.abort`), so that the batch fails and the query stops."""
        if self.ended or self._aborted:
            return
        self._aborted = True
        self._stop.set()
        log.warning("%s: killed: %s", self.key, why)
        job = self._job
        for sink in getattr(job, "sinks", None) or []:
            sink.abort(why)

    @property
    def ended(self) -> bool:
        return self.state in ("stopped", "failed")

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ---- the thread -----------------------------------------------------------------------------

    def _report(self, state: str, error: DaggerError | None = None) -> None:
        """Report ``state`` in the dagger's state file; a failure carries its error as text (``error``) and as
        its failure record (``failure``, see :mod:`job.query.failure_record`)."""
        self.state = state
        if error is not None:
            self.error = error.state_text()
            self.failure = FailureRecord.of(error)
        self.folder.report(
            self.key,
            self.token,
            state,
            error=self.error,
            failure=self.failure.as_json() if self.failure is not None else None,
            pool=self.pool,
            checkpoint=self.checkpoint,
            query_id=self.query_id,
        )

    def _run(self) -> None:
        from job.query.runner import DaggerJob
        from job.spark.failure import explain_failure

        job: DaggerJob | None = None
        liveness: Any = None
        session: Any = None
        try:
            # Planned and its sinks opened on its own: a sink that waits to start holds up no other dagger.
            job, session = self._prepare()
            if job is None:
                return
            self._take_gate()  # one query starts at a time (see _wait_for_sources)
            try:
                if self._stop.is_set():
                    raise _StoppedStarting
                liveness = self._start(job, session)
                self._wait_for_sources(job.query)
            finally:
                self.start_gate.release()
            query = job.query
            assert query is not None
            job.mark("running")
            self._report("running")
            log.info("%s: running (query %s, pool %s)", self.key, self.query_id, self.pool)
            while query.isActive and not self._stop.is_set():
                query.awaitTermination(0.5)  # type: ignore[arg-type]  # Spark takes seconds as a float
            if self._stop.is_set() and query.isActive:
                self._report("stopping")
                log.info("%s: stopping", self.key)
            elif (failure := query.exception()) is not None:
                raise explain_failure(failure)
            self._finish(job, session, liveness, None)
        except _StoppedStarting:
            log.info("%s: stopped before its query started", self.key)
            self._finish(self._job, session, liveness, None)
        except Exception as exc:  # the dagger ends; the host and the other daggers go on
            if not self.jvm_alive():
                log.warning("%s: the Spark application is gone", self.key)
                return  # the host exits; nothing about this dagger changed
            err = as_dagger_error(exc)
            text = err.state_text()
            if TRANSIENT in text and self._retries < MAX_TRANSIENT_RETRIES and not self._stop.is_set():
                self._retries += 1
                log.warning(
                    "%s: %s; starting its query again (%d/%d)",
                    self.key,
                    TRANSIENT,
                    self._retries,
                    MAX_TRANSIENT_RETRIES,
                )
                self._finish(job, session, liveness, None, report=False)
                self._stop.wait(2.0 * self._retries)
                return self._run()
            log.error("%s: failed: %s", self.key, text.replace("\n", " "))
            if job is not None:
                job.mark("failed", f"{err.title}: {err.message}")
            self._finish(job, session, liveness, err)

    def _prepare(self) -> tuple[Any, Any]:
        """Plan the dagger, make its session (in its own pool) and its job, and open the job's sinks,
        retrying as the sinks' policy says; return (job, session), or (None, None) when a stop came first.
        A stop or a kill ends a wait between two tries at once (:class:`_StoppedStarting`)."""
        from job.query.plan import plan
        from job.query.runner import DaggerJob
        from job.sinks.base import start_sinks
        from job.spec import load_spec

        spec = load_spec(self.spec_path)
        p = plan(spec, self.state_dir)
        context = self.base.sparkContext
        cap = 0 if spec.light else heavy_task_cap(str(context.master), int(context.defaultParallelism))
        if cap:
            p = replace(p, streams=[replace(s, source=replace(s.source, max_tasks=cap)) for s in p.streams])
            log.info(
                "%s: at most %d tasks read a micro-batch (one slot stays free for light daggers)%s",
                self.key,
                cap,
                ""
                if spec.parallelism <= cap
                else f"; its {spec.parallelism} shuffle partitions may still take every slot",
            )
        self.checkpoint = str(p.checkpoint)
        self._pool = pool_name(self.key, spec.light)
        ignored = sorted(k for k in spec.spark_conf if not k.startswith("spark.sql."))
        if ignored:
            log.warning(
                "%s: %s apply to a Spark application: ignored in a shared one (isolation: dedicated "
                "takes them)",
                self.key,
                ", ".join(ignored),
            )
        if self._stop.is_set():
            self._report("stopped")
            return None, None
        session = pool_session(self.base, spec.parallelism, self.pool)
        job = DaggerJob(p, session)
        self._job = job  # a kill from now on aborts its sinks
        start_sinks(job.sinks, None, self._wait_to_retry)
        return job, session

    def _take_gate(self, every_s: float = 0.2) -> None:
        """Take the host's start gate; raise :class:`_StoppedStarting` when a stop or a kill comes while
        another query holds it (a restarted host starts its daggers one at a time, each up to a minute: a
        stop must not wait for all those ahead of it)."""
        while not self.start_gate.acquire(timeout=every_s):
            if self._stop.is_set():
                raise _StoppedStarting

    def _wait_to_retry(self, delay_s: float) -> None:
        """Wait ``delay_s`` before a sink's next try to open; raise :class:`_StoppedStarting` on a stop."""
        if self._stop.wait(delay_s):
            raise _StoppedStarting

    def _start(self, job: Any, session: Any) -> Any:
        """Start the query of ``job`` (its sinks open) on ``session``; return its liveness listener."""
        from job.query.liveness import QUERY_FILE, liveness_listener

        liveness = liveness_listener(job.plan.checkpoint / QUERY_FILE)
        session.streams.addListener(liveness)
        started = time.monotonic()
        query = job.start()
        self.query_id = str(query.id)
        log.info(
            "%s: query %s started in %.1f s (checkpoint %s)",
            self.key,
            self.query_id,
            time.monotonic() - started,
            job.plan.checkpoint,
        )
        return liveness

    def _wait_for_sources(self, query: Any, timeout_s: float = 60.0) -> None:
        """Wait until the query has planned its first batch (its sources are open) or ``timeout_s``.

        Each query starts a Python process for its data source, which must connect back to the JVM
        within Spark's fixed 10 s: many queries starting together on a busy machine (a host that restarts
        with all its daggers) would miss it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._stop.is_set() and query.isActive:
            message = str(query.status.get("message") or "")
            if query.lastProgress is not None or not message.startswith(("Initializing", "Getting offsets")):
                return
            time.sleep(0.2)

    def _finish(
        self, job: Any, session: Any, liveness: Any, error: DaggerError | None, report: bool = True
    ) -> None:
        try:
            if job is not None:
                job.stop()
                if error is None and report:
                    job.mark("stopped")
            if session is not None and liveness is not None:
                session.streams.removeListener(liveness)
        except Exception as exc:  # stopping must not keep the state from being reported
            if not self.jvm_alive():
                return
            log.warning("%s: while stopping: %s", self.key, exc)
        if not report:
            return
        self._report("failed" if error is not None else "stopped", error)
        log.info("%s: %s", self.key, "failed" if error else "stopped")
