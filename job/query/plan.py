"""Plan a dagger without Spark: resolve schemas, translate the SQL, and build source configs.

``daggers sql check`` and ``daggers sql translate`` stop here; ``daggers run`` starts Spark on the plan.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from job.errors import SpecError
from job.schema.registry import SchemaRegistry, default_registry
from job.schema.sql_types import column_types
from job.schema.team import team_schema_from_dir, team_schema_from_url
from job.sources.kafka import SourceConfig
from job.spec import DaggerSpec
from job.sql import Translation, translate
from job.sql.rewrite import interval_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from job.sql.catalog import DaggerFunction


@dataclass(frozen=True)
class StreamPlan:
    """One stream: its table, the source config and the event-time column."""

    table: str
    source: SourceConfig
    timestamp_field: str
    timestamp_kind: str


#: The shortest trigger of a light dagger that keeps no state (a pass-through): a micro-batch costs ~0.15
#: core-s of planning and scheduling however small it is, so at 2 s a dozen light pass-throughs took most
#: of a 2-core machine; at 5 s their rows still arrive within the light daggers' 10-s goal.
LIGHT_TRIGGER_S = 5.0


@dataclass(frozen=True)
class DaggerPlan:
    """Everything needed to start a dagger."""

    spec: DaggerSpec
    translation: Translation
    streams: list[StreamPlan]
    checkpoint: Path
    features: dict[str, str] = field(default_factory=lambda: dict(ENGINE_FEATURES))

    @property
    def trigger_interval_s(self) -> float:
        """The query's trigger interval: the spec's, but at least :data:`LIGHT_TRIGGER_S` for a ``light``
        dagger that keeps no state (no window, no join), whose every micro-batch costs about the same CPU
        however few records it reads."""
        stateless = not self.translation.aggregates and self.translation.join_lag_ms == 0
        if self.spec.light and stateless:
            return max(self.spec.trigger_interval_s, LIGHT_TRIGGER_S)
        return self.spec.trigger_interval_s

    @property
    def bad_records_dir(self) -> Path:
        """The folder holding every stream's bad-record files (one sub-folder per table)."""
        return self.checkpoint / "bad_records"


PINNED_SCHEMA = "schema.pb"
PINNED_ENGINE = "engine.json"
# How the engine lays out a dagger's window state. A checkpoint keeps the layout it was started with
# (its state could not be read with another), so a change here reaches new daggers and fresh starts.
ENGINE_FEATURES: dict[str, str] = {
    "s2_keys": "int64",  # S2 cells pushed into the source are 64-bit keys, not text
    "group_keys": "window_last",  # a GROUP BY's window is the last part of the state key, see job.sql.rewrite
    # DistinctCount's state is one sorted byte array (job.spark.jvm), not collect_set's array: see
    # job.sql.rewrite.rewrite_distinct_count_bytes
    "distinct_count": "sorted_bytes",
    # a heavy windowed dagger reads new records every GATHER_S far from a window boundary, at every trigger
    # near one (job.sources.pacing); "every_trigger": at every trigger
    "read_pacing": "gather",
    # the source aggregates a task's records per window and key before Spark does, where every aggregate is
    # COUNT, SUM, MIN, MAX, AVG or DistinctCount (job.sql.partial); "source": where every aggregate is a
    # DistinctCount; "spark": Spark aggregates every record
    "partial_aggregation": "source_simple",
    # a numeric GROUP BY key such as CAST(FLOOR(lat * 100) AS BIGINT) is computed by the source
    # (job.sql.numeric_keys); "spark": by Spark
    "numeric_keys": "source",
}
#: How long a windowed dagger with ``read_pacing: gather`` lets records gather between reads, far from a
#: window boundary (job.sources.pacing); a trigger interval this long or longer makes it moot.
GATHER_S = 8.0
# What a checkpoint ran with before a feature was pinned: a checkpoint with no engine.json (started before
# any was pinned), and a feature missing from an engine.json written before that feature existed.
_BEFORE_PINNING = {
    "s2_keys": "string",
    "group_keys": "as_written",
    "distinct_count": "collect_set",
    "read_pacing": "every_trigger",
    "partial_aggregation": "spark",
    "numeric_keys": "spark",
}


