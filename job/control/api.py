"""The control plane: every operation on daggers, as one user, checked and audited.

``ControlPlane(registry, user)`` is what the ``daggers`` subcommands and the console call; they add
no rights of their own. Daggers are named ``team/name`` (or ``name`` when it is unique among the
user's teams). An operation changes the registry only: the cluster's controller
(:mod:`job.control.controller`) sees the new desired state or version and makes it so.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session, selectinload

from job.control import handoff, specs
from job.control.admin import AdminOps
from job.control.errors import ConflictError, ControlError, NotFoundError, VersionConflictError
from job.control.health_model import HEALTHY, cluster_health
from job.control.models import AuditEntry, Cluster, Dagger, DaggerStatus, DaggerVersion, Sample, Team, now
from job.control.tokens import TokenOps
from job.control.views import (
    AuditView,
    Compatibility,
    DaggerScreenView,
    DaggerView,
    EditResult,
    SampleView,
    Validation,
    VersionView,
    judged,
)
from job.errors import DaggerError, SpecError, SqlError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from job.control.spec_check import CheckedSpec
    from job.output import Output, OutputQuery
    from job.query.preview import PreviewProgress
    from job.spec import DaggerSpec

#: States from which "deploy" or "restart" (re)starts counting crashes from zero.
_IDLE = ("created", "stopped", "failed", "crashed", "deleted")


class ControlPlane(AdminOps, TokenOps):
    """The operations on daggers of one registry, as user ``user``."""

    # ---- lookups ------------------------------------------------------------------------------

    def _find(self, s: Session, ref: str, need: str, action: str) -> Dagger:
        """Return the live dagger ``ref`` ("team/name" or "name") if the user has ``need`` in its team.

        Raises NotFoundError when it does not exist or is in a team the user is not in (the attempt
        is recorded), ConflictError when ``name`` is in several of the user's teams, and
        PermissionDeniedError when the role is too low.
        """
        team_name, _, name = ref.rpartition("/")
        query = select(Dagger).where(Dagger.name == name, Dagger.tombstone == 0)
        if team_name:
            query = query.join(Team).where(Team.name == team_name)
        found = list(s.scalars(query))
        visible = self._visible_teams(s)
        mine = [d for d in found if visible is None or d.team_id in visible]
        if not mine:
            if found:
                self._record_denied(action, found[0].team.name, f"dagger {ref}", "not a member of the team")
            raise NotFoundError(f"no dagger {ref!r} in your teams")
        if len(mine) > 1:
            raise ConflictError(
                f"{name!r} names a dagger in several of your teams "
                f"({', '.join(sorted(d.team.name for d in mine))}); write team/name"
            )
        dagger = mine[0]
        self._require(s, dagger.team, need, action, f"dagger {dagger.team.name}/{dagger.name}")
        return dagger

    def _current(self, s: Session, dagger: Dagger) -> DaggerVersion:
        return s.scalars(
            select(DaggerVersion).where(
                DaggerVersion.dagger_id == dagger.id, DaggerVersion.version == dagger.current_version
            )
        ).one()

    @staticmethod
    def _vars(cluster: Cluster) -> dict[str, str]:
        """Return the cluster's variables (``DAGGERS_BOOTSTRAP``, ``DAGGERS_INFLUX``), from the registry."""
        return specs.cluster_env(cluster.kafka_bootstrap, cluster.influx_url)

    def _check(self, cluster: Cluster, text: str, source: str) -> CheckedSpec:
        """Return ``text`` checked as data for ``cluster`` (:func:`job.control.spec_check.check_spec`: no environment,
        file, network or code); raise SpecError, SchemaError or SqlError."""
        from job.control.spec_check import check_spec

        return check_spec(text, self._vars(cluster), source)

    def _parse(self, cluster: Cluster, text: str, source: str) -> DaggerSpec:
        """Return the spec of ``text`` checked as data (see :meth:`_check`)."""
        return self._check(cluster, text, source).spec

    def _runnable(
        self, cluster: Cluster, text: str, source: str, what: str, sink: str | None = None
    ) -> DaggerSpec:
        """Return the spec of ``text`` as this process may run it for ``what`` (a preview, reading output).

        A plane that serves clients (``serves_clients``) resolves no variable but the cluster's and uses
        only the cluster's brokers and InfluxDB (:func:`job.control.spec_check.served_spec`); a plane in the user's
        own process (the CLI on a registry, the console) resolves the spec with its environment, as
        ``daggers run`` does. Raises SpecError, SchemaError or SqlError.
        """
        if self.serves_clients:
            from job.control.spec_check import served_output_spec, served_spec

            checked = self._check(cluster, text, source)
            if what == "reading the output":
                return served_output_spec(checked, self._vars(cluster), sink)
            return served_spec(checked, self._vars(cluster), what)
        import os

        from job.control.udf_carry import with_local_udf

        return with_local_udf(specs.parse_text(text, {**os.environ, **self._vars(cluster)}, source))

    # ---- reading ------------------------------------------------------------------------------

    def daggers(self, cluster: str | None = None, search: str | None = None) -> list[DaggerView]:
        """Return the live daggers the user may see (of one cluster, names containing ``search``), by name."""
        with self.registry.session() as s:
            # one query per relation instead of one per dagger (a console asks for this every second)
            query = (
                select(Dagger)
                .where(Dagger.tombstone == 0)
                .order_by(Dagger.name)
                .options(
                    selectinload(Dagger.status),
                    selectinload(Dagger.team),
                    selectinload(Dagger.cluster).selectinload(Cluster.datacentre),
                )
            )
            if cluster is not None:
                query = query.where(Dagger.cluster_id == self._cluster(s, cluster).id)
            visible = self._visible_teams(s)
            out = judged(
                s,
                [d for d in s.scalars(query) if visible is None or d.team_id in visible],
                self.health_settings,
                self.clock(),
            )
        if search:
            needle = search.lower()
            out = [d for d in out if needle in d.name or needle in d.team]
        return out

    def dagger(self, ref: str) -> DaggerView:
        """Return one dagger (see :meth:`_find` for the errors)."""
        with self.registry.session() as s:
            return judged(s, [self._find(s, ref, "viewer", "see")], self.health_settings, self.clock())[0]

    def dagger_screen(self, ref: str, samples: int = 120, audit: int = 50) -> DaggerScreenView:
        """Return what the console's dagger screen shows: the dagger, its last ``samples`` progress samples,
        its versions and its last ``audit`` audit entries (one request through a server)."""
        view = self.dagger(ref)
        return DaggerScreenView(
            dagger=view,
            samples=self.samples(view.ref, samples),
            versions=self.history(view.ref),
            audit=self.audit(audit, target=f"dagger {view.ref}"),
        )

    def fusible_with(self, ref: str) -> tuple[str, list[str]]:
        """Return the isolation of ``ref``'s current spec ("" when it does not parse), and the other daggers
        of its cluster that are to run (not dedicated) whose queries could be one with its own under
        ``isolation: fused`` (:mod:`job.control.fusing`). Raises as :meth:`_find`."""
        from job.control.fusing import Candidate, fusible_with, isolation_of

        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            cluster = d.cluster

            def candidate(x: Dagger) -> Candidate:
                text = self._current(s, x).spec_text
                return Candidate(f"{x.team.name}/{x.name}", text, self._vars(cluster))

            target = candidate(d)
            others = [
                candidate(x)
                for x in s.scalars(
                    select(Dagger).where(
                        Dagger.cluster_id == cluster.id,
                        Dagger.tombstone == 0,
                        Dagger.id != d.id,
                        Dagger.desired_state == "running",
                    )
                )
            ]
        return isolation_of(target), fusible_with(target, others)

    def samples(self, ref: str, limit: int = 120) -> list[SampleView]:
        """Return the dagger's last ``limit`` progress samples, oldest first."""
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            rows = s.scalars(
                select(Sample).where(Sample.dagger_id == d.id).order_by(Sample.at.desc()).limit(limit)
            )
            return [SampleView.of(r) for r in reversed(list(rows))]

    def moves(self, ref: str) -> list[AuditView]:
        """Return the dagger's moves between clusters (by hand and by failover), oldest first."""
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            rows = s.scalars(
                select(AuditEntry)
                .where(
                    AuditEntry.target == f"dagger {d.team.name}/{d.name}",
                    AuditEntry.action.in_(("move", "failover")),
                    AuditEntry.allowed.is_(True),
                    AuditEntry.at >= d.created_at,
                )
                .order_by(AuditEntry.id)
            )
            return [AuditView.of(r) for r in rows]

    def history(self, ref: str) -> list[VersionView]:
        """Return every spec version of the dagger, oldest first."""
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            return [VersionView.of(v) for v in d.versions]

    def version(self, ref: str, number: int | None = None) -> VersionView:
        """Return spec version ``number`` (default: the current one); raise NotFoundError."""
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            number = d.current_version if number is None else number
            v = next((v for v in d.versions if v.version == number), None)
            if v is None:
                raise NotFoundError(f"dagger {ref} has no version {number} (1..{d.current_version})")
            return VersionView.of(v)

    def diff(self, ref: str, a: int | None = None, b: int | None = None) -> str:
        """Return the unified diff of spec version ``a`` (default: the one before ``b``) to ``b`` (default:
        the current one); "" when they are the same."""
        ref = self.dagger(ref).ref
        new = self.version(ref, b)
        old = self.version(ref, a if a is not None else max(new.version - 1, 1))
        return "".join(
            difflib.unified_diff(
                old.spec_text.splitlines(keepends=True),
                new.spec_text.splitlines(keepends=True),
                fromfile=f"{ref} v{old.version}",
                tofile=f"{ref} v{new.version}",
            )
        )

    def audit(self, limit: int = 100, target: str | None = None) -> list[AuditView]:
        """Return the newest audit entries of the user's teams (all for a superuser), newest first."""
        with self.registry.session() as s:
            visible = self._visible_teams(s)
            names = (
                None
                if visible is None
                else {t.name for t in s.scalars(select(Team).where(Team.id.in_(visible)))}
            )
            query = select(AuditEntry).order_by(AuditEntry.id.desc())
            if target:
                query = query.where(AuditEntry.target.contains(target))
            out = []
            for row in s.scalars(query):
                if names is None or row.team in names:
                    out.append(AuditView.of(row))
                elif row.user == self.user:  # their own attempt on a team they are not in: not which team
                    out.append(replace(AuditView.of(row), team=None))
                if len(out) >= limit:
                    break
            return out

    # ---- validation and preview ---------------------------------------------------------------

    def validate(self, cluster: str, text: str) -> Validation:
        """Check a spec text for ``cluster`` (schemas, SQL) without Spark; never raises for a bad spec."""
        with self.registry.session() as s:
            c = self._cluster(s, cluster)
            try:
                checked = self._check(c, text, "spec")
            except DaggerError as exc:
                line, col = specs.error_position(exc)
                message = exc.reason if isinstance(exc, SqlError) else exc.message
                return Validation(
                    ok=False, title=exc.title, message=message, line=line, col=col, hint=exc.hint
                )
        if checked.plan is None:
            return Validation(ok=True, deferred=checked.deferred)
        t = checked.plan.translation
        return Validation(
            ok=True, columns=t.columns, window=list(t.window) if t.window else None, deferred=checked.deferred
        )

    def preview(
        self,
        ref: str,
        *,
        minutes: float = 5,
        limit: int = 100,
        spark: SparkSession | None = None,
        on_progress: Callable[[PreviewProgress], None] | None = None,
        spark_factory: Callable[[], SparkSession] | None = None,
    ) -> pa.Table:
        """Run the dagger's current SQL over the last ``minutes`` of its topics; return up to ``limit`` rows.

        Nothing is deployed and no consumer group is used (see :func:`job.query.preview.preview`). Without
        ``spark``, ``spark_factory`` makes the session, only once the role check and the spec have passed.
        """
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "preview")
            text, cluster = self._current(s, d).spec_text, d.cluster
            spec = self._runnable(cluster, text, f"{ref} v{d.current_version}", "a preview")
        return self._run_preview(spec, minutes, limit, spark, on_progress, spark_factory)

    def output(self, ref: str, query: OutputQuery, sink: str | None = None) -> Output:
        """Return the dagger's own output read back from its sink (:func:`job.output.read_output`): the sum
        of ``query.field`` per step, now and the periods it compares with. Raises as :meth:`_find`, and
        OutputError (no readable sink, an unknown field, the sink's server down)."""
        from job.output import read_output

        spec, name = self._spec_of(ref, sink)
        return read_output(spec, query, sink, dagger=name)

    def output_fields(self, ref: str, sink: str | None = None) -> list[str]:
        """Return the numeric fields the dagger's sink holds (what its output chart may show)."""
        from job.output import output_fields

        return output_fields(self._spec_of(ref, sink)[0], sink)

    def _spec_of(self, ref: str, sink: str | None = None) -> tuple[DaggerSpec, str]:
        """Return the dagger's current spec under its cluster's variables, and its team/name."""
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            text, cluster, name = self._current(s, d).spec_text, d.cluster, f"{d.team.name}/{d.name}"
            return self._runnable(
                cluster, text, f"{ref} v{d.current_version}", "reading the output", sink
            ), name

    def preview_text(
        self,
        cluster: str,
        text: str,
        *,
        minutes: float = 5,
        limit: int = 100,
        spark: SparkSession | None = None,
        on_progress: Callable[[PreviewProgress], None] | None = None,
        spark_factory: Callable[[], SparkSession] | None = None,
    ) -> pa.Table:
        """Preview a spec text that is not a dagger yet (the console's form), on ``cluster``'s brokers
        (``spark_factory``: as for :meth:`preview`)."""
        with self.registry.session() as s:
            c = self._cluster(s, cluster, "viewer", "preview on")
            spec = self._runnable(c, text, "preview", "a preview")
        return self._run_preview(spec, minutes, limit, spark, on_progress, spark_factory)

    @staticmethod
    def _run_preview(
        spec: DaggerSpec,
        minutes: float,
        limit: int,
        spark: SparkSession | None,
        on_progress: Callable[[PreviewProgress], None] | None = None,
        spark_factory: Callable[[], SparkSession] | None = None,
    ) -> pa.Table:
        from job.query.preview import preview

        if spark is None and spark_factory is not None:
            spark = spark_factory()  # after the role check and the spec's: a refused caller starts no Spark

        return preview(spec, minutes=minutes, limit=limit, spark=spark, on_progress=on_progress)

    def cluster_topics(self, cluster: str) -> list[str]:
        """Return the topics on the cluster's brokers (for the form's multi-select). Raises SourceError."""
        from job.control.health import list_topics

        return list_topics(self.cluster(cluster).kafka_bootstrap)

    def cluster_health(self, cluster: str, *, live: bool = False) -> dict[str, Any]:
        """Return the cluster's health: the probe its controller recorded (with ``age_s``), or, with ``live``,
        probed from here now; ``state`` is the health model's verdict over the probe, the controller's
        heartbeat and the daggers, and ``ok`` is True only when that verdict is healthy."""
        view = self.cluster(cluster)
        daggers = {"running": view.daggers_running, "total": view.daggers_total}
        states = [d.state for d in self.daggers(cluster)]
        at = self.clock()
        if live:
            from job.control.health import probe_cluster

            probe = probe_cluster(
                view.spark_master,
                view.spark_ui_url,
                view.kafka_bootstrap,
                view.influx_url,
                daggers_running=view.daggers_running,
                daggers_total=view.daggers_total,
            )
            verdict = cluster_health(view.controller_heartbeat, probe, at, states, at, self.health_settings)
            return {**probe, "ok": verdict.state == HEALTHY, "state": verdict.to_dict()}
        verdict = cluster_health(
            view.controller_heartbeat, view.health, view.health_at, states, at, self.health_settings
        )
        if view.health is None:
            return {
                "ok": False,
                "recorded": False,
                "error": "no controller has recorded health yet",
                "daggers": daggers,
                "state": verdict.to_dict(),
            }
        return {
            **view.health,
            "ok": verdict.state == HEALTHY,
            "recorded": True,
            "age_s": round(at - (view.health_at or 0.0), 1),
            "daggers": daggers,
            "state": verdict.to_dict(),
        }

    # ---- changes ------------------------------------------------------------------------------

    def create(self, cluster: str, text: str, *, deploy: bool = False, comment: str = "") -> DaggerView:
        """Create a dagger on ``cluster`` from spec ``text`` (version 1); deploy it at once with ``deploy``.

        Raises SpecError/SchemaError/SqlError for a spec that cannot run, ConflictError when the team
        has a dagger of that name, PermissionDeniedError below editor.
        """
        with self.registry.session() as s:
            c = self._cluster(s, cluster, "editor", "create daggers on")
            spec = self._parse(c, text, "spec")
            taken = s.scalar(
                select(Dagger).where(
                    Dagger.team_id == c.team_id, Dagger.name == spec.name, Dagger.tombstone == 0
                )
            )
            if taken is not None:
                raise ConflictError(
                    f"team {c.team.name} already has a dagger {spec.name!r} (on cluster {taken.cluster.name})"
                )
            d = Dagger(
                name=spec.name,
                team_id=c.team_id,
                cluster_id=c.id,
                current_version=1,
                desired_state="running" if deploy else "stopped",
                created_by=self.user,
            )
            d.versions.append(
                DaggerVersion(
                    version=1, spec_text=text, checkpoint_epoch=1, comment=comment, created_by=self.user
                )
            )
            d.status = DaggerStatus(actual_state="pending" if deploy else "created")
            s.add(d)
            self._audit(
                s,
                "create",
                c.team.name,
                f"dagger {c.team.name}/{spec.name}",
                {"cluster": cluster, "version": 1, "deploy": deploy},
            )
            if deploy:
                self._audit(s, "deploy", c.team.name, f"dagger {c.team.name}/{spec.name}", {"version": 1})
            s.flush()
            s.refresh(d)
            return DaggerView.of(d)

    def _set_desired(
        self, ref: str, action: str, desired: str, need: str = "editor", restart: bool = False
    ) -> DaggerView:
        with self.registry.session() as s:
            d = self._find(s, ref, need, action)
            before = d.desired_state
            d.desired_state = desired
            d.updated_at = now()
            if restart:
                d.restart_generation += 1
            st = d.status or DaggerStatus(actual_state="created")
            d.status = st
            if desired == "running" and (restart or st.actual_state in _IDLE):
                st.restarts, st.next_restart_at = 0, None
                if st.actual_state in _IDLE:
                    st.actual_state = "pending"
            if desired == "deleted":
                d.tombstone = d.id
                if st.actual_state in ("created", "stopped", "failed"):
                    st.actual_state = "deleted"
            self._audit(
                s,
                action,
                d.team.name,
                f"dagger {d.team.name}/{d.name}",
                {"desired_before": before, "desired": desired, "version": d.current_version},
            )
            s.flush()
            return DaggerView.of(d)

    def deploy(self, ref: str) -> DaggerView:
        """Ask the controller to run the dagger's current version."""
        return self._set_desired(ref, "deploy", "running")

    def stop(self, ref: str) -> DaggerView:
        """Ask the controller to stop the dagger gracefully (it resumes from its checkpoint on deploy)."""
        return self._set_desired(ref, "stop", "stopped")

    def restart(self, ref: str) -> DaggerView:
        """Ask the controller to stop and start the dagger (and to forget earlier crashes)."""
        return self._set_desired(ref, "restart", "running", restart=True)

    def delete(self, ref: str) -> DaggerView:
        """Stop and delete the dagger (team admin). Its versions and audit trail stay; the name is free again."""
        return self._set_desired(ref, "delete", "deleted", need="admin")

    def move(self, ref: str, cluster: str, *, reason: str | None = None) -> DaggerView:
        """Move the dagger to ``cluster``, another cluster of its team (editors and admins).

        The old cluster's controller stops it gracefully; the new one starts it from the same checkpoint
        once the old one has (see :mod:`job.control.handoff`), so totals continue. The checkpoint folder
        must be reachable from both clusters at the same path (shared storage); when it is not, the new
        cluster does not start the dagger and marks it failed with an error saying so.
        Raises ControlError for a cluster of another team, ConflictError when the dagger is already there
        or still moving, NotFoundError/PermissionDeniedError as :meth:`_find`.
        """
        with self.registry.session() as s:
            d = self._find(s, ref, "editor", "move")
            target = self._cluster(s, cluster, "editor", "move daggers to")
            source = handoff.relocate(d, target, now())
            self._audit(
                s,
                "move",
                d.team.name,
                f"dagger {d.team.name}/{d.name}",
                {
                    "from": source,
                    "to": target.name,
                    "reason": reason or "",
                    "desired": d.desired_state,
                    "version": d.current_version,
                },
            )
            s.flush()
            s.expire(d, ["cluster", "moving_from"])
            return DaggerView.of(d)

    def check_edit(self, ref: str, text: str) -> Compatibility:
        """Return whether ``text`` could resume from the dagger's current checkpoint (changes nothing)."""
        with self.registry.session() as s:
            d = self._find(s, ref, "viewer", "see")
            old = self._old(d.cluster, self._current(s, d).spec_text)
            new = self._parse(d.cluster, text, "spec")
            from job.control.compat import compatibility  # sqlglot and job.sql: 0.3 s a CLI process

            return compatibility(old, new)

    def edit(
        self,
        ref: str,
        text: str,
        *,
        expected_version: int | None = None,
        allow_fresh_start: bool = False,
        comment: str = "",
        action: str = "edit",
    ) -> EditResult:
        """Make ``text`` the dagger's next spec version; a running dagger rolls over to it.

        The version resumes from the current checkpoint when Spark allows it (see
        :mod:`job.control.compat`); otherwise it needs ``allow_fresh_start`` and gets a new checkpoint.
        Raises ConflictError when the current version is not ``expected_version`` (someone else edited),
        when nothing changed, or when a fresh start is needed but not allowed; SpecError when the name
        changes; SpecError/SchemaError/SqlError for a spec that cannot run.
        """
        with self.registry.session() as s:
            d = self._find(s, ref, "editor", action)
            if expected_version is not None and expected_version != d.current_version:
                raise self._stale(ref, d.current_version, expected_version)
            cur = self._current(s, d)
            if cur.spec_text.strip() == text.strip():
                raise ConflictError(f"version {cur.version} of {ref} already is this spec: nothing to change")
            new = self._parse(d.cluster, text, "spec")
            if new.name != d.name:
                raise SpecError(
                    f"name: a dagger keeps its name ({d.name}); create a new dagger for {new.name!r}"
                )
            old = self._old(d.cluster, cur.spec_text)
            from job.control.compat import compatibility

            compat = compatibility(old, new)
            if not compat.resume and not allow_fresh_start:
                raise ConflictError(
                    f"version {cur.version + 1} of {ref} {compat.summary()}",
                    hint="allow a fresh start (--fresh-start): a new checkpoint, empty window "
                    "state and counters, and the streams' start_from apply",
                )
            epoch = cur.checkpoint_epoch if compat.resume else cur.checkpoint_epoch + 1
            version = cur.version + 1
            # compare-and-set: of two edits from the same version, exactly one moves the dagger on
            moved = cast(
                CursorResult[Any],
                s.execute(  # an UPDATE answers with a cursor result
                    update(Dagger)
                    .where(Dagger.id == d.id, Dagger.current_version == cur.version)
                    .values(current_version=version, updated_at=now())
                    .execution_options(synchronize_session=False)
                ),
            ).rowcount
            if moved != 1:
                s.rollback()
                raise self._stale(ref, self.dagger(ref).current_version, cur.version)
            s.add(
                DaggerVersion(
                    dagger_id=d.id,
                    version=version,
                    spec_text=text,
                    checkpoint_epoch=epoch,
                    comment=comment,
                    created_by=self.user,
                )
            )
            st = d.status
            if d.desired_state == "running" and st is not None and st.actual_state in ("failed", "crashed"):
                # the controller leaves a failed dagger alone: a new version to run is a new start, as a deploy
                st.restarts, st.next_restart_at, st.actual_state = 0, None, "pending"
            self._audit(
                s,
                action,
                d.team.name,
                f"dagger {d.team.name}/{d.name}",
                {
                    "version": version,
                    "resume": compat.resume,
                    "reasons": compat.reasons,
                    "notes": compat.notes,
                    "comment": comment,
                },
            )
            return EditResult(
                ref=f"{d.team.name}/{d.name}",
                version=version,
                checkpoint_epoch=epoch,
                compatibility=compat,
                redeploys=d.desired_state == "running",
            )

    def _old(self, cluster: Cluster, text: str) -> DaggerSpec:
        """Return a stored version's spec as data (fields only: it was checked when it was stored)."""
        from job.spec import parse_spec

        return parse_spec(text, "current version", self._vars(cluster), keep_unset=True)

    @staticmethod
    def _stale(ref: str, current: int, expected: int) -> VersionConflictError:
        return VersionConflictError(
            f"dagger {ref} is at version {current}, not {expected}: someone changed it meanwhile",
            current_version=current,
            hint="reload it and edit again",
        )

    def rollback(self, ref: str, to_version: int, *, allow_fresh_start: bool = False) -> EditResult:
        """Make version ``to_version``'s spec the next version (history is never rewritten)."""
        old = self.version(ref, to_version)
        return self.edit(
            ref,
            old.spec_text,
            allow_fresh_start=allow_fresh_start,
            comment=f"rollback to v{to_version}",
            action="rollback",
        )

    def publish_to_kafka(
        self,
        ref: str,
        topic: str,
        *,
        bootstrap_servers: str | None = None,
        fmt: str = "json",
        proto_class: str | None = None,
    ) -> EditResult:
        """Add a Kafka sink writing the dagger's rows to ``topic`` (default brokers: the cluster's; JSON, or
        ``proto_class`` messages with ``fmt="protobuf"``) as a new version, which resumes from the
        checkpoint. Raises ControlError for a bad topic name or one the dagger already publishes to."""
        if not topic or any(ch in topic for ch in " /\\,:\"'"):
            raise ControlError(f"topic {topic!r} is not a valid Kafka topic name")
        dagger = self.dagger(ref)
        cur = self.version(dagger.ref)
        bootstrap = bootstrap_servers or self.cluster(dagger.cluster).kafka_bootstrap
        text = specs.with_kafka_sink(cur.spec_text, topic, bootstrap, fmt=fmt, proto_class=proto_class)
        return self.edit(
            dagger.ref,
            text,
            expected_version=cur.version,
            comment=f"publish to kafka {topic}",
            action="publish",
        )
