"""Spec texts as the control plane handles them: validation against a cluster, the console's form,
the run file a controller writes, and the Kafka sink that "publish" adds.

The registry keeps each version as the YAML text the user gave, with ``${VAR}`` references left
unresolved, so secrets stay in the environment of the controller rather than in the database. A
literal password or token is refused (see :func:`check_no_clear_secrets`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from job.errors import DaggerError, SpecError, SqlError
from job.spec import DaggerSpec, parse_spec

ENV_BOOTSTRAP = "DAGGERS_BOOTSTRAP"
ENV_INFLUX = "DAGGERS_INFLUX"


def cluster_env(kafka_bootstrap: str, influx_url: str) -> dict[str, str]:
    """Return the variables a cluster gives its daggers: ``DAGGERS_BOOTSTRAP`` and ``DAGGERS_INFLUX``."""
    return {ENV_BOOTSTRAP: kafka_bootstrap, ENV_INFLUX: influx_url}


#: The control plane's own credentials in a controller's environment (the registry's URL and libpq password,
#: the controller's token and stored login). A dagger runs its team's code (``udf_file``) and resolves its
#: spec's ``${NAME}``s: neither may reach these.
CONTROL_SECRETS = ("DAGGERS_REGISTRY", "DAGGERS_TOKEN", "DAGGERS_CREDENTIALS", "PGPASSWORD", "PGPASSFILE")
#: A folder on the controller's host whose files are variables for the daggers: file ``NAME`` holds the value
#: of ``${NAME}`` (as secrets are mounted in a container), unless the environment sets NAME.
ENV_SECRETS_DIR = "DAGGERS_SECRETS_DIR"
_VARIABLE_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def dagger_env(environ: Mapping[str, str], cluster: Mapping[str, str]) -> dict[str, str]:
    """Return the environment a controller gives a dagger's process (and resolves its spec with): its own
    less :data:`CONTROL_SECRETS`, the variables of ``$DAGGERS_SECRETS_DIR``'s files, then ``cluster``'s."""
    env = {k: v for k, v in environ.items() if k not in CONTROL_SECRETS}
    folder = environ.get(ENV_SECRETS_DIR)
    if folder and Path(folder).is_dir():
        for path in sorted(Path(folder).iterdir()):
            if _VARIABLE_RE.match(path.name) and path.name not in CONTROL_SECRETS and path.is_file():
                env.setdefault(path.name, path.read_text().rstrip("\n"))
    return {**env, **cluster}


def raw_spec(text: str, source: str = "spec") -> dict[str, Any]:
    """Return the YAML mapping of ``text`` without resolving ``${VAR}``; raise SpecError if it is not one."""
    from job.check.yaml_load import load_yaml

    data = load_yaml(text, source)
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a dagger spec is a YAML mapping (name, streams, sql, sink)")
    return data


def check_no_clear_secrets(data: Mapping[str, Any]) -> None:
    """Refuse a spec that holds a secret in clear text (the registry stores the text): a password, token or
    key, URL user info or query credentials, a JAAS password, a PEM private key, a ``${VAR:-default}``
    whose default is one (:mod:`job.check.secrets`, the one detector of every entry point).

    Raises SpecError naming the fields, with a hint to use ``${VAR}``.
    """
    from job.check.secrets import check_clear_secrets

    check_clear_secrets(data)


def parse_text(text: str, env: Mapping[str, str], source: str = "spec") -> DaggerSpec:
    """Return the validated spec of ``text`` under ``env``; raise SpecError."""
    return parse_spec(text, source, dict(env))


class _Dumper(yaml.SafeDumper):
    """Writes multi-line strings (the SQL) as ``|`` blocks and keeps key order."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value:
        text = "\n".join(line.rstrip() for line in value.splitlines()) + (
            "\n" if value.endswith("\n") else ""
        )
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump(data: Mapping[str, Any]) -> str:
    """Return ``data`` as YAML, SQL as a literal block, keys in the given order."""
    text: str = yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)
    return text


def with_kafka_sink(
    text: str, topic: str, bootstrap_servers: str, *, fmt: str = "json", proto_class: str | None = None
) -> str:
    """Return ``text`` with one more sink that publishes the rows to Kafka ``topic`` (created if missing)
    as JSON objects, or as ``proto_class`` messages with ``fmt="protobuf"``.

    Raises ControlError when the spec already publishes to that topic.
    """
    from job.control.errors import ControlError

    data = raw_spec(text)
    sinks = [data.pop("sink")] if "sink" in data else list(data.get("sinks") or [])
    if any(isinstance(s, dict) and s.get("type") == "kafka" and s.get("topic") == topic for s in sinks):
        raise ControlError(f"the dagger already publishes to Kafka topic {topic!r}")
    sink: dict[str, Any] = {
        "type": "kafka",
        "bootstrap_servers": bootstrap_servers,
        "topic": topic,
        "format": fmt,
    }
    if proto_class:
        sink["proto_class"] = proto_class
    sink["create_topic"] = True
    sinks.append(sink)
    data["sinks"] = sinks
    return dump(data)


