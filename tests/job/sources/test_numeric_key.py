"""The source computes a numeric key (job.sources.numeric_key) exactly as the query's Spark expression does,
which gives Flink's values (tests/bench/test_flink_compat.py's ``grid-key`` probes): the edges of DOUBLE and
BIGINT (NaN, the infinities, -0.0, 2^52, 2^63, the largest DOUBLE), halves, NULLs and a million random values."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from job.errors import SourceError
from job.sources.numeric_key import bigint_of
from job.sql import translate
from job.sql.numeric_keys import NumericKey

TABLES = {"t": {"lat": "DOUBLE", "long": "DOUBLE", "rowtime": "TIMESTAMP"}}
KEYS = [
    "CAST(FLOOR(lat * 100) AS BIGINT)",
    "CAST(CEIL(lat / 0.01) AS BIGINT)",
    "CAST(FLOOR(-lat * 0.5 + long) AS BIGINT)",
    "CAST(lat * 3 - 0.5 AS BIGINT)",
    "CAST(FLOOR(lat / long) AS BIGINT)",
    "CAST(lat AS BIGINT)",
]
EDGES = [
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    0.5,
    -0.5,
    1.5,
    -2.5,
    0.005,
    -0.015,
    106.8,
    -6.2,
    2.0**52,
    2.0**52 + 1,
    -(2.0**52) - 0.5,
    2.0**63,
    -(2.0**63),
    2.0**63 * 0.999,
    9.223372036854775e16,
    1.7976931348623157e308,
    -1.7976931348623157e308,
    5e-324,
    None,
]


def _key(key: str) -> NumericKey:
    sql = f"SELECT {key} AS k, COUNT(*) AS n FROM t GROUP BY TUMBLE(rowtime, INTERVAL '1' MINUTE), {key}"
    (column,) = translate(sql, TABLES).derived["t"]
    assert isinstance(column, NumericKey)
    return column


def _batch() -> pa.RecordBatch:
    rng = np.random.default_rng(7)
    random = np.concatenate(
        [
            rng.uniform(-180, 180, 200_000),
            rng.integers(-18000, 18000, 200_000) / 100,  # on the bins' edges, as far as DOUBLE holds them
            rng.standard_normal(200_000) * 10.0 ** rng.integers(-5, 300, 200_000),
        ]
    ).tolist()
    lats = [e for e in EDGES for _ in EDGES] + random
    longs = [e for _ in EDGES for e in EDGES] + random[::-1]
    return pa.record_batch(
        [pa.array(lats, pa.float64()), pa.array(longs, pa.float64())], names=["lat", "long"]
    )


@pytest.mark.integration
def test_the_source_computes_the_value_spark_computes(spark: Any) -> None:
    batch = _batch()
    frame = spark.createDataFrame(pa.Table.from_batches([batch]))  # NaN stays NaN, None NULL
    keys = [_key(k) for k in KEYS]
    spark_values = frame.selectExpr(*(f"{k.spark_expr()} AS `{k.name}`" for k in keys)).toArrow()
    for key, text in zip(keys, KEYS, strict=True):
        ours = bigint_of(key.program, batch)
        theirs = spark_values.column(key.name).combine_chunks()
        assert ours.type == theirs.type == pa.int64()
        differ = [i for i in range(len(ours)) if ours[i] != theirs[i]]
        assert not differ, (
            text,
            [(batch.column(0)[i], batch.column(1)[i], ours[i], theirs[i]) for i in differ[:5]],
        )


def test_nulls_edges_and_an_empty_batch() -> None:
    batch = pa.record_batch(
        [
            pa.array([1.5, None, math.nan, -math.inf, 2.0**70, -0.5]),
            pa.array([1.0, 2.0, None, 1.0, 1.0, 1.0]),
        ],
        names=["lat", "long"],
    )
    grid = _key("CAST(FLOOR(lat * 100) AS BIGINT)").program
    assert bigint_of(grid, batch).to_pylist() == [150, None, 0, -(2**63), 2**63 - 1, -50]
    both = _key("CAST(FLOOR(lat + long) AS BIGINT)").program
    assert bigint_of(both, batch).to_pylist() == [2, None, None, -(2**63), 2**63 - 1, 0]
    assert bigint_of(grid, batch.slice(0, 0)).to_pylist() == []


def test_a_program_of_another_version_is_a_clear_error() -> None:
    batch = pa.record_batch([pa.array([1.0])], names=["lat"])
    with pytest.raises(SourceError, match="unknown operation 'pow'"):
        bigint_of(["bigint", ["pow", ["col", "lat"], ["num", "2"]]], batch)
    with pytest.raises(SourceError, match=r"must be \['bigint', \.\.\.\]"):
        bigint_of(["double", ["col", "lat"]], batch)
