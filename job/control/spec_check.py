"""A spec checked as data: what a server may know of a spec without trusting it.

:func:`check_spec` is all a control-plane server runs on a spec a client sent (validate, create, edit,
check-edit, fusing). It reads the YAML within bounds (:mod:`job.check.yaml_load`), refuses secrets in
clear text (:mod:`job.check.secrets`), validates every field against the spec model, and translates the SQL
against the declared schema when the server holds that schema. It never

- reads the process's environment: a ``${NAME}`` stays a reference, except the cluster's own
  ``${DAGGERS_BOOTSTRAP}`` and ``${DAGGERS_INFLUX}``, whose values the registry holds;
- imports or runs anything the spec names (``udf_file``);
- reads a file or folder the spec names (``schema_file``, ``schema_dir``, ``checkpoint_dir``,
  ``dart_store``, ``ca_certs``);
- fetches an address the spec names (``schema_url``, sinks, lookups, brokers).

What it cannot check it reports in :attr:`CheckedSpec.deferred`: those checks run where the dagger runs
(:func:`job.query.plan.plan`, on the controller's host), with the host's variables resolved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from job.errors import SpecError
from job.query.plan import ENGINE_FEATURES, DaggerPlan, plan_with
from job.spec import REFERENCE_RE, DaggerSpec, parse_spec

#: The variables a cluster gives its daggers, resolved from the registry's cluster record.
CLUSTER_VARIABLES = ("DAGGERS_BOOTSTRAP", "DAGGERS_INFLUX")

# A checkpoint path that is never read (the checked plan only names folders inside it).
_NO_CHECKPOINT = Path("/nonexistent/daggers-check")


@dataclass(frozen=True)
class CheckedSpec:
    """A spec as a server knows it: the model (``${NAME}`` references left in its text fields), its plan
    on the server's schemas (None when the SQL can only be checked where the dagger runs; its checkpoint
    folder is a name only), the variables left for the host, and what is checked only there, each with
    the reason."""

    spec: DaggerSpec
    plan: DaggerPlan | None
    references: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)


def references_of(text: str) -> list[str]:
    """Return the names of the ``${NAME}`` references in ``text``, in order of first use."""
    names: list[str] = []
    for m in REFERENCE_RE.finditer(text):
        if m.group(1) not in names:
            names.append(m.group(1))
    return names


def _deferred(spec: DaggerSpec, references: list[str]) -> list[str]:
    from job.sql.calls import called_functions
    from job.sql.parse import parse

    out: list[str] = []
    schema = next((k for k in ("schema_file", "schema_dir", "schema_url") if getattr(spec, k)), None)
    if schema:
        out.append(f"the SQL against the schema of {schema}, which is read where the dagger runs")
    if spec.udf_file:
        out.append("the SQL's calls of udf_file's functions, which are loaded where the dagger runs")
    if called_functions(parse(spec.sql)) & {"dartget", "dartcontains"}:
        out.append(
            "the store of DartGet/DartContains (dart_store, or the host's DAGGERS_DART_STORE), which is "
            "read where the dagger runs"
        )
    if references:
        out.append(
            "the values of "
            + ", ".join("${" + n + "}" for n in references)
            + ", which are resolved where the dagger runs"
        )
    return out


def check_spec(text: str, cluster: Mapping[str, str], source: str = "spec") -> CheckedSpec:
    """Check spec ``text`` as data (see :func:`_check_spec`); a query nested too deep for the translator
    is a SqlError, not a RecursionError."""
    from job.errors import SqlError

    try:
        return _check_spec(text, cluster, source)
    except RecursionError:
        raise SqlError("the query is nested too deep") from None


def _check_spec(text: str, cluster: Mapping[str, str], source: str = "spec") -> CheckedSpec:
    """Check spec ``text`` as data for a cluster whose variables are ``cluster`` (``DAGGERS_BOOTSTRAP``,
    ``DAGGERS_INFLUX``; other keys are ignored).

    Raises SpecError (bounds, YAML, a clear secret, a field), SchemaError (an unknown proto class or
    field of the server's schemas) or SqlError (the query, with its line and column).
    """
    from job.control.specs import check_no_clear_secrets, raw_spec

    data = raw_spec(text, source)
    check_no_clear_secrets(data)
    known = {k: v for k, v in cluster.items() if k in CLUSTER_VARIABLES}
    spec = parse_spec(text, source, known, keep_unset=True)
    _require_carried_udf(spec)
    _refuse_relative_paths(spec, text, source)
    references = [n for n in references_of(text) if n not in known]
    deferred = _deferred(spec, references)  # parses the SQL: SqlError with line and column
    if any(getattr(spec, k) for k in ("schema_file", "schema_dir", "schema_url")) or spec.udf_file:
        return CheckedSpec(spec, None, references, deferred)
    from job.schema.registry import default_registry

    planned = plan_with(spec, default_registry(), None, dict(ENGINE_FEATURES), _NO_CHECKPOINT / spec.name)
    return CheckedSpec(spec, planned, references, deferred)


def _require_carried_udf(spec: DaggerSpec) -> None:
    """Refuse a ``udf_file`` relative to a spec file that did not come with the spec: the controller, on another
    host, would find no file beside its copy (an absolute one names a file on that host; a ``${NAME}`` is
    resolved there)."""
    udf = spec.udf_file
    if udf and not spec.udf_file_base64 and not Path(udf).is_absolute() and "${" not in udf:
        raise SpecError(
            f"udf_file: {udf!r} is relative to the spec file, but its content did not come with the spec "
            "(udf_file_base64): the dagger's controller would find no such file",
            hint="create or edit the dagger with daggers dagger create/edit SPEC, which sends the file beside "
            "the spec; or name a file on the controller's host with an absolute path",
        )


def _refuse_relative_paths(spec: DaggerSpec, text: str, source: str) -> None:
    """Refuse a ``schema_dir``, ``schema_file`` or ``dart_store`` relative to the spec file (``~`` is not
    expanded): the dagger's controller runs its own copy of the spec, in a folder of its own (on another host,
    perhaps), where no such path is (a ``udf_file`` is carried instead: :func:`_require_carried_udf`). The
    message names the field's line of ``text``."""
    for name in ("schema_dir", "schema_file", "dart_store"):
        value = getattr(spec, name)
        if not value or "${" in value or "://" in value or Path(value).is_absolute():
            continue
        where = "a file:// or http(s):// URL, or " if name == "dart_store" else ""
        line = next((n for n, row in enumerate(text.splitlines(), 1) if re.match(rf"{name}\s*:", row)), None)
        home = " ('~' is not expanded)" if value.startswith("~") else ""
        raise SpecError(
            f"{f'{source}:{line}: ' if line else ''}{name}: {value!r} is relative to the spec file{home}, which "
            "the dagger's controller does not run from: it would find no such path",
            hint=f"give {where}an absolute path on the controller's host"
            + (" (or schema_url: a compiled descriptor set at a URL)" if name != "dart_store" else ""),
        )