def engine_features(checkpoint: Path) -> dict[str, str]:
    """Return the engine features a dagger runs with: those pinned in its checkpoint; for a checkpoint
    that has run but pinned none (older engine), the features of that engine; else the current ones."""
    pinned = checkpoint / PINNED_ENGINE
    if pinned.is_file():
        return {**_BEFORE_PINNING, **json.loads(pinned.read_text())}
    offsets = checkpoint / "spark" / "offsets"
    if offsets.is_dir() and any(offsets.iterdir()):
        return dict(_BEFORE_PINNING)
    return dict(ENGINE_FEATURES)


def schema_for(spec: DaggerSpec, checkpoint: Path) -> SchemaRegistry:
    """Return the schema version a dagger runs against.

    ``schema_file`` when the spec names one; else the version pinned in the checkpoint when the
    dagger first started (so a change to protos/, to the team's ``schema_dir`` or to what its
    ``schema_url`` serves never changes a running dagger); else the team's ``schema_url`` or
    ``schema_dir``; else the current protos/. Raises SchemaError for a file, folder or URL that is
    missing, does not compile or is not a descriptor set.
    """
    from job.errors import SchemaError

    if spec.schema_file:
        path = Path(spec.schema_file)
        if not path.is_file():
            raise SchemaError(f"schema_file {path} does not exist", hint="daggers protos build writes one")
        try:
            return SchemaRegistry(path.read_bytes())
        except Exception as exc:  # a protobuf DecodeError or TypeError: not a descriptor set
            raise SchemaError(f"schema_file {path} is not a compiled FileDescriptorSet ({exc})") from None
    pinned = checkpoint / PINNED_SCHEMA
    if pinned.is_file():
        return SchemaRegistry(pinned.read_bytes())
    if spec.schema_url:
        return team_schema_from_url(spec.schema_url)
    if spec.schema_dir:
        return team_schema_from_dir(Path(spec.schema_dir))
    return default_registry()


def pin_schema(plan_: DaggerPlan) -> Path:
    """Record the plan's schema version and engine features in its checkpoint (once: the first start
    pins them); return the schema file."""
    import base64

    engine = plan_.checkpoint / PINNED_ENGINE
    if not engine.is_file():
        engine.parent.mkdir(parents=True, exist_ok=True)
        engine.with_suffix(".tmp").write_text(json.dumps(plan_.features))
        engine.with_suffix(".tmp").replace(engine)
    pinned = plan_.checkpoint / PINNED_SCHEMA
    if not pinned.is_file() and plan_.streams:
        pinned.parent.mkdir(parents=True, exist_ok=True)
        tmp = pinned.with_suffix(".tmp")
        tmp.write_bytes(base64.b64decode(plan_.streams[0].source.descriptor_set_b64))
        tmp.replace(pinned)
    return pinned


def _check_dart_store(spec: DaggerSpec) -> None:
    """A query that calls DartGet/DartContains needs a store: raise SpecError when it has none."""
    import os

    from job.sql.calls import called_functions
    from job.sql.parse import parse

    if spec.dart_store or os.environ.get("DAGGERS_DART_STORE"):
        return
    used = called_functions(parse(spec.sql)) & {"dartget", "dartcontains"}
    if used:
        name = "DartGet" if "dartget" in used else "DartContains"
        raise SpecError(
            f"dart_store: the SQL calls {name} but the spec names no store",
            hint="set dart_store: to a folder or an http(s):// URL with dart-get/ and dart-contains/ "
            "(or DAGGERS_DART_STORE)",
        )


