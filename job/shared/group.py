"""One generation of a fused group inside a shared host: one query for several daggers (see
:mod:`job.shared.fusion`).

:class:`HostedGroup` runs in a thread of the host, like :class:`job.shared.hosted.HostedDagger`, on a
session and in a FAIR pool of its own (see :attr:`HostedGroup.pool`). Its folder
``<host>/groups/<group key>/`` holds ``group.json`` (the generation, its members' keys and tokens, where
it started reading) and each generation's checkpoint ``gen-<n>/``. Each member keeps what a dagger of its own keeps: its sinks, its
``status.json`` and ``query.json`` under its own checkpoint, and its state in the host's
``daggers/<key>.json``.

* A host started again (the JVM was killed) finds the same members in ``group.json`` and resumes the
  same generation from its checkpoint: exact totals.
* Other members start a new generation (see :func:`start_of_generation`).
* A member whose sink fails past its retries fails alone: its rows are no longer written, the others go on.
* A generation opens its members' sinks (with their start retries) before it takes the host's start
  gate, which it holds only to start its query: a sink that waits to start holds up its own group, no
  other dagger of the host, and a stop ends that wait at once (the members that leave report ``stopped``).
* A member that leaves (unassigned or replaced) stops with its generation: it reports ``stopping`` until
  the generation's query has stopped, which waits for the micro-batch in progress. A *kill* of a leaving
  member (its controller's, once its stop timed out: a sink retrying a write) ends that generation now
  (:meth:`HostedGroup.abort`): every sink of the generation gives up the write it retries, and that batch
  is not committed, so no member fails: those that stay get the batch again from the next generation
  (it reads from the oldest window still open, or from the offsets the last one committed).
* A failure of the query itself that is not its source's (a member's SQL failing at run time, e.g. a
  division by zero) *splits* the group: :data:`SPLIT_FILE` records its members, and the host runs each of
  them as a group of one (:func:`solo_key`) whose first generation starts where the failed one would have
  started again (:func:`start_of_generation` with the group's folder as ``parent``). The member that fails
  then fails alone; the others go on with no gap and no double, each in a query of its own.
* Once a member of the split has failed, been removed or been edited, the host ends the split (it
  removes :data:`SPLIT_FILE`) and the others come back together: the group's next generation takes each
  of them from its group of one (``joining`` in :func:`start_of_generation`), from the earliest window
  any of them had open, and leaves out of each member's rows the windows its group of one had written
  (:attr:`Generation.written_by`). A group with windows comes back together only when every member's
  output shows its window's end or start (each member's rows are told apart by it). A group of
  pass-throughs, whose members' queries stopped at different offsets, reads from the furthest of them;
  each member that had stopped short first gets the records in between (:mod:`job.shared.catchup`).
* A failure of the source (:class:`job.errors.SourceError`, e.g. a bad record under
  ``bad_records: fail``, which every member reads) fails every member with its error; a Python worker
  that did not connect back in time (a busy machine, :data:`job.shared.hosted.TRANSIENT`) only starts the
  same generation again, as a dagger of its own would.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from job.common.words import counted
from job.errors import DaggerError, SinkError, SourceError
from job.query.failure_record import FailureRecord, as_dagger_error
from job.query.liveness import read_json
from job.query.offset_log import point_offsets
from job.shared.channel import HostFolder, write_json
from job.shared.hosted import MAX_TRANSIENT_RETRIES, TRANSIENT, pool_session

log = logging.getLogger("daggers.shared")

GROUPS = "groups"
#: Two members with the same aggregation would share one shuffle (Spark reuses equal exchanges), and the
#: second's watermark, never fed, would hold its windows back forever: each branch keeps its own.
GROUP_SQL_CONF = {"spark.sql.exchange.reuse": "false"}
#: Members whose sinks write a micro-batch at once.
SINK_THREADS = 8
GROUP_FILE = "group.json"
#: In a group's folder once its query failed on something other than its source: ``members`` (key ->
#: token), each of which runs as a group of its own from then on (:func:`solo_key`), and the ``error``.
SPLIT_FILE = "split.json"
#: The batch id a member's sinks see for its catch-up (:mod:`job.shared.catchup`), outside the query's.
CATCH_UP_BATCH = -1
#: The form of a group's query (2: its members merged into one aggregation, job.shared.merge). A
#: generation's checkpoint holds the state of its query's form: one of another form is not resumed.
PLAN_FORM = 2
#: A partition no generation had read: looked up back from its end (:func:`resume_offsets`).
UNREAD = 1 << 62


@dataclass(frozen=True)
class Member:
    """One fused dagger of a group: its assignment and its plan."""

    key: str
    token: str
    plan: Any  # job.query.plan.DaggerPlan


@dataclass(frozen=True)
class Generation:
    """Where a generation of a group reads: its number, the event time it starts at (None: the members'
    ``start_from``) and the offsets the generations before it had read (its members count no record
    twice)."""

    number: int
    start_ms: int | None
    seen: dict[str, dict[str, int]]
    written_ms: int | None = None  # the windows that ended by then were written by an earlier generation
    #: members whose windows an earlier query wrote further than ``written_ms`` (member key -> the window
    #: ends up to which it did): one that comes back from a group of one (see :data:`SPLIT_FILE`)
    written_by: dict[str, int] = field(default_factory=dict)
    #: members whose earlier query had read less than ``seen`` (member key -> its offsets): each counts
    #: the records it had not read
    seen_by: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def solo_key(group_key: str, member: str) -> str:
    """Return the key of the group of one that ``member`` of the split group ``group_key`` runs in."""
    return f"{group_key}-{member}"


def split_members(folder: Path) -> dict[str, str]:
    """Return the members (key -> token) recorded in a group's :data:`SPLIT_FILE`; {} when it has none."""
    return dict((read_json(folder / SPLIT_FILE) or {}).get("members") or {})


