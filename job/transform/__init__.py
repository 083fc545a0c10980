"""Transformers: per-stream steps before the SQL, and steps on the SQL's result before the sinks.

Configured in the spec (see issue 3). With none configured, both functions return their input.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame


def apply_stream_transformers(df: DataFrame, stream: Any) -> DataFrame:
    """Apply a stream's configured transformers (after its watermark, before the SQL)."""
    return df


def apply_output_transformers(df: DataFrame, spec: Any) -> DataFrame:
    """Apply the transformers configured on the SQL's result (before the sinks)."""
    return df
