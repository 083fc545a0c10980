"""The dagger spec: what a user writes in YAML, validated by pydantic.

Every bad value is reported with the path of its field (``streams[0].topics``) and, when the spec
came from a YAML file, the line it is on.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from job.errors import SourceError, SpecError
from job.names import DAGGER_NAME_RE

NAME_RE = DAGGER_NAME_RE  # \A…\Z: "pg-var\n" is no name
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Model(BaseModel):
    # NaN and ±Infinity are never a setting (YAML's .nan, .inf, 1.0e400)
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


#: A ``${NAME}`` or ``${NAME:-default}`` reference to a variable of the host the dagger runs on. A default holds
#: no ``$`` (no nested reference): each match then stops at the next ``$``, so a line of 256 KiB of unclosed
#: ``${A:-`` takes linear time, not quadratic.
REFERENCE_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^$}]*))?\}")


def has_reference(value: str) -> bool:
    """Return whether ``value`` holds a ``${NAME}`` reference. After :func:`interpolate_env` none is left,
    so only a spec checked as data (:mod:`job.control.spec_check`) has them: a value with one is checked where the
    dagger runs, once the reference is resolved."""
    return "${" in value and REFERENCE_RE.search(value) is not None


# ---- transformers (steps on a stream before the SQL, or on the SQL's result) -----------------

class DeduplicateTransformer(_Model):
    """Drops a record when a record with the same key was kept less than ``ttl_s`` earlier (event time)."""

    type: Literal["deduplicate"]
    keys: list[str] = Field(min_length=1, description="The columns whose values together are the record's key.")
    ttl_s: int = Field(ge=1, le=30 * 86400,
                       description="How long (seconds of event time) a key is remembered after its first record.")

    @field_validator("keys")
    @classmethod
    def _keys(cls, v: list[str]) -> list[str]:
        return _check_columns(v) or v


class InvalidRecordFilter(_Model):
    """Drops records that miss a required value, fall outside a range, or fail a condition."""

    type: Literal["invalid_record_filter"]
    required: list[str] = Field(
        default_factory=list, description="Columns that must have a value: not NULL, not '' and not NaN.")
    ranges: dict[str, tuple[float | None, float | None]] = Field(
        default_factory=dict, description="Column -> [min, max], both inclusive (null: unbounded).")
    where: str | None = Field(
        default=None, validate_default=True,
        description="A Spark SQL condition a valid record satisfies, e.g. \"status <> 'UNKNOWN'\".")

    @field_validator("required")
    @classmethod
    def _required(cls, v: list[str]) -> list[str]:
        return _check_columns(v) or v

    @field_validator("ranges")
    @classmethod
    def _ranges(cls, v: dict[str, tuple[float | None, float | None]]) -> dict[str, tuple[float | None, float | None]]:
        for name, (low, high) in v.items():
            if not IDENT_RE.match(name):
                raise ValueError(f"{name!r} is not a column name (letters, digits, _)")
            if low is not None and high is not None and low > high:
                raise ValueError(f"{name}: the minimum {low} is above the maximum {high}")
        return v

    @field_validator("where")
    @classmethod
    def _where(cls, v: str | None, info: Any) -> str | None:
        if v is not None:
            from job.errors import SqlError
            from job.sql.parse import parse_condition
            from job.sql.validate import check_functions

            tree = None
            try:
                tree = parse_condition(v)
                check_functions(tree)
            except SqlError as exc:
                where = "" if tree is None else f" (in the condition {v[:200]!r})"
                raise ValueError(f"{exc.reason}{where}") from None
        if v is None and not info.data.get("required") and not info.data.get("ranges"):
            raise ValueError("give at least one of required, ranges or where")
        return v


class HashTransformer(_Model):
    """Replaces the values of columns by their SHA-256 (hex), e.g. to mask personal data."""

    type: Literal["hash"]
    columns: list[str] = Field(min_length=1, description="The columns to hash (their values become 64 hex digits).")

    @field_validator("columns")
    @classmethod
    def _columns(cls, v: list[str]) -> list[str]:
        return _check_columns(v) or v


TransformerSpec = Annotated[DeduplicateTransformer | InvalidRecordFilter | HashTransformer,
                            Field(discriminator="type")]
TRANSFORMER_TYPES = ("deduplicate", "invalid_record_filter", "hash")


def transformer_columns(transformers: list[TransformerSpec]) -> set[str]:
    """Return the columns that ``transformers`` read (a source must decode them even if the SQL does not)."""
    out: set[str] = set()
    for t in transformers:
        if isinstance(t, DeduplicateTransformer):
            out |= set(t.keys)
        elif isinstance(t, HashTransformer):
            out |= set(t.columns)
        else:
            out |= set(t.required) | set(t.ranges)
    return out


class FailoverSpec(_Model):
    """A secondary Kafka cluster that mirrors the stream's topics (e.g. with MirrorMaker), to read from
    when the primary is lost. It must hold the same records with the same timestamps (CreateTime);
    its offsets may differ. The dagger moves once and never moves back by itself."""

    bootstrap_servers: str = Field(description="The secondary cluster's bootstrap servers, host:port[,host:port].")
    after_s: float = Field(
        default=30.0, gt=0,
        description="How long the primary must be unreachable before the dagger moves to the secondary "
                    "(less than the stream's max_outage_s).")

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, v: str) -> str:
        return _check_bootstrap(v)


class StreamSpec(_Model):
    """One input stream, seen by the SQL as a table."""

    table: str = Field(description="The name the SQL uses for this stream (FROM `table`).")
    topics: list[str] = Field(min_length=1, description="Kafka topics read into this table (a union).")
    proto_class: str = Field(description="Full name of the protobuf message, e.g. daggers.events.BookingLog.")
    timestamp_field: str = Field(description="The Timestamp field that is the event time (rowtime in SQL).")
    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port].")
    group: str = Field(description="Consumer group name shown in monitoring (offsets live in the checkpoint).")
    start_from: str = Field(
        default="earliest",
        description="Where a new job starts: earliest, latest, or a time (ISO 8601 with zone, or epoch ms).")
    bad_records: Literal["fail", "skip", "dead-letter"] = Field(
        default="skip",
        description="A record that does not decode: fail stops the job naming topic/partition/offset; "
                    "skip leaves it out, counts it and keeps its bytes under the checkpoint; dead-letter "
                    "also publishes it (raw bytes, with topic/partition/offset/error headers) to "
                    "dead_letter_topic.")
    dead_letter_topic: str | None = Field(
        default=None, description="Topic for bad records with bad_records: dead-letter "
                                  "(default: <dagger name>-<table>-dead-letter), on the same cluster.")
    max_outage_s: float = Field(
        default=600.0, gt=0, description="How long the broker may be unreachable before the job stops "
                                         "with an error; until then it waits and retries.")
    max_records_per_batch: int = Field(
        default=4_000_000, ge=0,
        description="Records per micro-batch at most, shared across partitions (0: all). A live stream's batches hold "
                    "what arrived since the last one; this bounds a batch only while the dagger catches up, and "
                    "larger ones catch up faster: each batch reads and rewrites the state of every window key it "
                    "touches once (BENCHMARKS.md, sixth session).")
    consumer_config: dict[str, str] = Field(
        default_factory=dict, description="Extra librdkafka settings (e.g. security.protocol); none that loads "
                                          "or runs code (plugin.library.paths, sasl.kerberos.kinit.cmd, …).")
    failover: FailoverSpec | None = Field(
        default=None,
        description="A secondary cluster mirroring the topics: when the primary has been unreachable for "
                    "after_s, the dagger continues there from the last record it read (by timestamp); "
                    "never back automatically.")
    transformers: list[TransformerSpec] = Field(
        default_factory=list,
        description="Steps on this stream's records after its watermark and before the SQL, in order "
                    "(deduplicate, invalid_record_filter, hash).")

    def transformer_columns(self) -> set[str]:
        """Return the columns this stream's transformers read (the source must decode them too)."""
        return transformer_columns(self.transformers)

    @field_validator("table", "timestamp_field")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not IDENT_RE.match(v):
            raise ValueError(f"{v!r} is not a plain identifier (letters, digits, _)")
        return v

    @field_validator("start_from", mode="before")
    @classmethod
    def _start_text(cls, v: Any) -> Any:
        """YAML reads an unquoted time as a datetime and a number as an int: take both."""
        from datetime import datetime

        if isinstance(v, datetime):
            return v.isoformat()
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)
        return v

    @field_validator("start_from")
    @classmethod
    def _start(cls, v: str) -> str:
        from job.sources.offsets import parse_start_time

        if v.strip().lower() in ("earliest", "latest"):
            return v.strip().lower()
        try:
            parse_start_time(v)
        except SourceError as exc:
            raise ValueError(exc.message) from None
        return v

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, v: str) -> str:
        return _check_bootstrap(v)

    @field_validator("consumer_config")
    @classmethod
    def _consumer_config(cls, v: dict[str, str]) -> dict[str, str]:
        return _check_client_settings(v)

    @field_validator("failover")
    @classmethod
    def _failover(cls, v: FailoverSpec | None, info: Any) -> FailoverSpec | None:
        max_outage_s, primary = info.data.get("max_outage_s"), info.data.get("bootstrap_servers")
        if v is not None and max_outage_s is not None and v.after_s >= max_outage_s:
            raise ValueError(f"after_s ({v.after_s:g}) must be less than max_outage_s ({max_outage_s:g}), "
                             "or the job stops before it fails over")
        if v is not None and primary is not None and v.bootstrap_servers.strip() == primary.strip():
            raise ValueError("bootstrap_servers names the primary cluster itself")
        return v


