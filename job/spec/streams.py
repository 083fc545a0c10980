"""A dagger's input streams: the Kafka topics it reads and the cluster it fails over to."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from job.errors import SourceError
from job.spec.base import IDENT_RE, SpecModel, check_bootstrap, check_client_settings
from job.spec.transformers import TransformerSpec, transformer_columns


class FailoverSpec(SpecModel):
    """A secondary Kafka cluster that mirrors the stream's topics (e.g. with MirrorMaker), to read from
    when the primary is lost. It must hold the same records with the same timestamps (CreateTime);
    its offsets may differ. The dagger moves once and never moves back by itself."""

    bootstrap_servers: str = Field(
        description="The secondary cluster's bootstrap servers, host:port[,host:port]."
    )
    after_s: float = Field(
        default=30.0,
        gt=0,
        description="How long the primary must be unreachable before the dagger moves to the secondary "
        "(less than the stream's max_outage_s).",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap(cls, v: str) -> str:
        return check_bootstrap(v)


class StreamSpec(SpecModel):
    """One input stream, seen by the SQL as a table."""

    table: str = Field(description="The name the SQL uses for this stream (FROM `table`).")
    topics: list[str] = Field(min_length=1, description="Kafka topics read into this table (a union).")
    proto_class: str = Field(description="Full name of the protobuf message, e.g. daggers.events.BookingLog.")
    timestamp_field: str = Field(description="The Timestamp field that is the event time (rowtime in SQL).")
    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port].")
    group: str = Field(
        description="Consumer group name shown in monitoring (offsets live in the checkpoint)."
    )
    start_from: str = Field(
        default="earliest",
        description="Where a new job starts: earliest, latest, or a time (ISO 8601 with zone, or epoch ms).",
    )
    bad_records: Literal["fail", "skip", "dead-letter"] = Field(
        default="skip",
        description="A record that does not decode: fail stops the job naming topic/partition/offset; "
        "skip leaves it out, counts it and keeps its bytes under the checkpoint; dead-letter "
        "also publishes it (raw bytes, with topic/partition/offset/error headers) to "
        "dead_letter_topic.",
    )
    dead_letter_topic: str | None = Field(
        default=None,
        description="Topic for bad records with bad_records: dead-letter "
        "(default: <dagger name>-<table>-dead-letter), on the same cluster.",
    )
    max_outage_s: float = Field(
        default=600.0,
        gt=0,
        description="How long the broker may be unreachable before the job stops "
        "with an error; until then it waits and retries.",
    )
    fail_on_data_loss: bool = Field(
        default=True,
        description="When the checkpoint's position is past a partition's end (the broker lost records, or the "
        "topic was recreated) or below its first offset (records deleted before they were read): true stops "
        "the dagger at once naming the partition and offsets; false reads on from the nearest offset the "
        "broker has, with a warning naming the records passed over (like Spark's failOnDataLoss).",
    )
    max_records_per_batch: int = Field(
        default=4_000_000,
        ge=0,
        description="Records per micro-batch at most, shared across partitions (0: all). A live stream's batches hold "
        "what arrived since the last one; this bounds a batch only while the dagger catches up, and "
        "larger ones catch up faster: each batch reads and rewrites the state of every window key it "
        "touches once (BENCHMARKS.md, sixth session).",
    )
    consumer_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra librdkafka settings (e.g. security.protocol); none that loads "
        "or runs code (plugin.library.paths, sasl.kerberos.kinit.cmd, …).",
    )
    failover: FailoverSpec | None = Field(
        default=None,
        description="A secondary cluster mirroring the topics: when the primary has been unreachable for "
        "after_s, the dagger continues there from the last record it read (by timestamp); "
        "never back automatically.",
    )
    transformers: list[TransformerSpec] = Field(
        default_factory=list,
        description="Steps on this stream's records after its watermark and before the SQL, in order "
        "(deduplicate, invalid_record_filter, hash).",
    )

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
        return check_bootstrap(v)

    @field_validator("consumer_config")
    @classmethod
    def _consumer_config(cls, v: dict[str, str]) -> dict[str, str]:
        return check_client_settings(v)

    @field_validator("failover")
    @classmethod
    def _failover(cls, v: FailoverSpec | None, info: Any) -> FailoverSpec | None:
        max_outage_s, primary = info.data.get("max_outage_s"), info.data.get("bootstrap_servers")
        if v is not None and max_outage_s is not None and v.after_s >= max_outage_s:
            raise ValueError(
                f"after_s ({v.after_s:g}) must be less than max_outage_s ({max_outage_s:g}), "
                "or the job stops before it fails over"
            )
        if v is not None and primary is not None and v.bootstrap_servers.strip() == primary.strip():
            raise ValueError("bootstrap_servers names the primary cluster itself")
        return v