@dataclass
class DaggerForm:
    """The console's "new dagger" form: one stream, the SQL and the advanced options.

    :meth:`to_text` keeps everything of a ``base`` spec the form does not show (a second stream,
    consumer settings, extra sinks), so editing through the form loses nothing.
    """

    name: str = ""
    proto_class: str = ""
    topics: list[str] = field(default_factory=list)
    table: str = "data_stream"
    group: str = ""
    timestamp_field: str = "event_timestamp"
    bootstrap_servers: str = ""
    start_from: str = "earliest"
    sql: str = ""
    watermark_delay_ms: int = 10_000
    parallelism: int = 2
    trigger_interval_s: float = 5.0
    sink_type: str = "influx"
    influx_url: str = ""
    database: str = "daggers"
    measurement: str = ""
    isolation: str = "shared"  # shared: a query in the cluster's shared application; fused: one query with like daggers there; dedicated: its own
    light: bool = False  # the spec's ``light``: little data, read at window close, the light daggers' pool

    def default_group(self) -> str:
        """Return the consumer group a new dagger gets: ``dagger-<name>``."""
        return f"dagger-{self.name}" if self.name else ""

    def to_text(self, base: str | None = None) -> str:
        """Return the spec YAML of the form (on top of ``base``'s other settings, if given)."""
        data: dict[str, Any] = raw_spec(base) if base else {}
        streams = list(data.get("streams") or [{}])
        first = dict(streams[0]) if streams else {}
        first.update(
            {
                "table": self.table,
                "topics": list(self.topics),
                "proto_class": self.proto_class,
                "timestamp_field": self.timestamp_field,
                "bootstrap_servers": self.bootstrap_servers,
                "group": self.group or self.default_group(),
                "start_from": self.start_from,
            }
        )
        streams[0] = first
        sinks = [data.pop("sink")] if "sink" in data else list(data.get("sinks") or [])
        sink: dict[str, Any] = dict(sinks[0]) if sinks and isinstance(sinks[0], dict) else {}
        if self.sink_type == "influx":
            if sink.get("type") != "influx":
                sink = {"type": "influx"}
            sink.update(
                {
                    "url": self.influx_url,
                    "database": self.database,
                    "measurement": self.measurement or self.name.replace("-", "_"),
                }
            )
        else:
            sink = {"type": "log"}
        sinks = [sink, *sinks[1:]]
        out: dict[str, Any] = {
            "name": self.name,
            "streams": streams,
            "sql": self.sql.rstrip() + "\n",
            "watermark_delay_ms": self.watermark_delay_ms,
            "parallelism": self.parallelism,
            "trigger_interval_s": self.trigger_interval_s,
        }
        # written when set, or when the base spec had them (the spec's defaults are shared, not light)
        if self.isolation != "shared" or "isolation" in data:
            out["isolation"] = self.isolation
        if self.light or "light" in data:
            out["light"] = self.light
        for key, value in data.items():
            if key not in out and key not in ("sinks", "sink"):
                out[key] = value
        out["sinks"] = sinks
        return dump(out)

    @classmethod
    def from_text(cls, text: str) -> DaggerForm:
        """Return the form filled from a spec text (its first stream and first sink)."""
        data = raw_spec(text)
        stream = (data.get("streams") or [{}])[0] or {}
        sinks = [data["sink"]] if "sink" in data else list(data.get("sinks") or [])
        sink = sinks[0] if sinks and isinstance(sinks[0], dict) else {}
        return cls(
            name=str(data.get("name", "")),
            proto_class=str(stream.get("proto_class", "")),
            topics=[str(t) for t in stream.get("topics") or []],
            table=str(stream.get("table", "data_stream")),
            group=str(stream.get("group", "")),
            timestamp_field=str(stream.get("timestamp_field", "")),
            bootstrap_servers=str(stream.get("bootstrap_servers", "")),
            start_from=str(stream.get("start_from", "earliest")),
            sql=str(data.get("sql", "")),
            watermark_delay_ms=int(data.get("watermark_delay_ms", 10_000)),
            parallelism=int(data.get("parallelism", 2)),
            trigger_interval_s=float(data.get("trigger_interval_s", 5.0)),
            sink_type=str(sink.get("type", "influx")),
            influx_url=str(sink.get("url", "")),
            database=str(sink.get("database") or "daggers"),
            measurement=str(sink.get("measurement", "")),
            isolation=str(data.get("isolation") or "shared"),
            light=data.get("light") is True,
        )


def error_position(exc: DaggerError) -> tuple[int | None, int | None]:
    """Return the (line, column) in the SQL of a SqlError, else (None, None)."""
    if isinstance(exc, SqlError):
        return exc.line, exc.col
    return None, None