def _check_bootstrap(v: str) -> str:
    """Return ``v`` when every comma-separated part is ``host:port`` (or holds a ``${NAME}`` reference);
    raise ValueError naming the bad part."""
    for part in v.split(","):
        if has_reference(part):
            continue
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"{part.strip()!r} is not host:port")
    return v


#: librdkafka settings that load a library, run a command or replace the client's own callbacks: a spec's
#: Kafka client settings may not name them (a spec is data; these would make it code, in the dagger's and the
#: controller's processes).
CODE_KAFKA_SETTINGS = frozenset({
    "plugin.library.paths", "sasl.kerberos.kinit.cmd", "ssl.engine.location", "ssl.engine.id",
    "oauthbearer_token_refresh_cb", "error_cb", "throttle_cb", "stats_cb", "log_cb", "on_delivery",
    "default.topic.config", "interceptor",
})


def _check_client_settings(v: dict[str, Any]) -> dict[str, Any]:
    """Return ``v`` when it names no setting of :data:`CODE_KAFKA_SETTINGS`; raise ValueError naming one."""
    for key in v:
        if str(key).strip().lower() in CODE_KAFKA_SETTINGS:
            raise ValueError(f"{key!r} loads or runs code: a dagger's Kafka settings may not set it")
    return v


def _check_columns(v: list[str] | None) -> list[str] | None:
    """Return ``v`` when its names are plain identifiers without repeats; raise ValueError otherwise."""
    if v is None:
        return v
    for name in v:
        if not IDENT_RE.match(name):
            raise ValueError(f"{name!r} is not a column name (letters, digits, _)")
    if len(set(v)) != len(v):
        raise ValueError(f"a column is named twice in {v}")
    return v