def stream_tables(
    spec: DaggerSpec, registry: SchemaRegistry
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Return each stream's table (column -> Spark type) and timestamp kind under ``registry``.

    Pure: reads nothing but its arguments. Raises SchemaError (unknown proto class) or SpecError
    (timestamp field missing or not a time).
    """
    tables: dict[str, dict[str, str]] = {}
    kinds: dict[str, str] = {}
    for i, stream in enumerate(spec.streams):
        fields = registry.fields(stream.proto_class)
        ts = fields.get(stream.timestamp_field)
        if ts is None:
            raise SpecError(
                f"streams[{i}].timestamp_field: {stream.proto_class} has no field "
                f"{stream.timestamp_field!r}; fields: {', '.join(fields)}"
            )
        if ts.kind not in ("timestamp", "int64") or ts.repeated:
            raise SpecError(
                f"streams[{i}].timestamp_field: {stream.timestamp_field!r} is {ts.kind}; it must be "
                "a google.protobuf.Timestamp or an int64 of epoch milliseconds"
            )
        tables[stream.table] = column_types(registry, stream.proto_class)
        kinds[stream.table] = ts.kind
    return tables, kinds


def translate_spec(
    spec: DaggerSpec,
    tables: dict[str, dict[str, str]],
    udfs: dict[str, DaggerFunction] | None,
    features: dict[str, str],
) -> Translation:
    """Return the translation of the spec's SQL over ``tables``, with its lookups checked against the
    query's columns. Pure. Raises SqlError (the query) or SpecError (a lookup's columns)."""
    translation = translate(
        spec.sql,
        tables,
        udfs,
        s2_int_keys=features["s2_keys"] == "int64",
        window_keys_last=features["group_keys"] == "window_last",
        distinct_bytes=features["distinct_count"] == "sorted_bytes",
        # not for a fused dagger (its group's query reads every member's records) or a stream whose
        # transformers change records before the query sees them
        partial=features.get("partial_aggregation") in ("source", "source_simple")
        and spec.isolation != "fused"
        and not any(stream.transformers for stream in spec.streams),
        partial_aggregates=features.get("partial_aggregation") == "source_simple",
        numeric_keys=features.get("numeric_keys") == "source"
        and not any(stream.transformers for stream in spec.streams),
    )
    if spec.lookups and translation.output_columns is not None:  # else checked at start on Spark's schema
        from job.spec import check_lookups

        check_lookups(spec.lookups, translation.output_columns)
    return translation


def plan(
    spec: DaggerSpec,
    state_dir: Path,
    registry: SchemaRegistry | None = None,
    features: dict[str, str] | None = None,
) -> DaggerPlan:
    """Return the plan of ``spec`` on the host the dagger runs on: it reads what the spec names (its
    ``schema_*`` file, folder or URL, its ``udf_file``, its checkpoint's pinned features) and the
    host's environment (``DAGGERS_DART_STORE``). A server checks a spec with :func:`job.control.spec_check.check_spec`
    instead, which reads none of them. ``features`` override engine features (a preview's).

    Raises SchemaError (unknown proto class), SpecError (timestamp field missing or not a time)
    or SqlError (the query).
    """
    checkpoint = spec.resolved_checkpoint(state_dir)
    registry = registry or schema_for(spec, checkpoint)
    udfs = None
    if spec.udf_file:
        from job.functions.user import catalog_entries, load_user_functions

        udfs = catalog_entries(load_user_functions(spec.udf_file))
    _check_dart_store(spec)
    return plan_with(spec, registry, udfs, {**engine_features(checkpoint), **(features or {})}, checkpoint)


def plan_with(
    spec: DaggerSpec,
    registry: SchemaRegistry,
    udfs: dict[str, DaggerFunction] | None,
    features: dict[str, str],
    checkpoint: Path,
) -> DaggerPlan:
    """Return the plan of ``spec`` from what :func:`plan` read: the schema version, the user functions,
    the engine features and the checkpoint folder (only named in the plan, never read). Pure.

    Raises as :func:`plan`.
    """
    tables, kinds = stream_tables(spec, registry)
    translation = translate_spec(spec, tables, udfs, features)
    close_period_ms = 0
    paced = translation.join_lag_ms is not None  # windows close at known boundaries (interval joins at most)
    if translation.aggregates and translation.window and spec.close_windows_promptly:
        size, slide = translation.window
        close_period_ms = interval_ms(slide or size)  # windows end every slide (HOP) or size (TUMBLE)
    streams = []
    for stream in spec.streams:
        columns = sorted(
            set(translation.columns.get(stream.table, []))
            | {stream.timestamp_field}
            | stream.transformer_columns()
        )
        streams.append(
            StreamPlan(
                table=stream.table,
                timestamp_field=stream.timestamp_field,
                timestamp_kind=kinds[stream.table],
                source=SourceConfig(
                    bootstrap_servers=stream.bootstrap_servers,
                    topics=list(stream.topics),
                    proto_class=stream.proto_class,
                    descriptor_set_b64=registry.to_b64(),
                    columns=columns,
                    start_from=stream.start_from,
                    max_records_per_batch=stream.max_records_per_batch,
                    bad_records=stream.bad_records,
                    bad_records_dir=str(checkpoint / "bad_records" / stream.table),
                    derived=[d.to_json() for d in translation.derived.get(stream.table, [])],
                    hidden=sorted(
                        set(translation.derived_only.get(stream.table, []))
                        - {stream.timestamp_field}
                        - stream.transformer_columns()
                    ),
                    # a transformer may keep the first of equal rows (deduplicate): arrival order then
                    batch_order="" if stream.transformers else translation.batch_order.get(stream.table, ""),
                    consumer_config=dict(stream.consumer_config),
                    max_outage_s=stream.max_outage_s,
                    fail_on_data_loss=stream.fail_on_data_loss,
                    dead_letter_topic=stream.dead_letter_topic or f"{spec.name}-{stream.table}-dead-letter",
                    failover_bootstrap_servers=stream.failover.bootstrap_servers if stream.failover else "",
                    failover_after_s=stream.failover.after_s if stream.failover else 30.0,
                    positions_dir=str(checkpoint / "positions" / stream.table) if stream.failover else "",
                    loss_dir=str(checkpoint / "data-loss" / stream.table),
                    close_period_ms=close_period_ms,
                    # an interval join emits a window only once the watermark is past its interval too
                    close_delay_ms=spec.watermark_delay_ms + (translation.join_lag_ms or 0),
                    align_ms=spec.watermark_delay_ms // 2,
                    read_at_close=(spec.read_at_window_close or spec.light) and close_period_ms > 0 and paced,
                    gather_ms=(
                        int(GATHER_S * 1000)
                        if features.get("read_pacing") == "gather" and close_period_ms > 0 and paced
                        else 0
                    ),
                    partial=(
                        # a sum past BIGINT wraps around where Spark's arithmetic is not ANSI, as Spark's
                        dataclasses.replace(
                            partial,
                            time=stream.timestamp_field,
                            wrap=spec.spark_conf.get("spark.sql.ansi.enabled", "true").lower() == "false",
                        ).to_json()
                        if (partial := translation.partial.get(stream.table)) is not None
                        else None
                    ),
                    # a source that aggregates first hands over fewer rows the more records a task groups:
                    # a micro-batch in as many tasks as the dagger's parallelism, no more
                    max_tasks=spec.parallelism if stream.table in translation.partial else 0,
                ),
            )
        )
    return DaggerPlan(
        spec=spec, translation=translation, streams=streams, checkpoint=checkpoint, features=features
    )


def register_plan_functions(spark: SparkSession, plan: DaggerPlan) -> None:
    """Register the functions a planned dagger can call on ``spark``: the library, its darts on its
    store, its schema version for Filters/SelectFields, and its ``udf_file``."""
    from job.functions.spark_udfs import register_functions

    schema = plan.streams[0].source.descriptor_set_b64 if plan.streams else None
    register_functions(spark, plan.spec.udf_file, plan.spec.dart_store, schema)
