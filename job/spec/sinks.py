"""The sinks' settings: where a dagger's rows go."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from job.spec.base import (
    IDENT_RE,
    NAME_RE,
    SpecModel,
    check_bootstrap,
    check_client_settings,
    check_columns,
    has_reference,
)


class _SinkModel(SpecModel):
    """Settings every sink has."""

    name: str | None = Field(
        default=None,
        description="The sink's name in metrics and logs (default: its type, numbered when a dagger has "
        "several sinks of one type).",
    )

    @field_validator("name")
    @classmethod
    def _sink_name(cls, v: str | None) -> str | None:
        if v is not None and not NAME_RE.match(v):
            raise ValueError(
                f"{v!r} must be 2-63 lower-case letters, digits or dashes, starting with a letter"
            )
        return v


class _RetryingSinkModel(_SinkModel):
    """Settings of a sink that writes over the network and retries a failed write."""

    max_backoff_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="The longest wait between two retries of a failed write: the wait starts at 0.5 s and "
        "doubles, times a jitter of 0.5-1.5, never more than this. Lower: back sooner after a short outage; "
        "higher: less load on a server that is struggling.",
    )


class InfluxSinkSpec(_RetryingSinkModel):
    """Writes each row as an InfluxDB point: window_timestamp is the time, tag_*/label_* are tags."""

    type: Literal["influx"]
    url: str = Field(default="http://127.0.0.1:8086", description="InfluxDB base URL.")
    api: Literal["v1", "v2"] = Field(
        default="v1",
        description="v1: line protocol on /write (InfluxDB 1.x); v2: /api/v2/write (1.8+, 2.x, 3.x).",
    )
    database: str | None = Field(default=None, description="v1: the database to write to.")
    retention_policy: str | None = Field(
        default=None, description="v1: the retention policy (default: the db's)."
    )
    bucket: str | None = Field(default=None, description="v2: the bucket.")
    org: str | None = Field(default=None, description="v2: the organisation.")
    token: SecretStr | None = Field(default=None, description="v2: the API token (never logged).")
    username: str | None = Field(default=None, description="v1: user name, if auth is on.")
    password: SecretStr | None = Field(default=None, description="v1: password (never logged).")
    measurement: str = Field(description="The measurement the points go to.")
    batch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Points per HTTP write.")
    write_concurrency: int = Field(
        default=2,
        ge=1,
        le=16,
        description="HTTP writes of one micro-batch in flight at once (a batch with many windows to write, "
        "as when a dagger catches up, is written sooner; InfluxDB ingests them in parallel).",
    )
    flush_interval_ms: int = Field(
        default=1000, ge=0, description="Longest wait before a partial batch is sent."
    )
    max_retries: int = Field(
        default=15,
        ge=0,
        description="Retries of a failed write, with exponential back-off up to max_backoff_s (15 at the default 30 s: about 2.5 to 5.5 minutes in all, so an InfluxDB restart does not stop the job). "
        "The start check of a server that does not answer is retried the same way.",
    )
    timeout_s: float = Field(
        default=30.0, gt=0, description="Seconds one HTTP write may take before it is retried."
    )
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
        description="protobuf: the row as a proto_class message (columns → fields by name); json: a JSON object.",
    )
    proto_class: str | None = Field(
        default=None,
        description="protobuf: full name of the output message, e.g. daggers.aggregates.BookingAggregate.",
    )
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns that make the record key (one: its text; several: a JSON object). Default: "
        "window_timestamp and the tag_*/label_* columns; []: no key.",
    )
    create_topic: bool = Field(default=False, description="Create the topic when it is missing.")
    partitions: int = Field(
        default=4, ge=1, le=10_000, description="Partitions of a topic this sink creates."
    )
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = Field(
        default="lz4", description="Compression of record batches."
    )
    linger_ms: int = Field(
        default=20,
        ge=0,
        le=60_000,
        description="How long the producer waits to fill a batch before sending it.",
    )
    batch_size: int = Field(
        default=10_000, ge=1, le=1_000_000, description="Records per producer batch at most."
    )
    delivery_timeout_ms: int = Field(
        default=30_000,
        ge=1000,
        description="How long the producer keeps retrying one delivery (librdkafka message.timeout.ms).",
    )
    max_retries: int = Field(
        default=5,
        ge=0,
        description="Rounds of sending again the records whose delivery failed, with back-off.",
    )
    producer_config: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Extra librdkafka producer settings (e.g. security.protocol, sasl.password); never logged; "
        "none that loads or runs code (plugin.library.paths, sasl.kerberos.kinit.cmd, …).",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, v: str) -> str:
        return check_bootstrap(v)

    @field_validator("producer_config")
    @classmethod
    def _producer_config(cls, v: dict[str, Any]) -> dict[str, Any]:
        return check_client_settings(v)

    @field_validator("key_columns")
    @classmethod
    def _keys(cls, v: list[str] | None) -> list[str] | None:
        return check_columns(v)

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
        "(held as a secret: it may carry a password)."
    )
    password: SecretStr | None = Field(
        default=None, description="The password, if not in the dsn (never logged)."
    )
    table: str = Field(description="The table: name or schema.name (default schema: public).")
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns a row is upserted on. Default: window_timestamp and the tag_*/label_* columns.",
    )
    create_table: bool = Field(
        default=True, description="Create the table (with a unique key) from the query's output when missing."
    )
    batch_size: int = Field(
        default=10_000, ge=1, le=1_000_000, description="Rows per COPY and upsert statement."
    )
    max_retries: int = Field(
        default=5,
        ge=0,
        description="Retries of a micro-batch after a lost connection, with exponential back-off.",
    )
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
            raise ValueError(
                "an upsert needs at least one key column (leave key_columns out for the default)"
            )
        return check_columns(v)


class ElasticsearchSinkSpec(_RetryingSinkModel):
    """Indexes each row as one Elasticsearch document, with the official client's bulk helpers.

    The document id is a stable hash of the dagger, the window and the tags, so a replayed micro-batch
    overwrites its documents (exactly-once in effect). The index may carry the window's date
    (``bookings-{window:%Y.%m.%d}``); its mapping is made on first write from the query's output:
    tag_*/label_* columns are keywords, window_timestamp a date, numbers numbers.
    """

    type: Literal["elasticsearch"]
    hosts: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:9200"],
        min_length=1,
        description="Elasticsearch node URLs (http:// or https://); a single URL may be given as text.",
    )
    index: str = Field(
        description="The index the documents go to. ``{window:FORMAT}`` puts the window's UTC time in the name, "
        "with strftime codes: ``bookings-{window:%Y.%m.%d}`` is one index a day."
    )
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns whose values (with the dagger's name) make the document id. Default: "
        "window_timestamp and the tag_*/label_* columns.",
    )
    username: str | None = Field(default=None, description="Basic auth user name (with password).")
    password: SecretStr | None = Field(default=None, description="Basic auth password (never logged).")
    api_key: SecretStr | None = Field(
        default=None,
        description="An API key (the base64 'id:key' Elasticsearch gives), instead of basic auth; "
        "never logged.",
    )
    ca_certs: str | None = Field(
        default=None,
        description="https: a PEM file of the CA that signed the server's "
        "certificate (default: the system's CAs).",
    )
    verify_certs: bool = Field(
        default=True, description="https: check the server's certificate (turn off only for a test server)."
    )
    batch_size: int = Field(default=5000, ge=1, le=100_000, description="Documents per bulk request.")
    max_retries: int = Field(
        default=8,
        ge=0,
        description="Retries of a bulk write refused with 429 or 5xx, or cut off, with exponential back-off up "
        "to max_backoff_s; then the dagger fails.",
    )
    timeout_s: float = Field(
        default=30.0, gt=0, description="Seconds one request may take before it is retried."
    )
    refresh: bool = Field(
        default=False,
        description="Make written documents searchable before a micro-batch ends (slower writes; "
        "for tests and demos).",
    )

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
                raise ValueError(
                    "a host URL may not carry credentials: use username and password (or api_key) "
                    "with ${VARIABLE}s"
                )
        return hosts

    @field_validator("index")
    @classmethod
    def _index(cls, v: str) -> str:
        from job.common.index_pattern import check_index_pattern

        check_index_pattern(v)
        return v

    @field_validator("key_columns")
    @classmethod
    def _keys(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError(
                "a document id needs at least one key column (leave key_columns out for the default)"
            )
        return check_columns(v)

    @model_validator(mode="after")
    def _auth(self) -> ElasticsearchSinkSpec:
        if self.api_key is not None and (self.username or self.password is not None):
            raise ValueError("give either api_key or username/password, not both")
        if (self.username is None) != (self.password is None):
            raise ValueError("basic auth needs both username and password")
        return self


SinkSpec = Annotated[
    InfluxSinkSpec | LogSinkSpec | KafkaSinkSpec | PostgresSinkSpec | ElasticsearchSinkSpec,
    Field(discriminator="type"),
]
SINK_TYPES = ("influx", "log", "kafka", "postgres", "elasticsearch")