def start_of_generation(
    folder: Path,
    members: dict[str, str],
    window: list[str | None] | None,
    parent: Path | None = None,
    joining: dict[str, Path] | None = None,
) -> Generation:
    """Return the generation of a group whose members are ``members`` (key -> token).

    The generation in ``group.json`` when its members are these and its query has this form
    (:data:`PLAN_FORM`), resumed from its checkpoint; else the next one, reading from the start of the
    oldest window the last one had open (its committed watermark, see :func:`job.shared.fusion.restart_ms`),
    or from where the last one started when it committed nothing. A group none of whose members were in
    the last generation starts afresh (from its members' ``start_from``). A group of one split off
    ``parent`` (see :data:`SPLIT_FILE`) starts its first generation where ``parent``'s next one would.

    ``joining`` (member key -> the folder of the group of one it ran in) are members that come back to the
    group after a split: each is taken from its group of one's last generation, the others from the
    group's own. The generation then reads from the earliest of their starts, and
    :attr:`Generation.written_by` holds, for each member, the windows its earlier query wrote past
    :attr:`Generation.written_ms`: no window is written twice and none is missed."""
    data = read_json(folder / GROUP_FILE)
    number = 0
    if data is None:
        data = read_json(parent / GROUP_FILE) if parent is not None else None
        last = (
            parent / f"gen-{int(data.get('generation', 0))}"
            if parent is not None and data is not None
            else None
        )
    else:
        number = int(data.get("generation", 0))
        last = folder / f"gen-{number}"
        if data.get("members") == members and data.get("form") == PLAN_FORM:
            return Generation(
                number,
                data.get("start_ms"),
                data.get("seen") or {},
                data.get("written_ms"),
                {k: int(v) for k, v in (data.get("written_by") or {}).items()},
                data.get("seen_by") or {},
            )
    joining = joining or {}
    sources: list[tuple[Path, dict[str, Any], set[str]]] = []
    if data is not None and last is not None:
        own = set(members) & set(data.get("members") or {}) - set(joining)
        if own:
            sources.append((last, data, own))
    for key, solo in sorted(joining.items()):
        if key in members and (solo_data := read_json(solo / GROUP_FILE)) is not None:
            sources.append((solo / f"gen-{int(solo_data.get('generation', 0))}", solo_data, {key}))
    if not sources:
        return Generation(number + 1, None, {})
    starts: list[int | None] = []
    written: list[int | None] = []
    by_member: dict[str, int] = {}
    seen: dict[str, dict[str, int]] = {}
    read: dict[str, dict[str, dict[str, int]]] = {}
    for last_gen, last_data, keys in sources:
        start, done, offsets = _resume_point(last_gen, last_data, window)
        starts.append(start)
        written.append(done)
        _merge_offsets(seen, offsets)
        for key in keys:
            read[key] = offsets
            mine = [v for v in (done, (last_data.get("written_by") or {}).get(key)) if v is not None]
            if mine:
                by_member[key] = max(int(v) for v in mine)
    start_ms = None if None in starts else min(s for s in starts if s is not None)
    written_ms = None if None in written else min(w for w in written if w is not None)
    floor = written_ms if written_ms is not None else -1
    return Generation(
        number + 1,
        start_ms,
        seen,
        written_ms,
        {k: v for k, v in sorted(by_member.items()) if v > floor},
        {k: offsets for k, offsets in sorted(read.items()) if offsets != seen},
    )