def served_spec(checked: CheckedSpec, cluster: Mapping[str, str], what: str) -> DaggerSpec:
    """Return the spec a server may preview: on the cluster's own brokers only, with nothing that runs
    code, reads a file or fetches an address the spec chose (no ``udf_file``, schema file/folder/URL,
    checkpoint folder, dart store, lookups, Spark or Kafka client settings, failover brokers; its sinks
    are never written by a preview).

    Raises SpecError naming what makes ``what`` impossible on the server.
    """
    spec = checked.spec
    if checked.plan is None:
        raise SpecError(
            f"{what} on the server needs the SQL checked against the server's schemas; it checks "
            "only where the dagger runs: " + "; ".join(checked.deferred),
            hint=_where_hint(what),
        )
    if any(d.startswith("the store of DartGet") for d in checked.deferred):
        raise SpecError(
            f"sql: {what} on the server cannot read DartGet/DartContains collections (a store of the "
            "dagger's host)",
            hint=_where_hint(what),
        )
    bootstrap = cluster.get("DAGGERS_BOOTSTRAP", "")
    for i, stream in enumerate(spec.streams):
        if _servers(stream.bootstrap_servers) != _servers(bootstrap):
            raise SpecError(
                f"streams[{i}].bootstrap_servers: {what} on the server reads only the cluster's "
                "brokers (${DAGGERS_BOOTSTRAP})",
                hint=_where_hint(what),
            )
    streams = [s.model_copy(update={"consumer_config": {}, "failover": None}) for s in spec.streams]
    served = spec.model_copy(
        update={
            "streams": streams,
            "checkpoint_dir": "",
            "dart_store": None,
            "lookups": [],
            "spark_conf": {},
            "udf_file": None,
        }
    )
    _require_no_references(served.model_dump(mode="json", exclude={"sinks"}), what)
    return served


def served_output_spec(checked: CheckedSpec, cluster: Mapping[str, str], sink: str | None) -> DaggerSpec:
    """Return the spec whose output a server may read: its sinks on the cluster's own InfluxDB
    (``${DAGGERS_INFLUX}``) only, with no variable in them. ``sink`` is the sink asked for, if any.

    Raises SpecError when no such sink is left, or ``sink`` is not one of them.
    """
    from job.spec import InfluxSinkSpec

    what = "reading the output"
    influx = cluster.get("DAGGERS_INFLUX", "").rstrip("/")
    kept = [
        k
        for k in checked.spec.sinks
        if isinstance(k, InfluxSinkSpec)
        and k.url.rstrip("/") == influx
        and k.username is None
        and k.password is None
        and k.token is None
        and not references_of(str(k.model_dump(mode="json")))
    ]
    names = {k.name or k.type for k in kept}
    if not kept or (sink is not None and sink not in names and not any(k.type == sink for k in kept)):
        raise SpecError(
            f"sinks: {what} on the server reads only sinks on the cluster's InfluxDB "
            "(${DAGGERS_INFLUX}) that need no credentials"
            + (
                f"; sink {sink!r} is not one"
                if sink and any((k.name or k.type) == sink or k.type == sink for k in checked.spec.sinks)
                else ""
            ),
            hint=_where_hint(what),
        )
    return checked.spec.model_copy(
        update={"sinks": kept, "lookups": [], "udf_file": None, "dart_store": None}
    )


def _where_hint(what: str) -> str:
    return f"do {what} where the dagger's variables and files are (the CLI on the registry, without --server)"


def _require_no_references(data: object, what: str) -> None:
    names = references_of(str(data))
    if names:
        raise SpecError(
            f"{what} on the server cannot resolve {', '.join('${' + n + '}' for n in names)}: "
            "the server reads no environment",
            hint=_where_hint(what),
        )


def _servers(bootstrap: str) -> list[str]:
    return sorted(p.strip() for p in bootstrap.split(",") if p.strip())