class _SinkModel(_Model):
    """Settings every sink has."""

    name: str | None = Field(
        default=None,
        description="The sink's name in metrics and logs (default: its type, numbered when a dagger has "
                    "several sinks of one type).")

    @field_validator("name")
    @classmethod
    def _sink_name(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.match(v):
            raise ValueError(f"{v!r} must be 2-63 lower-case letters, digits or dashes, starting with a letter")
        return v


class _RetryingSinkModel(_SinkModel):
    """Settings of a sink that writes over the network and retries a failed write."""

    max_backoff_s: float = Field(
        default=30.0, gt=0, le=3600,
        description="The longest wait between two retries of a failed write: the wait starts at 0.5 s and "
                    "doubles, times a jitter of 0.5-1.5, never more than this. Lower: back sooner after a short outage; "
                    "higher: less load on a server that is struggling.")


class InfluxSinkSpec(_RetryingSinkModel):
    """Writes each row as an InfluxDB point: window_timestamp is the time, tag_*/label_* are tags."""

    type: Literal["influx"]
    url: str = Field(default="http://127.0.0.1:8086", description="InfluxDB base URL.")
    api: Literal["v1", "v2"] = Field(
        default="v1", description="v1: line protocol on /write (InfluxDB 1.x); v2: /api/v2/write (1.8+, 2.x, 3.x).")
    database: str | None = Field(default=None, description="v1: the database to write to.")
    retention_policy: str | None = Field(default=None, description="v1: the retention policy (default: the db's).")
    bucket: str | None = Field(default=None, description="v2: the bucket.")
    org: str | None = Field(default=None, description="v2: the organisation.")
    token: SecretStr | None = Field(default=None, description="v2: the API token (never logged).")
    username: str | None = Field(default=None, description="v1: user name, if auth is on.")
    password: SecretStr | None = Field(default=None, description="v1: password (never logged).")
    measurement: str = Field(description="The measurement the points go to.")
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Points per HTTP write.")
    write_concurrency: int = Field(
        default=2, ge=1, le=16,
        description="HTTP writes of one micro-batch in flight at once (a batch with many windows to write, "
                    "as when a dagger catches up, is written sooner; InfluxDB ingests them in parallel).")
    flush_interval_ms: int = Field(default=1000, ge=0, description="Longest wait before a partial batch is sent.")
    max_retries: int = Field(default=15, ge=0, description="Retries of a failed write, with exponential back-off up to max_backoff_s (15 at the default 30 s: about 2.5 to 5.5 minutes in all, so an InfluxDB restart does not stop the job).")
    timeout_s: float = Field(default=30.0, gt=0, description="Seconds one HTTP write may take before it is retried.")
    create_database: bool = Field(default=False, description="v1: create the database when it is missing.")

    @model_validator(mode="after")
    def _target(self) -> InfluxSinkSpec:
        if self.api == "v1" and not self.database:
            raise ValueError("api v1 needs database")
        if self.api == "v2" and not self.bucket:
            raise ValueError("api v2 needs bucket")
        return self


class LogSinkSpec(_SinkModel):
    """Prints rows to the console, for debugging."""

    type: Literal["log"]
    max_rows: int = Field(default=50, ge=1, description="Rows printed per micro-batch at most.")


class KafkaSinkSpec(_RetryingSinkModel):
    """Publishes each row as one Kafka record, for applications (fraud rules, campaign triggers).

    The value is the row encoded as a protobuf message (columns → fields by name) or as JSON; the
    key is built from ``key_columns``; the record's timestamp is the row's window_timestamp.
    """

    type: Literal["kafka"]
    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port].")
    topic: str = Field(min_length=1, max_length=249, description="The topic the records go to.")
    format: Literal["protobuf", "json"] = Field(
        default="protobuf",
        description="protobuf: the row as a proto_class message (columns → fields by name); json: a JSON object.")
    proto_class: str | None = Field(
        default=None, description="protobuf: full name of the output message, e.g. daggers.aggregates.BookingAggregate.")
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns that make the record key (one: its text; several: a JSON object). Default: "
                    "window_timestamp and the tag_*/label_* columns; []: no key.")
    create_topic: bool = Field(default=False, description="Create the topic when it is missing.")
    partitions: int = Field(default=4, ge=1, le=10_000, description="Partitions of a topic this sink creates.")
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        default="lz4", description="Compression of record batches.")
    linger_ms: int = Field(default=20, ge=0, le=60_000,
                           description="How long the producer waits to fill a batch before sending it.")
    batch_size: int = Field(default=10_000, ge=1, le=1_000_000, description="Records per producer batch at most.")
    delivery_timeout_ms: int = Field(
        default=30_000, ge=1000,
        description="How long the producer keeps retrying one delivery (librdkafka message.timeout.ms).")
    max_retries: int = Field(
        default=5, ge=0, description="Rounds of sending again the records whose delivery failed, with back-off.")
    producer_config: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Extra librdkafka producer settings (e.g. security.protocol, sasl.password); never logged; "
                    "none that loads or runs code (plugin.library.paths, sasl.kerberos.kinit.cmd, …).")

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, v: str) -> str:
        return _check_bootstrap(v)

    @field_validator("producer_config")
    @classmethod
    def _producer_config(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_client_settings(v)

    @field_validator("key_columns")
    @classmethod
    def _keys(cls, v: list[str] | None) -> list[str] | None:
        return _check_columns(v)

    @model_validator(mode="after")
    def _format(self) -> KafkaSinkSpec:
        if self.format == "protobuf" and not self.proto_class:
            raise ValueError("format protobuf needs proto_class (or use format: json)")
        if self.format == "json" and self.proto_class:
            raise ValueError("proto_class is only used with format: protobuf")
        return self


class PostgresSinkSpec(_RetryingSinkModel):
    """Upserts rows into one PostgreSQL table per dagger, created from the query's output if missing."""

    type: Literal["postgres"]
    dsn: SecretStr = Field(
        description="libpq connection URI or key=value string, e.g. postgresql://user@host:5432/db "
                    "(held as a secret: it may carry a password).")
    password: SecretStr | None = Field(default=None, description="The password, if not in the dsn (never logged).")
    table: str = Field(description="The table: name or schema.name (default schema: public).")
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns a row is upserted on. Default: window_timestamp and the tag_*/label_* columns.")
    create_table: bool = Field(
        default=True, description="Create the table (with a unique key) from the query's output when missing.")
    batch_size: int = Field(default=10_000, ge=1, le=1_000_000, description="Rows per COPY and upsert statement.")
    max_retries: int = Field(
        default=5, ge=0, description="Retries of a micro-batch after a lost connection, with exponential back-off.")
    connect_timeout_s: int = Field(default=10, ge=1, le=300, description="Seconds to wait for a connection.")

    @field_validator("table")
    @classmethod
    def _table(cls, v: str) -> str:
        parts = v.split(".")
        if len(parts) > 2 or not all(IDENT_RE.match(p) for p in parts):
            raise ValueError(f"{v!r} is not a table name (name or schema.name; letters, digits, _)")
        return v

    @field_validator("key_columns")
    @classmethod
    def _keys(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("an upsert needs at least one key column (leave key_columns out for the default)")
        return _check_columns(v)


class ElasticsearchSinkSpec(_RetryingSinkModel):
    """Indexes each row as one Elasticsearch document, with the official client's bulk helpers.

    The document id is a stable hash of the dagger, the window and the tags, so a replayed micro-batch
    overwrites its documents (exactly-once in effect). The index may carry the window's date
    (``bookings-{window:%Y.%m.%d}``); its mapping is made on first write from the query's output:
    tag_*/label_* columns are keywords, window_timestamp a date, numbers numbers.
    """

    type: Literal["elasticsearch"]
    hosts: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:9200"], min_length=1,
        description="Elasticsearch node URLs (http:// or https://); a single URL may be given as text.")
    index: str = Field(
        description="The index the documents go to. ``{window:FORMAT}`` puts the window's UTC time in the name, "
                    "with strftime codes: ``bookings-{window:%Y.%m.%d}`` is one index a day.")
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns whose values (with the dagger's name) make the document id. Default: "
                    "window_timestamp and the tag_*/label_* columns.")
    username: str | None = Field(default=None, description="Basic auth user name (with password).")
    password: SecretStr | None = Field(default=None, description="Basic auth password (never logged).")
    api_key: SecretStr | None = Field(
        default=None, description="An API key (the base64 'id:key' Elasticsearch gives), instead of basic auth; "
                                  "never logged.")
    ca_certs: str | None = Field(default=None, description="https: a PEM file of the CA that signed the server's "
                                                           "certificate (default: the system's CAs).")
    verify_certs: bool = Field(default=True, description="https: check the server's certificate (turn off only "
                                                         "for a test server).")
    batch_size: int = Field(default=5000, ge=1, le=100_000, description="Documents per bulk request.")
    max_retries: int = Field(
        default=8, ge=0,
        description="Retries of a bulk write refused with 429 or 5xx, or cut off, with exponential back-off up "
                    "to max_backoff_s; then the dagger fails.")
    timeout_s: float = Field(default=30.0, gt=0, description="Seconds one request may take before it is retried.")
    refresh: bool = Field(
        default=False, description="Make written documents searchable before a micro-batch ends (slower writes; "
                                    "for tests and demos).")

    @field_validator("hosts", mode="before")
    @classmethod
    def _hosts(cls, v: Any) -> Any:
        hosts = [v] if isinstance(v, str) else v
        for host in hosts if isinstance(hosts, list) else []:
            if isinstance(host, str) and has_reference(host):
                continue
            if not isinstance(host, str) or not re.match(r"^https?://[^/\s]+", host):
                raise ValueError(f"{host!r} is not an http:// or https:// URL")
            if "@" in host.split("://", 1)[1].split("/", 1)[0]:
                raise ValueError("a host URL may not carry credentials: use username and password (or api_key) "
                                 "with ${VARIABLE}s")
        return hosts

    @field_validator("index")
    @classmethod
    def _index(cls, v: str) -> str:
        from job.index_pattern import check_index_pattern

        check_index_pattern(v)
        return v

    @field_validator("key_columns")
    @classmethod
    def _keys(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("a document id needs at least one key column (leave key_columns out for the default)")
        return _check_columns(v)

    @model_validator(mode="after")
    def _auth(self) -> ElasticsearchSinkSpec:
        if self.api_key is not None and (self.username or self.password is not None):
            raise ValueError("give either api_key or username/password, not both")
        if (self.username is None) != (self.password is None):
            raise ValueError("basic auth needs both username and password")
        return self


SinkSpec = Annotated[InfluxSinkSpec | LogSinkSpec | KafkaSinkSpec | PostgresSinkSpec | ElasticsearchSinkSpec,
                     Field(discriminator="type")]
SINK_TYPES = ("influx", "log", "kafka", "postgres", "elasticsearch")


# ---- lookups (enrichment of the SQL's result from outside, before the sinks) -----------------

#: A response path: ``$`` then ``.name`` or ``[n]`` steps (a subset of JsonPath), or a bare name (``email``).
PATH_RE = re.compile(r"^(?:\$(?:\.[A-Za-z_@][A-Za-z0-9_@\-]*|\[\d+\]|\['[^']+'\])*|[A-Za-z_][A-Za-z0-9_]*)$")
OUTPUT_TYPES = ("string", "long", "double", "boolean", "json")


def parse_path(text: str) -> tuple[str | int, ...]:
    """Return the steps of a response path (``$._source.name`` -> ("_source", "name"); ``email`` ->
    ("email",); ``$.tags[0]`` -> ("tags", 0); ``$`` -> ()). Raises ValueError naming the path when it is
    not one."""
    if not PATH_RE.match(text):
        raise ValueError(f"{text!r} is not a response path: write $ then .field or [n] steps "
                         "(e.g. $._source.name), or a bare column name")
    if not text.startswith("$"):
        return (text,)
    steps: list[str | int] = []
    for m in re.finditer(r"\.([A-Za-z_@][A-Za-z0-9_@\-]*)|\[(\d+)\]|\['([^']+)'\]", text[1:]):
        name, index, quoted = m.groups()
        steps.append(int(index) if index is not None else name if name is not None else quoted)
    return tuple(steps)


def pattern_fields(pattern: str) -> list[str]:
    """Return the row columns a request pattern names (``/customers/{customer_id}`` -> ["customer_id"]).
    Raises ValueError when the pattern's braces do not parse or a ``{…}`` is not a plain column name."""
    import string

    pattern = REFERENCE_RE.sub("", pattern)  # ${NAME}: a host variable, not a column
    try:
        parts = list(string.Formatter().parse(pattern))
    except ValueError as exc:
        raise ValueError(f"{pattern!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    names: list[str] = []
    for _, name, spec, conv in parts:
        if name is None:
            continue
        if not IDENT_RE.match(name) or spec or conv:
            raise ValueError(f"{pattern!r}: {{{name}}} is not a column name (letters, digits, _)")
        if name not in names:
            names.append(name)
    return names


class OutputColumn(_Model):
    """Where a new column's value is in a lookup's response, and its type."""

    path: str = Field(description="The value's path in the response: $ then .field or [n] steps (JsonPath subset, "
                                  "e.g. $._source.name), or a bare name (a PostgreSQL result column).")
    type: Literal["string", "long", "double", "boolean", "json"] = Field(
        default="string",
        description="The column's type. string: text (an object or list becomes its JSON text); json: the JSON text "
                    "of any value; long, double, boolean: a value that is not one becomes NULL and is counted "
                    "(bad_values).")

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        parse_path(v)
        return v


class _LookupModel(_Model):
    """Settings every lookup has."""

    name: str | None = Field(
        default=None,
        description="The lookup's name in errors and status (default: its type, numbered when several share one).")
    fail_on_errors: bool = Field(
        default=False,
        description="A request that times out or fails (after retries): true stops the dagger with an error "
                    "naming the lookup; false writes the batch's rows with NULL in this lookup's columns and "
                    "counts them (errors, rows_with_errors in status). A key that is not found is never an error: "
                    "its columns are NULL (a miss).")
    connect_timeout_s: float = Field(default=5.0, gt=0, le=300, description="Seconds to wait for a connection.")
    timeout_s: float = Field(
        default=10.0, gt=0, le=600,
        description="Seconds one request (one batch of keys) may take (upstream's socket/stream timeout).")
    retries: int = Field(default=2, ge=0, le=10,
                         description="Retries of a failed request (0.2 s, then doubling) before it counts as an error.")
    capacity: int = Field(default=8, ge=1, le=256, description="Requests in flight at most (upstream's Async I/O capacity).")
    max_keys_per_request: int = Field(
        default=5000, ge=1, le=100_000,
        description="Distinct keys per request at most (PostgreSQL: per = ANY($1) query; Elasticsearch: per _mget); "
                    "more keys go in several requests, up to capacity at once.")
    cache_size: int = Field(default=100_000, ge=0, le=10_000_000,
                            description="Keys whose result is kept in memory at most (0: no cache).")
    cache_ttl_s: float = Field(
        default=300.0, gt=0,
        description="How long a key's result (found or not found; never an error) is reused before it is asked "
                    "again: a change at the source reaches the output within this long.")
    output_mapping: dict[str, OutputColumn] = Field(
        min_length=1,
        description="New column -> where its value is in the response: a path (text, as type string) or "
                    "{path, type}. Columns are added after the SQL's, in this order.")

    @field_validator("name")
    @classmethod
    def _lookup_name(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.match(v):
            raise ValueError(f"{v!r} must be 2-63 lower-case letters, digits or dashes, starting with a letter")
        return v

    @field_validator("output_mapping", mode="before")
    @classmethod
    def _paths_alone(cls, v: Any) -> Any:
        """A path alone (``name: $.x``) is ``{path: $.x}``."""
        return {c: {"path": t} if isinstance(t, str) else t for c, t in v.items()} if isinstance(v, dict) else v

    @field_validator("output_mapping")
    @classmethod
    def _outputs(cls, v: dict[str, OutputColumn]) -> dict[str, OutputColumn]:
        for column in v:
            if not IDENT_RE.match(column):
                raise ValueError(f"{column!r} is not a column name (letters, digits, _)")
        return v

    def outputs(self) -> dict[str, OutputColumn]:
        """Return output_mapping: new column -> its :class:`OutputColumn`."""
        return dict(self.output_mapping)

    def key_columns(self) -> list[str]:
        """Return the row columns a request is built from (the lookup's key), in order."""
        raise NotImplementedError


class PostgresLookup(_LookupModel):
    """Looks rows up in PostgreSQL: one ``query`` a batch with every distinct key in ``$1`` (an array)."""

    type: Literal["postgres"]
    dsn: SecretStr = Field(description="libpq connection URI or key=value string (held as a secret).")
    password: SecretStr | None = Field(default=None, description="The password, if not in the dsn (never logged).")
    key: str = Field(description="The row column whose values are looked up (the $1 array holds its distinct values).")
    query: str = Field(
        description="A SELECT whose first column is the key it matched, with one $1 for the array of keys, e.g. "
                    "SELECT customer_id, email, tier FROM customers WHERE customer_id = ANY($1). Output paths name "
                    "its result columns. A key matching several rows takes the first.")

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if not IDENT_RE.match(v):
            raise ValueError(f"{v!r} is not a column name (letters, digits, _)")
        return v

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        if v.count("$1") != 1:
            raise ValueError("the query must hold $1 (the array of keys) exactly once, e.g. WHERE id = ANY($1)")
        if re.search(r"\$[2-9]", v):
            raise ValueError("the query takes one parameter, $1 (the array of keys)")
        return v

    def key_columns(self) -> list[str]:
        return [self.key]


class ElasticsearchLookup(_LookupModel):
    """Looks documents up by id in Elasticsearch: one ``_mget`` per batch of distinct ids."""

    type: Literal["elasticsearch"]
    hosts: list[str] = Field(min_length=1, description="Node URLs, e.g. http://127.0.0.1:9200.")
    index: str = Field(min_length=1, description="The index the documents are in.")
    id_pattern: str = Field(
        description="The document id, built from the row's columns, e.g. {customer_id} or {country}-{customer_id}.")
    username: str | None = Field(default=None, description="Basic auth user name.")
    password: SecretStr | None = Field(default=None, description="Basic auth password (never logged).")
    api_key: SecretStr | None = Field(default=None, description="An API key, instead of basic auth (never logged).")
    verify_certs: bool = Field(default=True, description="Check the server's TLS certificate (https hosts).")
    ca_certs: str | None = Field(default=None, description="A CA bundle file to check the server's certificate with.")

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str]) -> list[str]:
        for host in v:
            if not has_reference(host) and not re.match(r"^https?://[^/\s]+", host):
                raise ValueError(f"{host!r} is not an http(s):// URL")
        return v

    @field_validator("id_pattern")
    @classmethod
    def _id_pattern(cls, v: str) -> str:
        if not pattern_fields(v):
            raise ValueError(f"{v!r} names no column: write {{column}} where the row's value goes")
        return v

    def key_columns(self) -> list[str]:
        return pattern_fields(self.id_pattern)


class HttpLookup(_LookupModel):
    """Calls an HTTP(S) endpoint once per distinct key, up to ``capacity`` at once; the JSON answer is the response.

    200: found; 404: not found (a miss); anything else, or no answer: an error."""

    type: Literal["http"]
    url: str = Field(description="The URL, with {column} where a row's value goes (URL-quoted), e.g. "
                                 "http://profiles:8080/customers/{customer_id}.")
    verb: Literal["GET", "POST", "PUT"] = Field(default="GET", description="The HTTP method.")
    body: dict[str, Any] | None = Field(
        default=None,
        description="POST/PUT: a JSON body; a text value \"{column}\" becomes the row's value (its own type), other "
                    "text with {column} in it is filled in.")
    headers: dict[str, SecretStr] = Field(default_factory=dict,
                                          description="Request headers (e.g. Authorization; never logged).")
    verify_certs: bool = Field(default=True, description="Check the server's TLS certificate (https URLs).")
    ca_certs: str | None = Field(default=None,
                                 description="A CA bundle file to check the server's certificate with (https URLs).")

    @field_validator("verb", mode="before")
    @classmethod
    def _verb(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not re.match(r"^https?://", v) and not has_reference(v.split("/", 1)[0]):
            raise ValueError(f"{v!r} is not an http(s):// URL")
        pattern_fields(v)
        return v

    @model_validator(mode="after")
    def _request(self) -> HttpLookup:
        if self.body is not None and self.verb == "GET":
            raise ValueError("a GET has no body: use verb POST or PUT, or put the columns in the url")
        if not self.key_columns():
            raise ValueError("neither the url nor the body names a column: write {column} where a row's value goes")
        return self

    def key_columns(self) -> list[str]:
        names = pattern_fields(self.url)
        for text in _body_texts(self.body):
            names += [n for n in pattern_fields(text) if n not in names]
        return names


def _body_texts(value: Any) -> list[str]:
    """Return every text inside a JSON body template (keys' values, nested)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _body_texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _body_texts(v)]
    return []


LookupSpec = Annotated[PostgresLookup | ElasticsearchLookup | HttpLookup, Field(discriminator="type")]
LOOKUP_TYPES = ("elasticsearch", "http")  # "postgres" is a sink type too (SINK_TYPES)


def lookup_names(lookups: list[LookupSpec]) -> list[str]:
    """Return each lookup's name: its ``name``, or its type (``-2``, ``-3`` … for repeats)."""
    used: set[str] = set()
    out = []
    for lookup in lookups:
        base = lookup.name or lookup.type
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name)
        out.append(name)
    return out


def check_lookups(lookups: list[LookupSpec], columns: list[str]) -> None:
    """Check the lookups against the columns the SQL outputs (after the result's transformers): each key column
    must be one of them or an earlier lookup's, and no new column may repeat one.

    Raises SpecError naming the lookup, its field and the column."""
    available = list(columns)
    for i, (lookup, name) in enumerate(zip(lookups, lookup_names(lookups), strict=True)):
        where = f"lookups[{i}] ({name})"
        for column in lookup.key_columns():
            field = {"postgres": "key", "elasticsearch": "id_pattern", "http": "url"}[lookup.type]
            if isinstance(lookup, HttpLookup) and column not in pattern_fields(lookup.url):
                field = "body"
            if column not in available:
                near = difflib.get_close_matches(column, available, n=3, cutoff=0.6)
                raise SpecError(
                    f"{where}.{field}: the SQL does not output column {column!r}; its rows have "
                    f"{', '.join(available) or 'no columns'}",
                    hint=f"did you mean {' or '.join(near)}?" if near else "select the column in the SQL")
        for column in lookup.output_mapping:
            if column in available:
                raise SpecError(f"{where}.output_mapping: column {column!r} is already in the rows",
                                hint="give the new column another name")
            available.append(column)


class DaggerSpec(_Model):
    """A dagger: one or two streams, a Dagger SQL query, and where the results go."""

    name: str = Field(description="Lower-case name, letters, digits and dashes; unique per team.")
    streams: list[StreamSpec] = Field(min_length=1, max_length=2, description="The input streams (1 or 2).")
    sql: str = Field(min_length=1, description="The Dagger SQL query.")
    watermark_delay_ms: int = Field(
        default=10_000, ge=0, description="How late an event may be and still count in its window.")
    parallelism: int = Field(default=2, ge=1, le=1024, description="Shuffle partitions for the aggregation.")
    checkpoint_dir: str = Field(
        default="", description="Where offsets and window state live (default: <state dir>/checkpoints/<name>).")
    trigger_interval_s: float = Field(default=5.0, ge=0, description="Seconds between micro-batches.")
    close_windows_promptly: bool = Field(
        default=True,
        description="After planning a micro-batch that reads a record stamped (Kafka timestamp) at or past a "
                    "window's end plus the watermark delay, plan one with no new data, so that Spark closes "
                    "the window in a short no-data batch instead of the next full one: about one batch time "
                    "less delay (job.sources.pacing).")
    read_at_window_close: bool = Field(
        default=False,
        description="Read new records only when they close a window: a micro-batch reads the records waiting "
                    "when the newest is stamped past the next window end plus the watermark delay, or when a "
                    "window period has passed since the last read; other triggers read nothing. Results come "
                    "out as early as before, from about two micro-batches per window instead of one per "
                    "trigger (each costs a few hundred ms of CPU however small): for light windowed daggers "
                    "sharing an application. Input rows and lag in the console then move in steps. Needs "
                    "close_windows_promptly and a windowed aggregation, with joins only on time intervals "
                    "(x.rowtime BETWEEN y.rowtime [± INTERVAL] AND y.rowtime [± INTERVAL], whose width it adds to "
                    "the watermark delay); otherwise it has no effect.")
    light: bool = Field(
        default=False,
        description="The dagger reads little (up to a few thousand events a second): run it for the least CPU per "
                    "micro-batch, which then costs more than its records do. Spark compiles no whole-stage code "
                    "for it (spark.sql.codegen.wholeStage=false, unless spark_conf sets it: generating that code "
                    "again in every micro-batch cost more than it saved, ~16% of a small batch's CPU); "
                    "DistinctCount keeps up to 100,000 groups a task in its hash map instead of sorting past 128; its "
                    "window state stays in the JVM's heap (HDFS-backed state store) instead of RocksDB (in a new "
                    "checkpoint; Spark fixes the store for the life of a checkpoint); "
                    "a windowed query reads at window close (read_at_window_close), while one that keeps no state "
                    "(no window, no join) triggers at most every 5 s (job.plan.LIGHT_TRIGGER_S). In a shared "
                    "application its jobs run first come, first served in one pool with the other light daggers' "
                    "(daggers-light), not in a FAIR pool of its own. For light daggers sharing an application; "
                    "leave it off for a heavy one.")
    udf_file: str | None = Field(
        default=None,
        description="A Python file of the dagger's own SQL functions (marked with @dagger_function), "
                    "relative to the spec file's folder.")
    dart_store: str | None = Field(
        default=None,
        description="Where DartGet/DartContains read their collections: a folder (relative to the spec file's "
                    "folder), a file:// URL or an http(s):// URL holding dart-get/<name> and dart-contains/<name> "
                    "JSON files (the original's GCS layout). Default: the DAGGERS_DART_STORE environment variable.")
    transformers: list[TransformerSpec] = Field(
        default_factory=list,
        description="Steps on the SQL's result rows before the sinks, in order (deduplicate, "
                    "invalid_record_filter, hash).")
    lookups: list[LookupSpec] = Field(
        default_factory=list,
        description="Enrichment of the result rows from PostgreSQL, Elasticsearch or HTTP(S), in order, after the "
                    "transformers and before the sinks: each adds the columns of its output_mapping (docs/howto/"
                    "enrich.md).")
    schema_file: str | None = Field(
        default=None,
        description="A compiled protobuf FileDescriptorSet to run against (daggers protos build writes one "
                    "per version). Default: the version pinned in the checkpoint at the first start, or the "
                    "current protos/ for a new dagger.")
    schema_dir: str | None = Field(
        default=None,
        description="A team's own folder of .proto files (relative to the spec file's folder), compiled when the "
                    "dagger first starts and then pinned in its checkpoint, like the project's protos/.")
    schema_url: str | None = Field(
        default=None,
        description="A team's compiled FileDescriptorSet at an http(s):// or file:// URL (a schema registry's "
                    "versioned artifact; daggers protos build --root DIR --out FILE writes one), read when the "
                    "dagger first starts and then pinned in its checkpoint.")
    sinks: list[SinkSpec] = Field(min_length=1, description="Where rows go (``sink:`` for one).")
    isolation: Literal["shared", "fused", "dedicated"] = Field(
        default="shared",
        description="How a controller runs the dagger. shared: as one streaming query inside a long-lived "
                    "Spark application of its cluster (job.shared.host), next to other daggers, each in its "
                    "own Spark session, FAIR pool and checkpoint; a deploy skips Spark's start-up and a dagger "
                    "costs tens of MB instead of a JVM. dedicated: in its own process and Spark application "
                    "(job.control.launch), for heavy daggers or ones that need non-SQL spark_conf. fused: in the "
                    "shared application, in one streaming query with the other fused daggers of the host that "
                    "read the same stream with the same window (job.shared.fusion): one read and one "
                    "micro-batch for all of them, for many light TUMBLE-windowed daggers; one that cannot fuse "
                    "runs as shared. "
                    "`daggers run` always runs the dagger in its own application.")
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Spark settings for the dagger (e.g. spark.sql.streaming.stateStore.providerClass). "
                    "spark.sql.* settings apply to its query in any session; others only when the dagger "
                    "starts a Spark application of its own (isolation: dedicated). The cluster sets "
                    "spark.master.")

    @model_validator(mode="after")
    def _one_schema_source(self) -> DaggerSpec:
        named = [k for k in ("schema_file", "schema_dir", "schema_url") if getattr(self, k)]
        if len(named) > 1:
            raise ValueError(f"name one schema source, not {' and '.join(named)}")
        return self

    @field_validator("spark_conf", mode="before")
    @classmethod
    def _spark_conf(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        for key in v:
            if not isinstance(key, str) or not key.startswith("spark."):
                raise ValueError(f"{key!r} is not a Spark setting (spark.…)")
            if key == "spark.master":
                raise ValueError("spark.master is the cluster's, not the dagger's")
        return {k: str(val).lower() if isinstance(val, bool) else str(val) for k, val in v.items()}

    @model_validator(mode="before")
    @classmethod
    def _single_sink(cls, data: Any) -> Any:
        if isinstance(data, dict) and "sink" in data:
            if "sinks" in data:
                raise ValueError("give either sink or sinks, not both")
            data = dict(data)
            data["sinks"] = [data.pop("sink")]
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"{v!r} must be 2-63 lower-case letters, digits or dashes, starting with a letter")
        return v

    @model_validator(mode="after")
    def _tables(self) -> DaggerSpec:
        names = [s.table for s in self.streams]
        if len(set(names)) != len(names):
            raise ValueError(f"stream tables must differ; got {names}")
        return self

    #: The environment variables substituted into the spec: name -> the text put in (never shown).
    _substituted: dict[str, str] = PrivateAttr(default_factory=dict)

    def name_variables(self, message: str) -> str:
        """Return ``message`` with the variables named whose substituted values it mentions, so an error
        about such a value (an unreachable ``${DAGGERS_BOOTSTRAP}``) says where the value came from."""
        names = [n for n, v in self._substituted.items() if len(v) >= 3 and v in message]
        return message + (f" (from {', '.join('${' + n + '}' for n in names)})" if names else "")

    def resolved_checkpoint(self, state_dir: Path) -> Path:
        """Return the checkpoint folder: ``checkpoint_dir`` or ``<state_dir>/checkpoints/<name>``."""
        return Path(self.checkpoint_dir) if self.checkpoint_dir else state_dir / "checkpoints" / self.name


# ---- loading with line numbers ---------------------------------------------------------------

def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Return the 1-based line of the YAML node at ``loc`` (the deepest one that exists)."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
            if nxt is None and key == "sinks":
                nxt = next((v for k, v in node.value if getattr(k, "value", None) == "sink"), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            nxt = node.value[key]
        else:
            nxt = None
        if nxt is None:
            if isinstance(node, yaml.SequenceNode) and key == 0 and node.tag.endswith(":map"):
                continue
            continue
        node = nxt
        line = node.start_mark.line + 1
    return line


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
        elif key in (*SINK_TYPES, *LOOKUP_TYPES, "function-after[_target()]", "function-after[_format()]",
                     "function-after[_request()]"):
            continue
        else:
            out += ("." if out else "") + str(key)
    return out or "(spec)"


def format_validation(err: ValidationError, node: yaml.Node | None = None, source: str = "spec",
                      variables: dict[int, list[str]] | None = None) -> str:
    """Return one line per problem: ``source:LINE: field.path: message``.

    An unknown field gets "did you mean …?"; a problem on a line whose value came from ``${VAR}``
    names the variable (``variables``: line -> the variables substituted on it).
    """
    lines = []
    for e in err.errors():
        loc = tuple(k for k in e["loc"] if k not in SINK_TYPES + TRANSFORMER_TYPES + LOOKUP_TYPES)
        line = _line_of(node, loc) if node is not None else None
        where = f"{source}:{line}" if line else source
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and e["loc"]:
            near = difflib.get_close_matches(str(e["loc"][-1]), sorted(_fields_at(e["loc"])), n=3, cutoff=0.6)
            msg = "unknown field" + (f"; did you mean {' or '.join(near)}?" if near else "")
        if line and variables and line in variables:
            msg += f" (the value comes from {', '.join('${' + v + '}' for v in variables[line])})"
        lines.append(f"{where}: {_path(loc)}: {msg}")
    return "\n".join(lines)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _fields_at(loc: tuple[Any, ...]) -> set[str]:
    """The field names the spec models at ``loc`` (an error's location, its last key the bad field) accept."""
    models: list[type[BaseModel]] = [DaggerSpec]
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        tagged = [m for m in models if key in get_args(getattr(m.model_fields.get("type"), "annotation", None))]
        if tagged:
            models = tagged
            continue
        models = [sub for m in models if key in m.model_fields for sub in _models_in(m.model_fields[key].annotation)]
    names = {name for m in models for name in m.model_fields}
    return names | ({"sink"} if DaggerSpec in models else set())


def interpolate_env(text: str, env: Mapping[str, str] | None = None, source: str = "spec",
                    variables: dict[int, list[str]] | None = None, values: dict[str, str] | None = None,
                    *, keep_unset: bool = False) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}`` with environment values (secrets stay out of files).

    As in the shell, ``${VAR:-default}`` gives the default when VAR is unset or empty. ``variables``, when
    given, gets line -> the names substituted on it (so errors about a value can name its variable), and
    ``values`` name -> the text put in.
    With ``keep_unset`` a variable that ``env`` does not set stays a ``${NAME}`` (or ``${NAME:-default}``)
    reference, for the host the dagger runs on to resolve (a spec checked as data, :mod:`job.control.spec_check`).
    Raises SpecError naming the line of a variable that is unset and has no default.
    """
    import os

    env_values = os.environ if env is None else env
    out = []
    for lineno, line in enumerate(text.splitlines(keepends=True), start=1):
        def sub(m: re.Match[str], lineno: int = lineno) -> str:
            name, default = m.group(1), m.group(2)
            if variables is not None:
                variables.setdefault(lineno, []).append(name)
            value = env_values.get(name)
            if keep_unset and value is None:
                return m.group(0)
            if default is not None and not value:
                value = default
            if value is not None:
                if values is not None:
                    values[name] = value
                return value
            raise SpecError(f"{source}:{lineno}: environment variable {name} is not set (and has no :-default)",
                            hint=f"export {name}=…, or write ${{{name}:-default}} in the spec")
        out.append(REFERENCE_RE.sub(sub, line))
    return "".join(out)


def parse_spec(text: str, source: str = "spec", env: Mapping[str, str] | None = None, *,
               keep_unset: bool = False) -> DaggerSpec:
    """Parse and validate YAML text; raise SpecError naming each bad field and its line.

    ``${VAR}`` and ``${VAR:-default}`` are replaced from ``env`` (default: the process environment); with
    ``keep_unset``, those ``env`` does not set stay references (see :func:`interpolate_env`). The YAML is
    read within :mod:`job.check.yaml_load`'s limits (size, depth, no aliases).
    """
    from job.check.yaml_load import YamlError, compose_yaml, construct

    variables: dict[int, list[str]] = {}
    substituted: dict[str, str] = {}
    text = interpolate_env(text, env, source, variables, substituted, keep_unset=keep_unset)
    try:
        node = compose_yaml(text, source)
        data = construct(node, source)
    except YamlError as exc:
        names = variables.get(exc.line) if exc.line else None
        if names:
            exc.message += f" (the value comes from {', '.join('${' + v + '}' for v in names)})"
        raise
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a dagger spec is a YAML mapping (name, streams, sql, sink)")
    try:
        spec = DaggerSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation(exc, node, source, variables)) from None
    spec._substituted = substituted
    return spec


def load_spec(path: str | Path) -> DaggerSpec:
    """Read and validate a spec file; raise SpecError (file missing, bad YAML, bad fields)."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"no spec file at {p}")
    spec = parse_spec(p.read_text(), source=str(p))
    if spec.udf_file and not Path(spec.udf_file).is_absolute():
        spec = spec.model_copy(update={"udf_file": str(p.parent / spec.udf_file)})
    for key in ("dart_store", "schema_dir"):
        value = getattr(spec, key)
        if value and "://" not in value and not Path(value).is_absolute():
            spec = spec.model_copy(update={key: str(p.parent / value)})
    return spec