def generation_start(
    plan: Any, window: list[str | None] | None, start_ms: int | None, seen: dict[str, dict[str, int]]
) -> str | None:
    """Return the ``start_from`` of a group's next generation (None: its members' own): with windows, the
    offsets of the oldest open one's first records (:func:`resume_offsets`; the time ``start_ms`` itself,
    looked up by the source, when the generations before read nothing or a broker does not answer); without
    (pass-throughs), the offsets ``seen`` where the last generation stopped."""
    if not window:
        return json.dumps(seen) if seen else None
    if start_ms is None:
        return None
    if seen:
        try:
            return json.dumps(resume_offsets(plan, start_ms, seen))
        except SourceError as exc:
            log.warning("reading from %d by the broker's offsets for times: %s", start_ms, exc.message)
    return str(start_ms)


def resume_offsets(plan: Any, start_ms: int, seen: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Return where a windowed group's next generation reads each partition of ``plan``'s streams from: the
    first record stamped at or after ``start_ms`` (less the join's reach and the watermark delay, so a record
    out of order by less is not missed), looked up by record time back from the offsets ``seen`` that the
    generations before had read (from its end for a partition they did not read), never past them
    (:func:`job.sources.align.offsets_back_to`; tansu's offsets for times compare the broker's append times
    and answered 0 for a loaded backlog: 1.8 M records read again). Raises SourceError when a broker cannot
    be reached or does not answer."""
    from job.sources import offsets as kofs
    from job.sources.align import offsets_back_to

    at_ms = start_ms - (plan.translation.join_lag_ms or 0) - plan.spec.watermark_delay_ms
    out: dict[str, dict[str, int]] = {}
    for stream in plan.streams:
        source = stream.source
        consumer = kofs.driver_consumer(
            source.bootstrap_servers, {**(source.consumer_config or {}), "fetch.queue.backoff.ms": "1"}
        )
        try:
            tps = kofs.partitions_of(consumer, source.topics, source.bootstrap_servers)
            highs: dict[str, dict[str, int]] = {}
            for tp in tps:
                highs.setdefault(tp.topic, {})[str(tp.partition)] = int(
                    (seen.get(tp.topic) or {}).get(str(tp.partition), UNREAD)
                )
            out.update(offsets_back_to(consumer, at_ms, highs))
        finally:
            consumer.close()
    return out


def _resume_point(
    last: Path, data: dict[str, Any], window: list[str | None] | None
) -> tuple[int | None, int | None, dict[str, dict[str, int]]]:
    """Return (where a generation after ``last`` reads from, the window ends ``last`` and those before it
    wrote up to, the offsets they read) for a group whose ``group.json`` was ``data``."""
    from job.query.offset_log import committed_offsets, committed_watermark_ms
    from job.shared.fusion import restart_ms

    start, written = data.get("start_ms"), data.get("written_ms")
    seen: dict[str, dict[str, int]] = {}
    _merge_offsets(seen, data.get("seen") or {})
    watermark = committed_watermark_ms(last / "spark") if window else None
    if watermark and window:
        start = max(start or 0, restart_ms(watermark, window))
        written = max(written or 0, watermark)
    _merge_offsets(seen, committed_offsets(last) or {})
    return start, written, seen


def _merge_offsets(into: dict[str, dict[str, int]], offsets: dict[str, dict[str, Any]]) -> None:
    """Raise ``into``'s offsets to ``offsets`` where they are further."""
    for topic, parts in offsets.items():
        for part, offset in parts.items():
            into.setdefault(topic, {})[str(part)] = max(
                int(offset), int(into.get(topic, {}).get(str(part), 0))
            )


class _StoppedStarting(Exception):
    """A stop came while the group's members' sinks were opening: it ends without starting its query."""


@dataclass(frozen=True)
class _Prepared:
    """A generation made ready to start (:meth:`HostedGroup._prepare`): its members' sinks are open."""

    session: Any
    conf: dict[str, str]  # the SQL settings its query runs with
    frame: Any  # the group's streaming DataFrame
    group: Any  # the plan of its sources (job.shared.fusion.group_plan)
    checkpoint: Path
    first: Any  # the first member's plan (job.query.plan.DaggerPlan)
    window: list[str | None] | None
    joining: dict[str, Path]
    generation: Generation


class HostedGroup:
    """One generation of a group's query, in a thread of the host (see the module docstring)."""

    def __init__(
        self,
        group_key: str,
        members: list[Member],
        base: Any,
        folder: HostFolder,
        jvm_alive: Callable[[], bool],
        start_gate: threading.Lock | None = None,
        parent: str | None = None,
    ) -> None:
        self.key = group_key
        self.parent = parent  # the key of the split group this group of one came from
        self.split: dict[str, str] = {}  # once its query failed: the members (key -> token) that go on apart
        self.went_apart = False  # its query failed and its members go on apart (its state is then "failed")
        self.members = {m.key: m for m in members}
        self.base = base
        self.folder = folder
        self.jvm_alive = jvm_alive
        self.start_gate = start_gate or threading.Lock()
        self.root = folder.root / GROUPS / group_key
        self.state = "starting"
        self.failed: dict[str, str] = {}  # member key -> its error, once its sinks failed
        self.leaving: set[str] = set()  # members that end with this generation (unassigned or replaced)
        self.generation = 0
        self._seen: dict[str, dict[str, int]] = {}  # offsets read by earlier generations
        self._seen_by: dict[
            str, dict[str, dict[str, int]]
        ] = {}  # members that had read less (see Generation)
        self._jobs: dict[str, Any] = {}
        self._opening: str | None = None  # the member whose sinks are being opened
        self._branches: dict[str, Any] = {}
        self._stop = threading.Event()
        self._retries = 0
        self._settle = True
        self._killed: str | None = None  # why the generation was killed (a leaving member's stop timed out)
        self._pool = ThreadPoolExecutor(max_workers=SINK_THREADS, thread_name_prefix=f"sinks-{group_key}")
        self._thread = threading.Thread(target=self._run, name=f"group-{group_key}", daemon=True)

    @property
    def pool(self) -> str:
        """The group's FAIR scheduler pool: its own. In the light daggers' FIFO pool its one large job a
        trigger would wait behind every light dagger's small ones; in a pool of its own it gets its share
        of the task slots against that pool as a whole."""
        return f"group-{self.key}"

    @property
    def tokens(self) -> dict[str, str]:
        """The members' keys and tokens."""
        return {k: m.token for k, m in sorted(self.members.items())}

    @property
    def ended(self) -> bool:
        return self.state in ("stopped", "failed")

    def start(self) -> None:
        for key in self.members:
            self._report(key, "starting")
        self._thread.start()

    def request_stop(self, leaving: set[str] | None = None, settle: bool = True) -> None:
        """Stop the generation; members in ``leaving`` report ``stopped``, the others nothing (the next
        generation takes them over). With ``settle``, a group with windows first lets its query close
        the windows its watermark has passed (up to 10 s, :meth:`job.query.runner.DaggerJob.settle`): for
        members that stop for good. Without, the next generation computes those windows again from the
        oldest open one (its start, :func:`start_of_generation`), so a deploy or an edit does not wait."""
        self.leaving |= set(leaving or ())
        self._settle = self._settle and settle
        self._stop.set()

    def abort(self, key: str, token: str, why: str) -> bool:
        """End the stopping generation now for its leaving member ``key`` (run ``token``), as SIGKILL ends a
        dagger of its own: each sink of the generation gives up the write it retries (once; see
        :meth:`job.sinks.base.Sink.abort`), the batch in progress fails uncommitted and the query stops. The
        members that stay are not failed: the next generation writes that batch again. Return False when
        ``key`` is not a leaving member of this generation with that token (nothing done)."""
        member = self.members.get(key)
        if self.ended or key not in self.leaving or member is None or member.token != token:
            return False
        if self._killed is None:
            self._killed = why
            log.warning("%s: killed: %s (group %s gen %d)", key, why, self.key, self.generation)
            for job in list(self._jobs.values()):
                for sink in getattr(job, "sinks", None) or []:
                    sink.abort(why)
        return True

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ---- the thread -----------------------------------------------------------------------------

    def _report(self, key: str, state: str, error: DaggerError | None = None) -> None:
        """Report member ``key``'s ``state``; a failure carries its error as text (``error``) and as the
        member's failure record (``failure``, see :mod:`job.query.failure_record`)."""
        member = self.members[key]
        self.folder.report(
            key,
            member.token,
            state,
            error=error.state_text() if error is not None else None,
            failure=FailureRecord.of(error).as_json() if error is not None else None,
            pool=self.pool,
            group=self.key,
            generation=self.generation,
            checkpoint=str(member.plan.checkpoint),
        )

    def _run(self) -> None:
        from job.spark.failure import explain_failure

        query = session = listener = None
        try:
            if self._stop.is_set():
                return self._end(None, None, None, None)
            # planned and its members' sinks opened before the host's start gate: a sink that waits to
            # start holds up this group only, and a stop ends that wait (_StoppedStarting)
            prepared = self._prepare()
            session = prepared.session
            with self.start_gate:  # one query starts at a time
                if self._stop.is_set():
                    raise _StoppedStarting
                query, listener = self._start(prepared)
            for key in self.members:
                if key not in self.failed:
                    self._jobs[key].mark("running")
                    self._report(key, "running")
            self.state = "running"
            log.info(
                "group %s gen %d: running %s (query %s)",
                self.key,
                self.generation,
                counted(len(self.members), "dagger"),
                query.id,
            )
            while query.isActive and not self._stop.is_set():
                query.awaitTermination(0.5)
            if self._stop.is_set() and query.isActive:
                for key in sorted(self.leaving - set(self.failed)):
                    if key in self.members:
                        self._report(key, "stopping")
            if not self._stop.is_set() and query.exception() is not None:
                raise explain_failure(query.exception())
            self._end(query, session, listener, None)
        except _StoppedStarting:
            log.info("group %s gen %d: stopped before its query started", self.key, self.generation)
            self._end(None, session, None, None)
        except Exception as exc:
            if not self.jvm_alive():
                log.warning("group %s: the Spark application is gone", self.key)
                return
            err = as_dagger_error(exc)
            text = err.state_text()
            if TRANSIENT in text and self._retries < MAX_TRANSIENT_RETRIES and not self._stop.is_set():
                self._retries += 1  # the application's hiccup, not the daggers': the same generation again
                log.warning(
                    "group %s: %s; starting its query again (%d/%d)",
                    self.key,
                    TRANSIENT,
                    self._retries,
                    MAX_TRANSIENT_RETRIES,
                )
                if self._close(query, session, listener):
                    self._jobs = {}  # members whose sinks failed stay failed
                    self._stop.wait(2.0 * self._retries)
                    return self._run()
                return
            live = {k: m.token for k, m in self.members.items() if k not in self.failed}
            if (
                len(live) > 1
                and not isinstance(err, SourceError)
                and TRANSIENT not in text
                and not self._stop.is_set()
            ):
                return self._split(query, session, listener, live, text)
            log.error("group %s: failed: %s", self.key, text.replace("\n", " "))
            self._end(query, session, listener, err)

    def _split(self, query: Any, session: Any, listener: Any, live: dict[str, str], error: str) -> None:
        """End the generation without failing its members ``live`` (key -> token), which the host then runs
        each in a group of its own (see :data:`SPLIT_FILE`): the one whose SQL failed fails alone."""
        log.warning(
            "group %s gen %d: its query failed: %s; its %d daggers go on each in a query of its own, so "
            "that only the one that fails stops",
            self.key,
            self.generation,
            error.replace("\n", " "),
            len(live),
        )
        if not self._close(query, session, listener):
            return
        split = {**split_members(self.root), **live}
        write_json(
            self.root / SPLIT_FILE,
            {"members": split, "generation": self.generation, "error": error, "at": time.time()},
        )
        for key in live:
            self._report(key, "starting")
        self._pool.shutdown(wait=False)
        self.split = split
        self.went_apart = True
        self.state = "failed"

    def _prepare(self) -> _Prepared:
        """Plan the generation, make its session (in the group's pool), its frame and each member's job,
        and open each member's sinks, retrying as their policies say (a member whose sink cannot work
        fails alone). A stop ends a wait between two tries at once (:class:`_StoppedStarting`)."""
        from job.query.plan import pin_schema, register_plan_functions
        from job.query.runner import DaggerJob, eviction_conf, query_sql_conf, session_conf
        from job.shared.fusion import group_frame, group_plan
        from job.sinks.base import start_sinks
        from job.sources.kafka import register_source

        first = next(iter(self.members.values())).plan
        window = list(first.translation.window) if first.translation.window else None
        joining = self._joining()
        gen = start_of_generation(
            self.root,
            self.tokens,
            window,
            self.root.parent / self.parent if self.parent is not None else None,
            joining,
        )
        self.generation, start_ms, self._seen, self._seen_by = gen.number, gen.start_ms, gen.seen, gen.seen_by
        checkpoint = self.root / f"gen-{self.generation}"
        start_from = generation_start(first, window, start_ms, self._seen)
        group = group_plan([m.plan for m in self.members.values()], checkpoint, start_from)
        session = pool_session(self.base, first.spec.parallelism, self.pool)
        register_plan_functions(session, first)
        register_source(session)
        # its sources ask for the batches that close windows, as a dagger's of its own do
        conf = {**eviction_conf(group), **query_sql_conf(first.spec), **GROUP_SQL_CONF}
        with session_conf(session, conf):
            frame, self._branches = group_frame(
                session,
                group,
                {k: m.plan for k, m in self.members.items()},
                start_ms,
                gen.written_ms,
                gen.written_by,
            )
            for key, member in self.members.items():
                job = DaggerJob(member.plan, session)
                job.log_batches = not self._jobs  # one line a batch for the group, not one a member
                member.plan.checkpoint.mkdir(parents=True, exist_ok=True)
                point_offsets(member.plan.checkpoint, checkpoint)  # its lag is the group's
                pin_schema(member.plan)
                self._jobs[key] = job
            for key, job in self._jobs.items():
                self._opening = key
                try:
                    start_sinks(job.sinks, self._branches[key].schema, self._wait_to_retry)
                except DaggerError as exc:  # a sink that cannot work: this member fails alone
                    self._fail(key, exc)
            self._opening = None
        return _Prepared(session, conf, frame, group, checkpoint, first, window, joining, gen)

    def _wait_to_retry(self, delay_s: float) -> None:
        """Wait ``delay_s`` before a sink's next try to open; raise :class:`_StoppedStarting` on a stop. The
        other members are held up meanwhile: each one's status.json says by whom (``held_up``)."""
        waiting = self._opening
        name = self._jobs[waiting].plan.spec.name if waiting in self._jobs else waiting
        for key, job in self._jobs.items():
            if waiting is not None and key != waiting and key not in self.failed:
                job.held_up(f"waiting for {name}'s sink to start in their fused group")
        if self._stop.wait(delay_s):
            raise _StoppedStarting

    def _start(self, prepared: _Prepared) -> tuple[Any, Any]:
        """Start the query of the ``prepared`` generation (its members' sinks open); return (the query, its
        listener)."""
        from job.query.runner import session_conf

        session, gen, joining, first = prepared.session, prepared.generation, prepared.joining, prepared.first
        start_ms, window, checkpoint = gen.start_ms, prepared.window, prepared.checkpoint
        with session_conf(session, prepared.conf):
            if not window:  # members back from their groups of one (a resumed generation caught up already)
                self._catch_up({k: v for k, v in gen.seen_by.items() if k in joining})
            write_json(
                self.root / GROUP_FILE,
                {
                    "generation": self.generation,
                    "members": self.tokens,
                    "start_ms": start_ms,
                    "window": window,
                    "seen": self._seen,
                    "written_ms": gen.written_ms,
                    "written_by": gen.written_by,
                    "seen_by": self._seen_by,
                    "form": PLAN_FORM,
                },
            )
            for solo in joining.values():  # this generation carries on their queries: theirs are done
                shutil.rmtree(solo, ignore_errors=True)
            listener = _group_listener(self)
            session.streams.addListener(listener)
            writer = (
                prepared.frame.writeStream.queryName(f"group_{self.key}_{self.generation}".replace("-", "_"))
                .outputMode("append")
                .option("checkpointLocation", str(checkpoint / "spark"))
                .foreachBatch(self._write_batch)
                .trigger(processingTime=f"{first.trigger_interval_s} seconds")
            )
            query = writer.start()
        for job in self._jobs.values():
            job.query = query
            job._interval_s = first.trigger_interval_s
            job.query_started()
        log.info(
            "group %s gen %d: %s from %s (checkpoint %s)",
            self.key,
            self.generation,
            counted(len(self.members), "dagger"),
            prepared.group.streams[0].source.start_from,
            checkpoint,
        )
        return query, listener

    def _catch_up(self, behind: dict[str, dict[str, dict[str, int]]]) -> None:
        """Write, for each member of a group of pass-throughs that comes back from a group of one short of
        where this generation starts (``behind``: member key -> the offsets its query stopped at), the
        records in between (:func:`job.shared.catchup.catch_up`), before the generation's query starts,
        and count them in its ``status.json``; from then on it counts the records the generation reads as
        the others do. A member whose catch-up fails (its sinks, its SQL) fails alone."""
        from job.query.offset_log import lag_of
        from job.shared.catchup import catch_up

        for key, start in sorted(behind.items()):
            if key not in self.members or key in self.failed:
                continue
            rows = lag_of(start, self._seen)  # the records from its offsets to the others'
            if not rows:
                continue
            began = time.monotonic()
            try:
                table = catch_up(self.base, self.members[key].plan, start, self._seen)
            except Exception as exc:
                self._fail(key, as_dagger_error(exc))
                continue
            error = self._write_member(
                key,
                table.select(self._branches[key].schema.names).cast(self._branches[key].schema),
                CATCH_UP_BATCH,
            )
            if error is not None:
                self._fail(key, error)
                continue
            self._jobs[key].count_read(rows)
            # it has read what the others had: from here on it counts as they do
            self._seen_by = {k: v for k, v in self._seen_by.items() if k != key}
            log.info(
                "group %s gen %d: %s caught up %d records (%d rows) it had not read, in %.0f ms",
                self.key,
                self.generation,
                key,
                rows,
                table.num_rows,
                (time.monotonic() - began) * 1000,
            )

    def _joining(self) -> dict[str, Path]:
        """Return the members that come back from a group of one (see :data:`SPLIT_FILE`): key -> its
        folder, which holds the query they ran in since the split. The first generation that takes them
        removes those folders; until then a host started again finds them there."""
        if self.parent is not None:
            return {}
        folders = {key: self.root.parent / solo_key(self.key, key) for key in self.members}
        return {key: folder for key, folder in folders.items() if (folder / GROUP_FILE).exists()}

    def _write_batch(self, df: Any, batch_id: int) -> None:
        from job.shared.fusion import split_rows

        for key, job in list(self._jobs.items()):
            if key not in self.failed:
                job.batch_started(batch_id)  # each member reads: its batch is in flight
        started = time.monotonic()
        rows = df.toArrow()
        collected = time.monotonic()
        tables = split_rows(rows, self._branches)
        live = [(key, table) for key, table in tables.items() if key not in self.failed]
        split = time.monotonic()
        # each member's sinks in a thread of their own: one slow or retrying sink does not hold the others
        errors = list(self._pool.map(lambda kt: self._write_member(kt[0], kt[1], batch_id), live))
        if self._killed is not None and any(errors):
            # killed while it stopped: no member fails, and the batch stays uncommitted (written again next)
            raise SinkError(f"group {self.key} gen {self.generation} was killed: {self._killed}")
        for key, error in zip([k for k, _ in live], errors, strict=True):
            if error is not None:
                self._fail(key, error)
        if rows.num_rows:
            log.info(
                "group %s gen %d batch %d: %s for %s; computed in %.0f ms, split in %.0f ms, "
                "written in %.0f ms",
                self.key,
                self.generation,
                batch_id,
                counted(rows.num_rows, "row"),
                counted(sum(1 for _, t in live if t.num_rows), "dagger"),
                (collected - started) * 1000,
                (split - collected) * 1000,
                (time.monotonic() - split) * 1000,
            )

    def _fail(self, key: str, error: DaggerError) -> None:
        """Fail one member with ``error``: its rows are no longer written."""
        text = error.state_text()
        log.error("%s (group %s): failed: %s", key, self.key, text.replace("\n", " "))
        self.failed[key] = text
        self._jobs[key].mark("failed", f"{error.title}: {error.message}")
        self._report(key, "failed", error)

    def _write_member(self, key: str, table: Any, batch_id: int) -> DaggerError | None:
        """Write a member's rows to its sinks; return its error or None."""
        try:
            for sink in self._jobs[key].sinks:
                sink.write(table, batch_id)
        except Exception as exc:  # this member's sink: it fails alone
            return as_dagger_error(exc)
        return None

    def on_progress(self, progress: dict[str, Any]) -> None:
        """Hand a progress event to every member, counting each record once: from the offsets (see
        :func:`job.shared.fusion.records_read`), less those an earlier generation had read."""
        from job.shared.fusion import records_read

        def rows(seen: dict[str, dict[str, int]]) -> int:
            return sum(
                records_read(s.get("startOffset"), s.get("endOffset"), seen)
                for s in progress.get("sources") or []
            )

        counted = rows(self._seen)
        for key, job in self._jobs.items():
            if key not in self.failed:
                own = rows(self._seen_by[key]) if key in self._seen_by else counted
                job._on_progress({**progress, "numInputRows": own})

    def on_idle(self, query_id: str) -> None:
        for key, job in self._jobs.items():
            if key not in self.failed:
                job._heartbeat(query_id)

    def _close(self, query: Any, session: Any, listener: Any) -> bool:
        """Stop the query (once its closed windows are written) and close every sink; return False when
        the application is gone."""
        jobs = list(self._jobs.values())
        try:
            if query is not None and query.isActive and jobs:
                windowed = next(iter(self.members.values())).plan.translation.window is not None
                if windowed and self._settle:
                    jobs[0].settle()
                query.stop()
            for job in jobs:
                job.sync_progress()
                for sink in job.sinks:
                    sink.close()
            if session is not None and listener is not None:
                session.streams.removeListener(listener)
        except Exception as exc:  # stopping must not keep the states from being reported
            if not self.jvm_alive():
                return False
            log.warning("group %s: while stopping: %s", self.key, exc)
        return True

    def _end(self, query: Any, session: Any, listener: Any, error: DaggerError | None) -> None:
        """Close the query (see :meth:`_close`) and report each member's end."""
        if not self._close(query, session, listener):
            return
        for key in self.members:
            job = self._jobs.get(key)
            if key in self.failed:
                continue
            if error is not None:
                if job is not None:
                    job.mark("failed", f"{error.title}: {error.message}")
                self._report(key, "failed", error)
            elif key in self.leaving or not self._stop.is_set():
                if job is not None:
                    job.mark("stopped")
                self._report(key, "stopped")
        self._pool.shutdown(wait=False)
        self.state = "failed" if error is not None else "stopped"
        log.info("group %s gen %d: %s", self.key, self.generation, self.state)


def _group_listener(group: HostedGroup) -> Any:
    """Return the listener that hands the group query's events to each member: its progress
    (``status.json``) and its liveness (``query.json``), as a dagger's own listeners would. A session's
    listeners see only that session's query."""
    from job.query.events import QueryEvents
    from job.query.liveness import QUERY_FILE, write_query_state

    def write(state: str, query_id: str, run_id: str, **extra: Any) -> None:
        for key, member in group.members.items():
            if key not in group.failed:
                write_query_state(member.plan.checkpoint / QUERY_FILE, state, query_id, run_id, **extra)

    class GroupListener(QueryEvents):
        def on_started(self, query_id: str, run_id: str) -> None:
            write("started", query_id, run_id)

        def on_progress(self, progress: dict[str, Any]) -> None:
            group.on_progress(progress)
            write("active", str(progress.get("id", "")), str(progress.get("runId", "")))

        def on_idle(self, query_id: str, run_id: str) -> None:
            group.on_idle(query_id)
            write("idle", query_id, run_id)

        def on_terminated(self, query_id: str, run_id: str, exception: str | None) -> None:
            write("terminated", query_id, run_id, exception=exception)

    return GroupListener()
