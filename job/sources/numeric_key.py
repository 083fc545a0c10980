"""Compute a numeric key (:mod:`job.sql.numeric_keys`) over a decoded Arrow batch, vectorised with numpy.

The values are Flink's, as the query's Spark expression computes them: DOUBLE arithmetic (IEEE 754, as numpy's),
``FLOOR``/``CEIL`` of a DOUBLE a DOUBLE, and the cast to BIGINT Java's: toward zero, saturated at BIGINT's
bounds, NaN as 0. A NULL input gives a NULL key.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from job.errors import SourceError

_HIGH = 2.0**63  # a DOUBLE at or above it saturates at BIGINT's largest value; at or below -2^63, its least
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
_UNARY = {"neg": np.negative, "floor": np.floor, "ceil": np.ceil}


def _doubles(node: Any, batch: pa.RecordBatch, valid: list[np.ndarray]) -> np.ndarray | np.float64:
    kind = node[0]
    if kind == "col":
        column = batch.column(batch.schema.get_field_index(node[1]))
        if column.null_count:
            valid.append(np.asarray(column.is_valid()))
        return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    if kind == "num":
        return np.float64(float(node[1]))
    if kind in _BINARY:
        return _BINARY[kind](_doubles(node[1], batch, valid), _doubles(node[2], batch, valid))
    if kind in _UNARY:
        return _UNARY[kind](_doubles(node[1], batch, valid))
    raise SourceError(f"unknown operation {kind!r} in a numeric key")


def bigint_of(program: Any, batch: pa.RecordBatch) -> pa.Array:
    """Return the BIGINT key ``program`` (``["bigint", <DOUBLE program>]``) of every row of ``batch``.

    Raises SourceError for a program this version does not read."""
    if not (isinstance(program, list) and len(program) == 2 and program[0] == "bigint"):
        raise SourceError(f"a numeric key's program must be ['bigint', ...], not {program!r}")
    valid: list[np.ndarray] = []
    with np.errstate(all="ignore"):  # IEEE: a division by zero is an infinity or NaN, as in the query
        values = np.broadcast_to(_doubles(program[1], batch, valid), (batch.num_rows,))
        high, low, nan = values >= _HIGH, values <= -_HIGH, np.isnan(values)
        whole = np.trunc(np.where(high | low | nan, 0.0, values)).astype(np.int64)
    whole[high] = np.iinfo(np.int64).max
    whole[low] = np.iinfo(np.int64).min
    mask = ~np.logical_and.reduce(valid) if valid else None
    return pa.array(whole, type=pa.int64(), mask=mask)
