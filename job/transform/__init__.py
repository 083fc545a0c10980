"""Transformers: per-stream steps before the SQL, and steps on the SQL's result before the sinks.

Configured in the spec (``streams[i].transformers`` and the dagger's ``transformers``), applied in
order, all as Spark column expressions or built-in stateful operators (no Python per row):

* ``deduplicate`` — drops a record whose key was seen less than ``ttl_s`` of event time earlier
  (Spark's ``dropDuplicatesWithinWatermark``, with the key's state kept ``ttl_s`` past its first
  record's event time, then evicted once the watermark passes that point);
* ``invalid_record_filter`` — drops records with a missing required value, a value out of range, or
  failing a condition. Such records do not move the watermark either (Spark filters them out below
  it, unless the condition reads rowtime);
* ``hash`` — replaces columns by the SHA-256 of their text (64 hex digits; NULL stays NULL).

With none configured, both functions return their input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from job.errors import SpecError
from job.spec import (
    DaggerSpec,
    DeduplicateTransformer,
    HashTransformer,
    InvalidRecordFilter,
    StreamSpec,
    TransformerSpec,
)

DELAY_KEY = "spark.watermarkDelayMs"  # Spark's column metadata key for an event-time column's delay


def _need(df: DataFrame, columns: Sequence[str], where: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SpecError(f"{where}: no column {', '.join(missing)}; the rows have {', '.join(df.columns)}")


def _present(df: DataFrame, name: str) -> Column:
    """Return the condition that column ``name`` has a value (not NULL, not '', not NaN)."""
    col = F.col(name)
    kind = df.schema[name].dataType
    if isinstance(kind, T.StringType):
        return col.isNotNull() & (col != F.lit(""))
    if isinstance(kind, T.FloatType | T.DoubleType):
        return col.isNotNull() & ~F.isnan(col)
    return col.isNotNull()


def valid_condition(df: DataFrame, t: InvalidRecordFilter, where: str) -> Column:
    """Return the condition a valid record satisfies under ``t``. Raises SpecError for an unknown column."""
    _need(df, [*t.required, *t.ranges], where)
    cond = F.lit(True)
    for name in t.required:
        cond = cond & _present(df, name)
    for name, (low, high) in t.ranges.items():
        col = F.col(name)
        cond = cond & col.isNotNull()
        if low is not None:
            cond = cond & (col >= F.lit(low))
        if high is not None:
            cond = cond & (col <= F.lit(high))
    if t.where:
        try:
            cond = cond & F.coalesce(F.expr(t.where).cast("boolean"), F.lit(False))
        except Exception as exc:  # Spark's parse errors are plain exceptions
            raise SpecError(f"{where}.where: {str(exc).splitlines()[0]}") from None
    return cond


def event_time_column(df: DataFrame) -> str | None:
    """Return the name of the frame's event-time (watermarked) column, if it has one."""
    for field in df.schema.fields:
        if DELAY_KEY in (field.metadata or {}):
            return field.name
    return None


def deduplicate(df: DataFrame, t: DeduplicateTransformer, where: str) -> DataFrame:
    """Return ``df`` without records whose key was kept less than ``t.ttl_s`` (event time) before.

    Raises SpecError for an unknown key column or a frame without an event-time column.
    """
    _need(df, t.keys, where)
    rowtime = event_time_column(df)
    if rowtime is None:
        raise SpecError(f"{where}: deduplicate needs the event time among the columns (select rowtime)")
    metadata: dict[str, Any] = dict(df.schema[rowtime].metadata)
    # dropDuplicatesWithinWatermark keeps a key until the watermark passes its event time plus the
    # column's delay: lend it the TTL as that delay, then give the column its own delay back.
    ttl = {**metadata, DELAY_KEY: t.ttl_s * 1000}
    out = df.withColumn(rowtime, F.col(rowtime).alias(rowtime, metadata=ttl)).dropDuplicatesWithinWatermark(
        list(t.keys)
    )
    return out.withColumn(rowtime, F.col(rowtime).alias(rowtime, metadata=metadata))


def hash_columns(df: DataFrame, t: HashTransformer, where: str) -> DataFrame:
    """Return ``df`` with each of ``t.columns`` replaced by the SHA-256 hex digest of its text."""
    _need(df, t.columns, where)
    for name in t.columns:
        df = df.withColumn(name, F.sha2(F.col(name).cast("string"), 256))
    return df


def apply(df: DataFrame, transformers: Sequence[TransformerSpec], where: str) -> DataFrame:
    """Apply ``transformers`` in order; ``where`` names them in errors (``streams[booking].transformers``)."""
    for i, t in enumerate(transformers):
        here = f"{where}[{i}] ({t.type})"
        if isinstance(t, DeduplicateTransformer):
            df = deduplicate(df, t, here)
        elif isinstance(t, InvalidRecordFilter):
            df = df.where(valid_condition(df, t, here))
        else:
            df = hash_columns(df, t, here)
    return df


def apply_stream_transformers(df: DataFrame, stream: StreamSpec) -> DataFrame:
    """Apply a stream's configured transformers (after its watermark, before the SQL).

    Raises SpecError naming the transformer and the column it cannot find.
    """
    return apply(df, stream.transformers, f"streams[{stream.table}].transformers")


def apply_output_transformers(df: DataFrame, spec: DaggerSpec) -> DataFrame:
    """Apply the transformers configured on the SQL's result (before the sinks).

    Raises SpecError naming the transformer and the column it cannot find.
    """
    return apply(df, spec.transformers, "transformers")
