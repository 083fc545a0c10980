"""Feature rows (the original platform's Feast functions) over Arrow arrays.

A feature row is ``struct<key, value, name>`` where ``value`` has one field per type, in the
original's order (ByteType 0 … TimestampType 7), of which the one of the value's type is set:
``Features`` picks it from the value's SQL type, ``FeaturesWithType`` and
``SingleFeatureWithType`` from a type name (those two are Spark built-ins: :mod:`job.sql.feature_rows`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from job.errors import FunctionError

#: The SQL name the rewrite of Features calls (registered by job.functions.spark_udfs).
FEATURE_ROWS_UDF = "dagger_feature_rows"

TIMESTAMP_TYPE = "struct<seconds:bigint,nanos:int>"
VALUE_FIELDS: tuple[tuple[str, str], ...] = (
    ("bytes_val", "binary"),
    ("string_val", "string"),
    ("int32_val", "int"),
    ("int64_val", "bigint"),
    ("double_val", "double"),
    ("float_val", "float"),
    ("bool_val", "boolean"),
    ("timestamp_val", TIMESTAMP_TYPE),
)
"""The fields of a feature's value, in the original's index order (its ``ValueEnum``)."""
VALUE_TYPE = "struct<" + ",".join(f"{n}:{t}" for n, t in VALUE_FIELDS) + ">"
FEATURE_ROW_TYPE = f"struct<key:string,value:{VALUE_TYPE},name:string>"
FEATURE_ROWS_TYPE = f"array<{FEATURE_ROW_TYPE}>"

_TIMESTAMP_ARROW = pa.struct([("seconds", pa.int64()), ("nanos", pa.int32())])
_ARROW: tuple[pa.DataType, ...] = (
    pa.binary(),
    pa.string(),
    pa.int32(),
    pa.int64(),
    pa.float64(),
    pa.float32(),
    pa.bool_(),
    _TIMESTAMP_ARROW,
)
_VALUE_ARROW = pa.struct([(name, t) for (name, _), t in zip(VALUE_FIELDS, _ARROW, strict=True)])
_FEATURE_ARROW = pa.struct([("key", pa.string()), ("value", _VALUE_ARROW), ("name", pa.string())])


def _timestamps(values: pa.Array) -> pa.Array:
    micros = pc.cast(values.cast(pa.timestamp("us", tz="UTC")), pa.int64())
    np_micros = pc.fill_null(micros, 0).to_numpy(zero_copy_only=False)
    seconds = np.floor_divide(np_micros, 1_000_000)
    nanos = ((np_micros - seconds * 1_000_000) * 1000).astype(np.int32)
    return pa.StructArray.from_arrays(
        [pa.array(seconds, pa.int64()), pa.array(nanos, pa.int32())],
        fields=list(_TIMESTAMP_ARROW),
        mask=pc.is_null(micros),
    )


def _slot(values: pa.Array, position: int) -> tuple[int | None, pa.Array]:
    """Return (value field index, values cast to that field's type) for the SQL type of ``values``.

    Raises TypeError for a type the original had no feature value for (arrays, maps, …).
    """
    t = values.type
    if pa.types.is_null(t):
        return None, values
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return 0, values.cast(pa.binary())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return 1, values.cast(pa.string())
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return 2, values.cast(pa.int32())
    if pa.types.is_int64(t):
        return 3, values
    if pa.types.is_float64(t) or pa.types.is_decimal(t):
        return 4, values.cast(pa.float64())
    if pa.types.is_float32(t):
        return 5, values
    if pa.types.is_boolean(t):
        return 6, values
    if pa.types.is_timestamp(t):
        return 7, _timestamps(values)
    if pa.types.is_struct(t) and [f.name for f in t] == ["seconds", "nanos"]:
        return 7, values.cast(_TIMESTAMP_ARROW)
    raise FunctionError(
        f"Features: value {position} is {t}; a feature value is a string, number, boolean, bytes or timestamp"
    )


def _interleave(arrays: list[pa.Array], order: pa.Array) -> pa.Array:
    """Row i's elements of every array, in array order: [a0[0], a1[0], …, a0[1], a1[1], …]."""
    return pa.concat_arrays(arrays).take(order)


def feature_rows_arrow(*args: pa.Array) -> pa.Array:
    """The feature rows of (key, value) pairs, one list per row in argument order: ``Features``'s
    per-event part (the aggregate concatenates the lists of a window). Arrays are interleaved per
    leaf field (flat takes), then assembled once."""
    pairs = len(args) // 2
    n = len(args[0])
    order = pa.array((np.arange(pairs)[None, :] * n + np.arange(n)[:, None]).ravel())  # row i, pair j
    keys = [pc.fill_null(args[2 * j].cast(pa.string()), "null") for j in range(pairs)]  # String.valueOf(null)
    slots = [_slot(args[2 * j + 1], j + 1) for j in range(pairs)]
    children = [
        _interleave([cast if slot == i else pa.nulls(n, t) for slot, cast in slots], order)
        for i, t in enumerate(_ARROW)
    ]
    value = pa.StructArray.from_arrays(children, fields=list(_VALUE_ARROW))
    key = _interleave(keys, order)
    rows = pa.StructArray.from_arrays([key, value, key], fields=list(_FEATURE_ARROW))
    offsets = pa.array(np.arange(0, n * pairs + 1, pairs, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, rows)
