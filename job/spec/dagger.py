"""The spec's root: one dagger's streams, SQL, steps, lookups, sinks and how it runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from job.spec.base import NAME_RE, SpecModel
from job.spec.lookups import LookupSpec
from job.spec.sinks import SinkSpec
from job.spec.streams import StreamSpec
from job.spec.transformers import TransformerSpec
from job.spec.udf_carried import carried_name_problem, decode_carried


class DaggerSpec(SpecModel):
    """A dagger: one or two streams, a Dagger SQL query, and where the results go."""

    name: str = Field(description="Lower-case name, letters, digits and dashes; unique per team.")
    streams: list[StreamSpec] = Field(min_length=1, max_length=2, description="The input streams (1 or 2).")
    sql: str = Field(min_length=1, description="The Dagger SQL query.")
    watermark_delay_ms: int = Field(
        default=10_000, ge=0, description="How late an event may be and still count in its window."
    )
    parallelism: int = Field(default=2, ge=1, le=1024, description="Shuffle partitions for the aggregation.")
    checkpoint_dir: str = Field(
        default="",
        description="Where offsets and window state live (default: <state dir>/checkpoints/<name>).",
    )
    trigger_interval_s: float = Field(default=5.0, ge=0, description="Seconds between micro-batches.")
    close_windows_promptly: bool = Field(
        default=True,
        description="After planning a micro-batch that reads a record stamped (Kafka timestamp) at or past a "
        "window's end plus the watermark delay, plan one with no new data, so that Spark closes "
        "the window in a short no-data batch instead of the next full one: about one batch time "
        "less delay (job.sources.pacing).",
    )
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
        "the watermark delay); otherwise it has no effect.",
    )
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
        "(no window, no join) triggers at most every 5 s (job.query.plan.LIGHT_TRIGGER_S). In a shared "
        "application its jobs run first come, first served in one pool with the other light daggers' "
        "(daggers-light), not in a FAIR pool of its own. For light daggers sharing an application; "
        "leave it off for a heavy one.",
    )
    udf_file: str | None = Field(
        default=None,
        description="A Python file of the dagger's own SQL functions (marked with @dagger_function), "
        "relative to the spec file's folder (its content then travels with the spec: udf_file_base64), or an "
        "absolute path on the host the dagger runs on.",
    )
    udf_file_base64: str | None = Field(
        default=None,
        description="The content of udf_file (at most 128 KiB of UTF-8 text), as base64: daggers dagger "
        "create, edit and validate add it from the file beside the spec, so that the dagger's controller, "
        "on another host, writes the file into the dagger's folder and runs it. Not written by hand.",
    )
    dart_store: str | None = Field(
        default=None,
        description="Where DartGet/DartContains read their collections: a folder (relative to the spec file's "
        "folder for daggers run; through a controller, an absolute folder on its host), a file:// URL or an "
        "http(s):// URL holding dart-get/<name> and dart-contains/<name> JSON files (the original's GCS "
        "layout). Default: the DAGGERS_DART_STORE environment variable.",
    )
    transformers: list[TransformerSpec] = Field(
        default_factory=list,
        description="Steps on the SQL's result rows before the sinks, in order (deduplicate, "
        "invalid_record_filter, hash).",
    )
    lookups: list[LookupSpec] = Field(
        default_factory=list,
        description="Enrichment of the result rows from PostgreSQL, Elasticsearch or HTTP(S), in order, after the "
        "transformers and before the sinks: each adds the columns of its output_mapping (docs/howto/"
        "enrich.md).",
    )
    schema_file: str | None = Field(
        default=None,
        description="A compiled protobuf FileDescriptorSet to run against (daggers protos build writes one "
        "per version). Default: the version pinned in the checkpoint at the first start, or the "
        "current protos/ for a new dagger.",
    )
    schema_dir: str | None = Field(
        default=None,
        description="A team's own folder of .proto files (relative to the spec file's folder for daggers run; "
        "through a controller, an absolute folder on its host), compiled when the dagger first starts and then "
        "pinned in its checkpoint, like the project's protos/.",
    )
    schema_url: str | None = Field(
        default=None,
        description="A team's compiled FileDescriptorSet at an http(s):// or file:// URL (a schema registry's "
        "versioned artifact; daggers protos build --root DIR --out FILE writes one), read when the "
        "dagger first starts and then pinned in its checkpoint.",
    )
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
        "`daggers run` always runs the dagger in its own application.",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Spark settings for the dagger (e.g. spark.sql.streaming.stateStore.providerClass). "
        "spark.sql.* settings apply to its query in any session; others only when the dagger "
        "starts a Spark application of its own (isolation: dedicated). The cluster sets "
        "spark.master.",
    )

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

    @model_validator(mode="before")
    @classmethod
    def _carried_name(cls, data: Any) -> Any:
        """A carried file's name is checked as ``udf_file``'s problem (its line), not the content's."""
        if isinstance(data, dict) and data.get("udf_file_base64") is not None:
            name = data.get("udf_file")
            if problem := carried_name_problem(name if isinstance(name, str) else None):
                detail = InitErrorDetails(
                    type=PydanticCustomError("value_error", "Value error, {problem}", {"problem": problem}),
                    loc=("udf_file",) if name is not None else ("udf_file_base64",),
                    input=name,
                )
                raise ValidationError.from_exception_data(cls.__name__, [detail])
        return data

    @field_validator("udf_file_base64")
    @classmethod
    def _udf_file_base64(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        decode_carried(v)  # ValueError: no base64, too large, no UTF-8 text
        return v

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(
                f"{v!r} must be 2-63 lower-case letters, digits or dashes, starting with a letter"
            )
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
