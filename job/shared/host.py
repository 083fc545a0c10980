"""``python -m job.shared.host DIR --master MASTER``: a shared Spark application that runs many daggers.

One long-lived process holds one SparkSession (FAIR scheduler) and runs each dagger assigned to it
as a streaming query of its own (see :mod:`job.shared.hosted`: own session, FAIR pool, checkpoint,
``status.json`` and ``query.json``). It is driven through the files of its folder ``DIR`` (see
:mod:`job.shared.channel`): every ``poll_s`` it starts the daggers newly assigned, stops those whose
assignment was removed and replaces those whose token changed, each without touching the others.

* A dagger that fails (a bad record under ``bad_records: fail``, a sink that stays unreachable, an
  error in a UDF) stops alone: it reports ``failed`` with its error and the others keep running.
* ``isolation: fused`` daggers that read one stream alike run as one query per group
  (:mod:`job.shared.fusion`, :class:`job.shared.group.HostedGroup`); a change of a group's members
  starts its next generation. When a group's query fails on one member's SQL, each of its members goes
  on in a group of its own, so that only that one fails (see :mod:`job.shared.group`).
* SIGTERM or SIGINT stops every dagger gracefully (as a dedicated dagger stops), then the application;
  exit code 0. Signals are handled here only, never per dagger.
* When the Spark application is lost (the JVM exits or is killed), the host records it in
  ``host.json`` and exits with code 3 at once; whoever supervises it (the controller) starts a new
  host on the same folder, which starts every assignment again from its own checkpoint, and reports
  ``stopped`` for each run of the lost one that is no longer assigned (:func:`end_left_over`).

Each query's streaming Python source keeps a Python process on the driver: in a host they are forked
from a fork server started with it (:mod:`job.shared.forkserver`), a few MB each instead of ~70.

API for a supervisor: start this module with ``start_new_session=True`` and its output in
``DIR/host.log``; wait for ``host.json`` state ``ready`` (optional: assignments written earlier are
picked up at start); then :class:`job.shared.channel.HostFolder` ``assign``/``unassign`` and
``state``. The host writes its PID and process start time to ``host.json`` so that a supervisor that
restarts can adopt it.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from job.common.exits import how_it_ended
from job.shared.channel import ENDED, HostFolder
from job.shared.group import GROUPS, SPLIT_FILE, HostedGroup, Member, solo_key, split_members
from job.shared.hosted import HostedDagger

log = logging.getLogger("daggers.shared")

#: Exit code of a host whose Spark application was lost.
EXIT_APPLICATION_LOST = 3


class SharedHost:
    """The host's loop over one SparkSession (see the module docstring)."""

    def __init__(
        self,
        folder: Path,
        spark: Any,
        *,
        master: str = "local[*]",
        poll_s: float = 0.5,
        report_s: float = 5.0,
    ) -> None:
        self.folder = HostFolder(folder)
        self.spark = spark
        self.master = master
        self.poll_s = poll_s
        self.report_s = report_s  # seconds between two reports of host.json while nothing else changes
        self.daggers: dict[str, HostedDagger] = {}
        self._replacing: dict[str, HostedDagger] = {}  # old runs being stopped before their key restarts
        self.groups: dict[str, HostedGroup] = {}  # fused groups by group key (job.shared.fusion)
        self._regrouping: dict[str, HostedGroup] = {}  # old generations being stopped
        self._fusion: dict[tuple[str, str], tuple[str, Member] | None] = {}  # (key, token) -> (group, member)
        self._failed_fused: set[tuple[str, str]] = set()  # (key, token) of fused daggers that failed
        self._splits: dict[str, dict[str, str]] = {}  # group key -> its members (key -> token) apart, each
        # in a group of one, since its query failed (job.shared.group.SPLIT_FILE)
        self._comes_back: dict[tuple[str, str], bool] = {}  # (key, token) -> whether it may come back
        self.stopping = threading.Event()
        self._start_gate = threading.Lock()  # one query starts at a time
        self._jvm = getattr(spark.sparkContext._gateway, "proc", None)  # the JVM PySpark launched, if any
        self._first_round = True  # the runs a host process before this one left are settled in it
        self.fork_server_pid: int | None = None  # job.shared.forkserver, when it runs

    # ---- the application ------------------------------------------------------------------------

    def jvm_alive(self) -> bool:
        """Return whether the Spark application's JVM still runs and answers."""
        if self._jvm is not None and self._jvm.poll() is not None:
            return False
        try:
            return not self.spark.sparkContext._jsc.sc().isStopped()
        except Exception:  # py4j cannot reach the JVM
            return False

    def pools(self) -> list[str]:
        """Return the names of the FAIR pools Spark has created (a dagger's appears with its first job)."""
        try:
            pools = self.spark.sparkContext._jsc.sc().getAllPools()
            return sorted(str(pools.apply(i).name()) for i in range(pools.size()))
        except Exception:
            return []

    def _report(self, state: str, error: str | None = None) -> None:
        from job.stack.process import process_start_time

        running = sorted(
            [k for k, d in self.daggers.items() if not d.ended]
            + [k for g in self.groups.values() if not g.ended for k in g.members if k not in g.failed]
        )
        self.folder.report_host(
            pid=os.getpid(),
            start_time=process_start_time(os.getpid()),
            state=state,
            master=self.master,
            jvm_pid=getattr(self._jvm, "pid", None),
            error=error,
            fork_server_pid=self.fork_server_pid,
            daggers=running,
            pools=self.pools() if state == "ready" else [],
        )

    # ---- one round ------------------------------------------------------------------------------

    def _fused(self, key: str, want: dict[str, Any]) -> tuple[str, Member] | None:
        """Return (group key, member) of an assignment that runs fused, or None (it runs as a query of its
        own: not ``isolation: fused``, not fusible, or a spec that does not plan, whose error its own run
        reports). Planned once per token."""
        cache_key = (key, str(want["token"]))
        if cache_key not in self._fusion:
            from job.shared.fusion import fusion_key, why_not_fusible

            found = None
            try:
                from job.query.plan import plan
                from job.spec import load_spec

                spec = load_spec(Path(want["spec"]))
                if spec.isolation == "fused":
                    p = plan(spec, Path(want["state_dir"]))
                    why = why_not_fusible(p)
                    if why is None:
                        found = (fusion_key(p), Member(key, str(want["token"]), p))
                    else:
                        log.warning("%s: runs as a query of its own, not fused: %s", key, why)
            except Exception as exc:  # noqa: BLE001 - its own run reports the error
                log.info(
                    "%s: not fused (%s)", key, str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                )
            self._fusion = {k: v for k, v in self._fusion.items() if k[0] != key}
            self._fusion[cache_key] = found
        return self._fusion[cache_key]

    def reconcile(self) -> None:
        """Start, stop and replace daggers so that they match the assignments."""
        if self._first_round:  # before this process starts any run: every run not ended is an old one's
            end_left_over(self.folder)
            self._first_round = False
        wanted = self.folder.assignments()
        fused: dict[str, dict[str, Member]] = {}
        for key, want in list(wanted.items()):
            found = self._fused(key, want)
            if found is not None:
                fused.setdefault(found[0], {})[key] = found[1]
                del wanted[key]
        for key, old in list(self._replacing.items()):
            if old.ended:
                del self._replacing[key]
        for key, dagger in list(self.daggers.items()):
            assigned = wanted.get(key)
            if assigned is None or assigned["token"] != dagger.token:
                if not dagger.ended:
                    log.info(
                        "%s: %s",
                        key,
                        "unassigned" if assigned is None else f"replaced by {assigned['token']}",
                    )
                    dagger.request_stop()
                    self._replacing[key] = dagger
                del self.daggers[key]
        for key in self.folder.kills():
            asked = self.folder.kill_asked(key) or {}
            why, token = "its controller stopped it: it did not stop in time", str(asked.get("token"))
            stopping = self._replacing.get(key)
            # a fused member stops with its group's generation: a kill ends that generation
            leaving = [g for g in self._regrouping.values() if not g.ended and key in g.leaving]
            if stopping is None and not leaving:
                self.folder.killed(key)  # nothing of that key is stopping (any more)
            elif stopping is not None and stopping.token == token:
                stopping.abort(why)
            for group in leaving:
                group.abort(key, token, why)
        for key, want in wanted.items():
            if key in self.daggers or key in self._replacing:
                continue  # running, ended with this token, or its old run is still stopping
            log.info("%s: assigned (%s, token %s)", key, want["spec"], want["token"])
            dagger = HostedDagger(
                key,
                str(want["token"]),
                Path(want["spec"]),
                Path(want["state_dir"]),
                self.spark,
                self.folder,
                self.jvm_alive,
                self._start_gate,
            )
            self.daggers[key] = dagger
            dagger.start()
        self._reconcile_groups(fused)

    def _reconcile_groups(self, fused: dict[str, dict[str, Member]]) -> None:
        """Start, stop and replace generations of fused groups so that they match ``fused`` (group key ->
        member key -> member): a group whose members changed stops, then starts again with the new ones."""
        for gkey, old in list(self._regrouping.items()):
            if old.ended:
                del self._regrouping[gkey]
        # a member that failed stays failed until its token changes (as a dagger of its own does)
        for group in [*self.groups.values(), *self._regrouping.values()]:
            failed = (
                set(group.members) if group.state == "failed" and not group.went_apart else set(group.failed)
            )
            self._failed_fused |= {(k, group.members[k].token) for k in failed}
        fused = {
            g: left
            for g, ms in fused.items()
            if (left := {k: m for k, m in ms.items() if (k, m.token) not in self._failed_fused})
        }
        fused, parents = self._apart(fused)
        everywhere = {k: m.token for members in fused.values() for k, m in members.items()}
        for gkey, group in list(self.groups.items()):
            members = fused.get(gkey, {})
            tokens = {k: m.token for k, m in sorted(members.items())}
            if group.ended and tokens == group.tokens:
                continue  # failed with these members: the controller decides
            if group.ended and not tokens:
                del self.groups[gkey]  # its members failed with it, or went apart: nothing to stop
                continue
            if tokens != group.tokens:
                # those that go to another group (one of one, or back from one) are not stopping
                leaving = {k for k, t in group.tokens.items() if everywhere.get(k) != t}
                log.info("group %s: members change (%d leave, %d in all)", gkey, len(leaving), len(tokens))
                # the closed windows are written before a member stops for good; a deploy or an edit
                # does not wait for them (the next generation computes them again)
                group.request_stop(leaving, settle=any(k not in tokens for k in group.tokens))
                self._regrouping[gkey] = group
                del self.groups[gkey]
        for gkey, members in fused.items():
            if gkey in self.groups or gkey in self._regrouping:
                continue
            others = [g for g in [*self.groups.values(), *self._regrouping.values()] if not g.ended]
            busy = [
                k
                for k in members
                if k in self.daggers or k in self._replacing or any(k in g.members for g in others)
            ]
            if busy:
                continue  # wait until their queries elsewhere (their own, or another group's) have stopped
            group = HostedGroup(
                gkey,
                [members[k] for k in sorted(members)],
                self.spark,
                self.folder,
                self.jvm_alive,
                self._start_gate,
                parent=parents.get(gkey),
            )
            self.groups[gkey] = group
            group.start()

    def _apart(
        self, fused: dict[str, dict[str, Member]]
    ) -> tuple[dict[str, dict[str, Member]], dict[str, str]]:
        """Return ``fused`` (group key -> member key -> member) with each member of a split group (one whose
        query failed, :data:`job.shared.group.SPLIT_FILE`) in a group of one, and the group each such
        group of one split off (its key -> the group's). A split ends (see :meth:`_split_over`) once one
        of its members has failed, been removed or been edited: the others come back to the group."""
        for group in [*self.groups.values(), *self._regrouping.values()]:
            if group.split:
                self._splits[group.key], group.split = dict(group.split), {}
        out: dict[str, dict[str, Member]] = {}
        parents: dict[str, str] = {}
        for gkey, members in fused.items():
            if gkey not in self._splits:
                self._splits[gkey] = split_members(self.folder.root / GROUPS / gkey)
            if self._splits[gkey] and self._split_over(gkey, members):
                self._splits[gkey] = {}
            for key, member in members.items():
                if key in self._splits[gkey]:
                    solo = solo_key(gkey, key)
                    out[solo], parents[solo] = {key: member}, gkey
                else:
                    out.setdefault(gkey, {})[key] = member
        return out, parents

    def _split_over(self, gkey: str, members: dict[str, Member]) -> bool:
        """End the split of ``gkey`` and return True when a member of it is no longer there with the
        token it split with (it failed alone, or was removed or edited) and every member may come back:
        its rows can be told apart by window (:func:`job.shared.fusion.window_end_column`), or it keeps no
        window at all (a pass-through, which :mod:`job.shared.catchup` brings up to the others). The
        group's next generation takes them from their groups of one."""
        from job.shared.fusion import window_end_column

        split = self._splits[gkey]
        if all(key in members and members[key].token == token for key, token in split.items()):
            return False
        for key, member in members.items():
            if (key, member.token) not in self._comes_back:
                self._comes_back = {k: v for k, v in self._comes_back.items() if k[0] != key}
                self._comes_back[(key, member.token)] = (
                    member.plan.translation.window is None or window_end_column(member.plan) is not None
                )
        if not all(self._comes_back[(k, m.token)] for k, m in members.items()):
            return False
        gone = sorted(k for k, t in split.items() if k not in members or members[k].token != t)
        log.info(
            "group %s: %s no longer there as they split; the other %d come back together",
            gkey,
            ", ".join(gone),
            len(members),
        )
        (self.folder.root / GROUPS / gkey / SPLIT_FILE).unlink(missing_ok=True)
        return True

    def run(self) -> int:
        """Run until SIGTERM/SIGINT (exit code 0) or until the application is lost (exit code 3)."""
        log.info("shared host pid %d on %s, folder %s", os.getpid(), self.master, self.folder.root)
        reported = 0.0
        while not self.stopping.is_set():
            if not self.jvm_alive():
                return self._lost()
            self.reconcile()
            if time.monotonic() - reported > self.report_s or not reported:
                self._report("ready")
                reported = time.monotonic()
            self.stopping.wait(self.poll_s)
        self.shutdown()
        return 0

    def _lost(self) -> int:
        code = None
        if self._jvm is not None:
            try:  # its socket closes a moment before its exit status can be read (a loaded machine: longer)
                code = self._jvm.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                code = None
        how = how_it_ended(code, after_name=True) if code is not None else "exited"  # -9: killed, not exited
        error = f"the Spark application was lost (its JVM {how})"
        log.error("%s; exiting so that the daggers restart in a new application", error)
        self._report("exited", error)
        return EXIT_APPLICATION_LOST

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stop every dagger gracefully (in parallel) and wait for them."""
        for group in self.groups.values():
            group.request_stop(set(group.members))
        everyone: list[HostedDagger | HostedGroup] = [
            *self.daggers.values(),
            *self._replacing.values(),
            *self.groups.values(),
            *self._regrouping.values(),
        ]
        for dagger in everyone:
            if isinstance(dagger, HostedDagger):
                dagger.request_stop()
        deadline = time.monotonic() + timeout_s
        for dagger in everyone:
            dagger.join(max(deadline - time.monotonic(), 0.1))
        self._report("exited")


def end_left_over(folder: HostFolder) -> list[str]:
    """Report ``stopped`` for each run whose state file says it has not ended though no assignment asks for it
    (its key unassigned, or assigned with another token): a run of a host process before this one, which
    ended with that process. Before, a dagger unassigned while a restarted host still started Spark kept its
    dead host's ``running`` for good (the new host never took it): its controller waited for it to stop,
    killed it after ``stop_timeout_s`` (a kill the host dropped: nothing of that key was stopping) and the
    dagger read ``stopping`` until the host went. Call it only before this process starts any run.

    Returns the keys reported stopped."""
    assigned = folder.assignments()
    ended: list[str] = []
    for key, state in folder.states().items():
        token, want = str(state.get("token")), assigned.get(key) or {}
        if state.get("state") in ENDED or str(want.get("token")) == token:
            continue  # ended, or to be started again here
        kept = {
            k: v for k, v in state.items() if k not in ("key", "token", "state", "at", "error", "failure")
        }
        folder.report(key, token, "stopped", **kept)
        log.info("%s: its run %s ended with the host process before this one: stopped", key, token)
        ended.append(key)
    return ended


def build_host_session(master: str) -> Any:
    """Return the host's SparkSession: the daggers' usual settings, plus the FAIR scheduler."""
    from job.spark.session import build_session

    return build_session(
        "daggers-shared",
        master=master,
        extra={
            "spark.scheduler.mode": "FAIR",
            # Executors elsewhere run Spark's Python through the launcher too (job.shared.forkserver).
            "spark.executorEnv.DAGGERS_PYTHON": sys.executable,
            # Streaming queries each keep a few jobs' worth of UI state: keep less of it per application.
            "spark.sql.streaming.numRecentProgressUpdates": "20",
            "spark.ui.retainedJobs": "200",
            "spark.ui.retainedStages": "200",
            "spark.sql.ui.retainedExecutions": "50",
            # Generated classes are cached by their code: Spark's 100 entries are a few daggers' worth, and a
            # miss compiles the class again (Janino, then the JIT) in every micro-batch.
            "spark.sql.codegen.cache.maxEntries": "2000",
        },
    )


def host_master(master: str, cpus: int) -> str:
    """Return the Spark master a host runs on for the cluster's ``master``: ``local[*]`` becomes one task
    slot more than ``cpus``, so that with a heavy dagger's read capped at all slots but one
    (:func:`job.shared.hosted.heavy_task_cap`) a light dagger never waits for a slot. Measured with 100
    light daggers and a heavy one on 2 cores: light p99 34.6 s on ``local[2]``, 11.0 s on ``local[3]``. Any
    other master is kept as it is."""
    return f"local[{max(cpus, 1) + 1}]" if master.replace(" ", "") == "local[*]" else master


def main(argv: list[str] | None = None) -> int:
    """Run a host on the folder given; return its exit code (0, 2 when Spark cannot start, 3 when lost)."""
    parser = argparse.ArgumentParser(prog="python -m job.shared.host", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="The host's folder (assignments, states, host.json).")
    parser.add_argument(
        "--master",
        default="local[*]",
        help="Spark master: local[*] (one task slot more than the cores), local[N] or spark://host:port.",
    )
    parser.add_argument(
        "--poll", type=float, default=0.5, help="Seconds between two reads of the assignments."
    )
    parser.add_argument(
        "--report",
        type=float,
        default=5.0,
        help="Seconds between two reports of host.json (its daggers, its FAIR pools).",
    )
    parser.add_argument(
        "--no-fork-server",
        action="store_true",
        help="Start each query's Python source runner afresh (see job.shared.forkserver).",
    )
    args = parser.parse_args(argv)
    args.master = host_master(args.master, os.cpu_count() or 1)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s: %(message)s", datefmt="%H:%M:%S"
    )
    # py4j logs every call that a lost JVM breaks, with its traceback; the host reports the loss itself.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    folder = HostFolder(args.folder)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    folder.report_host(pid=os.getpid(), state="starting", master=args.master)
    end_left_over(folder)  # at once: a stop need not wait for Spark to start (the first round does it again)
    fork = None
    if not args.no_fork_server:
        from job.shared import forkserver

        fork = forkserver.start()
    try:
        spark = build_host_session(args.master)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        print(f"Spark error: cannot start the shared application: {first[:300]}", file=sys.stderr, flush=True)
        folder.report_host(pid=os.getpid(), state="exited", master=args.master, error=first[:300])
        return 2
    host = SharedHost(args.folder, spark, master=args.master, poll_s=args.poll, report_s=args.report)
    host.fork_server_pid = fork[0].pid if fork is not None else None
    host.stopping = stopping
    code = host.run()
    if code == EXIT_APPLICATION_LOST:
        os._exit(code)  # py4j and listener threads would wait for a JVM that is gone
    spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
