"""Register the Dagger function library with a SparkSession.

Most Dagger functions are rewritten into Spark built-ins by :mod:`job.sql.library` and need no
registration. The ones Spark has nothing for run as Arrow UDFs: Spark hands each Python worker whole
Arrow arrays, and the work is numpy-vectorised (no per-row Python), except JsonUpdate/JsonDelete,
which parse each document. A dagger's own functions (``udf_file``) are registered here too.
"""

from __future__ import annotations

import functools
import hashlib
import os
import weakref
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.functions import arrow_udf, udf

from job.functions.feature_rows import FEATURE_ROWS_TYPE, FEATURE_ROWS_UDF, feature_rows_arrow
from job.functions.proto_fields import FILTERS_UDF, SELECT_FIELDS_UDF
from job.spark import jvm as jvm_functions
from job.spark import worker_heap

OUTLIER_RETURN = (
    "array<struct<timestamp:timestamp,value:double,upper_bound:double,lower_bound:double,is_outlier:boolean>>"
)
_UINT64_MAX = "18446744073709551615"
_INT64_MIN_ABS = "9223372036854775808"


def _floats(values: pa.Array) -> npt.NDArray[np.float64]:
    floats: npt.NDArray[np.float64] = pc.fill_null(values.cast(pa.float64()), np.nan).to_numpy(
        zero_copy_only=False
    )
    return floats


def s2id_arrow(lat: pa.Array, lng: pa.Array, level: pa.Array) -> pa.Array:
    """S2Id over Arrow arrays: the signed decimal cell id string, NULL where any input is NULL, not
    finite, or the level is not 0..30."""
    return pc.cast(s2cell_arrow(lat, lng, level), pa.string())  # Arrow's C++ cast: ~7M/s


def s2cell_arrow(lat: pa.Array, lng: pa.Array, level: pa.Array) -> pa.Array:
    """The cell ids of :func:`s2id_arrow` as signed 64-bit integers (same NULLs)."""
    from job.functions import s2

    lat_np, lng_np = _floats(lat), _floats(lng)
    lvl = pc.fill_null(level.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(lat_np) | ~np.isfinite(lng_np) | (lvl < 0) | (lvl > 30)
    if len(lvl) and (lvl == lvl[0]).all():
        level_arg: int | np.ndarray = int(lvl[0]) if 0 <= lvl[0] <= 30 else 0
    else:
        level_arg = np.where(bad, 0, lvl)
    ids = s2.latlng_to_cell_id(np.where(bad, 0.0, lat_np), np.where(bad, 0.0, lng_np), level_arg)
    signed = pa.array(s2.to_signed(ids), pa.int64())
    return pc.if_else(pa.array(bad), pa.scalar(None, pa.int64()), signed) if bad.any() else signed


def parse_cell_ids(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Return (uint64 ids, valid) of signed or unsigned decimal S2 id strings; invalid text is not valid."""
    text = text.cast(pa.string())
    shape = pc.fill_null(pc.match_substring_regex(text, r"^(-[0-9]{1,19}|[0-9]{1,20})$"), False)
    length = pc.fill_null(pc.utf8_length(text), 0)
    neg = pc.fill_null(pc.starts_with(text, "-"), False)
    too_big = pc.or_(
        pc.and_(pc.equal(length, 20), pc.greater(text, _UINT64_MAX)),
        pc.and_(
            pc.and_(neg, pc.equal(length, 20)), pc.greater(pc.utf8_slice_codeunits(text, 1), _INT64_MIN_ABS)
        ),
    )
    valid = pc.and_(shape, pc.invert(pc.fill_null(too_big, False))).to_numpy(zero_copy_only=False)
    neg_np = neg.to_numpy(zero_copy_only=False)
    ids = np.zeros(len(text), dtype=np.uint64)
    pos_rows, neg_rows = np.flatnonzero(valid & ~neg_np), np.flatnonzero(valid & neg_np)
    if pos_rows.size:
        ids[pos_rows] = pc.cast(text.take(pa.array(pos_rows)), pa.uint64()).to_numpy(zero_copy_only=False)
    if neg_rows.size:
        ids[neg_rows] = (
            pc.cast(text.take(pa.array(neg_rows)), pa.int64()).to_numpy(zero_copy_only=False).view(np.uint64)
        )
    return ids, valid


def s2_area_arrow(ids: pa.Array) -> pa.Array:
    """S2AreaInKm2 over Arrow arrays: the exact cell area in km², NULL for NULL or invalid ids."""
    from job.functions import s2

    cells, valid = parse_cell_ids(ids)
    area = s2.cell_area_km2(np.where(valid, cells, np.uint64(0)))
    return pa.array(area, pa.float64(), mask=~valid | np.isnan(area))


def geohash_arrow(lat: pa.Array, lng: pa.Array, length: pa.Array) -> pa.Array:
    """GeoHash over Arrow arrays (see :func:`job.functions.geo.geohash`)."""
    from job.functions.geo import geohash

    return geohash(_floats(lat), _floats(lng), _floats(length))


def _json_value(value: Any) -> Any:
    """Return a SQL value as a JSON-encodable Python value."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value


def _paths(paths: pa.Array) -> Callable[[str | None], tuple[str | int, ...] | None]:
    from job.functions.json_path import JsonPathError, parse_path

    cache: dict[str, tuple[str | int, ...] | None] = {}

    def steps(path: str | None) -> tuple[str | int, ...] | None:
        if path is None:
            return None
        if path not in cache:
            try:
                cache[path] = parse_path(path)
            except JsonPathError:
                cache[path] = None
        return cache[path]

    return steps


def json_update_arrow(doc: pa.Array, path: pa.Array, value: pa.Array) -> pa.Array:
    """JsonUpdate over Arrow arrays (one JSON parse per row; see :func:`job.functions.json_path.update`)."""
    from job.functions.json_path import update

    steps = _paths(path)
    out = []
    for text, p, v in zip(doc.to_pylist(), path.to_pylist(), value.to_pylist(), strict=True):
        s = steps(p)
        out.append(None if text is None or s is None else update(text, s, _json_value(v)))
    return pa.array(out, pa.string())


def json_delete_arrow(doc: pa.Array, path: pa.Array) -> pa.Array:
    """JsonDelete over Arrow arrays (one JSON parse per row; see :func:`job.functions.json_path.delete`)."""
    from job.functions.json_path import delete

    steps = _paths(path)
    out = []
    for text, p in zip(doc.to_pylist(), path.to_pylist(), strict=True):
        s = steps(p)
        out.append(None if text is None or s is None else delete(text, s))
    return pa.array(out, pa.string())


def linear_trend_arrow(
    timestamps: pa.Array, values: pa.Array, hop_start: pa.Array, window: pa.Array
) -> pa.Array:
    """LinearTrend over Arrow arrays (see :func:`job.functions.series.linear_trend`)."""
    from job.functions.series import linear_trend

    return linear_trend(timestamps, values, hop_start, window)


def ema_arrow(
    timestamps: pa.Array, values: pa.Array, hop_start: pa.Array, window: pa.Array, alpha: pa.Array
) -> pa.Array:
    """ExponentialMovingAverage over Arrow arrays (see :func:`job.functions.series.exponential_moving_average`)."""
    from job.functions.series import exponential_moving_average

    return exponential_moving_average(timestamps, values, hop_start, window, alpha)


def outlier_mad_arrow(
    values: pa.Array,
    timestamps: pa.Array,
    window_start: pa.Array,
    window: pa.Array,
    observation: pa.Array,
    tolerance: pa.Array,
    percentage: pa.Array,
) -> pa.Array:
    """OutlierMad over Arrow arrays: per row a list of point structs (see :func:`job.functions.series.outlier_mad`)."""
    from job.functions.series import outlier_mad

    return outlier_mad(values, timestamps, window_start, window, observation, tolerance, percentage)


DART_UDFS = {"DartGet": "string", "DartContains": "boolean"}
"""Return types of the look-ups registered per dagger (their store is the spec's)."""

LIBRARY_UDFS: dict[str, tuple[Callable[..., pa.Array], str]] = {
    "S2Id": (s2id_arrow, "string"),
    "S2AreaInKm2": (s2_area_arrow, "double"),
    "GeoHash": (geohash_arrow, "string"),
    "JsonUpdate": (json_update_arrow, "string"),
    "JsonDelete": (json_delete_arrow, "string"),
    "LinearTrend": (linear_trend_arrow, "double"),
    "ExponentialMovingAverage": (ema_arrow, "double"),
    "OutlierMad": (outlier_mad_arrow, OUTLIER_RETURN),
    FEATURE_ROWS_UDF: (feature_rows_arrow, FEATURE_ROWS_TYPE),
}


def dart_functions(store: str | None) -> dict[str, Callable[..., pa.Array]]:
    """Return DartGet and DartContains reading the collections of ``store`` (a folder or URL; default:
    ``DAGGERS_DART_STORE``). Without a store they fail the query with a line that says so."""
    from job.errors import FunctionError
    from job.functions.dart import dart_contains, dart_get, store_url

    store = store or os.environ.get("DAGGERS_DART_STORE")
    url = store_url(store) if store else ""

    def DartGet(names: pa.Array, keys: pa.Array, hours: pa.Array, *default: pa.Array) -> pa.Array:  # noqa: N802
        if not url:
            raise FunctionError("DartGet: no dart store; set dart_store in the spec (or DAGGERS_DART_STORE)")
        return dart_get(url, names, keys, hours, default[0] if default else None)

    def DartContains(names: pa.Array, values: pa.Array, *rest: pa.Array) -> pa.Array:  # noqa: N802
        if not url:
            raise FunctionError(
                "DartContains: no dart store; set dart_store in the spec (or DAGGERS_DART_STORE)"
            )
        return dart_contains(url, names, values, *rest)

    return {"DartGet": DartGet, "DartContains": DartContains}


def schema_functions(descriptor_set_b64: str | None) -> dict[str, Callable[..., pa.Array]]:
    """Return Filters' and SelectFields' UDFs reading messages with the schema version of a dagger
    (a base64 FileDescriptorSet; default: the project's protos/)."""
    from job.functions.proto_fields import filters, select_fields

    schema = descriptor_set_b64 or ""

    def run_filters(lists: pa.Array, classes: pa.Array, predicates: pa.Array) -> pa.Array:
        return filters(schema, lists, classes, predicates)

    def run_select_fields(lists: pa.Array, classes: pa.Array, paths: pa.Array) -> pa.Array:
        return select_fields(schema, lists, classes, paths)

    return {FILTERS_UDF: run_filters, SELECT_FIELDS_UDF: run_select_fields}


def settling(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Return ``fn`` calling :func:`job.spark.worker_heap.settle` first: PySpark's per-task full garbage
    collection in the worker then skips the modules and caches loaded by then."""

    @functools.wraps(fn)
    def run(*args: Any) -> Any:
        worker_heap.settle()
        return fn(*args)

    return run


def settling_arrow_udf(fn: Callable[..., Any], returns: str) -> Any:
    """Return ``fn`` (see :func:`settling`) as an Arrow UDF returning ``returns``; PySpark reads its kind
    (array to array) from the function's hints."""
    # PySpark's stubs list only the forms that name functionType; at run time it is taken from the hints.
    return arrow_udf(settling(fn), returns)  # type: ignore[call-overload]


#: What each session has registered under each name (a key that fixes what the function does): a dagger
#: started in a session that already runs others (a shared host, the tests' session) registers only what
#: differs. Registering the library again cost ~0.1 s of wall time and ~0.14 core-s (the Python function
#: pickled, sent and wrapped in the JVM) at every query start.
_REGISTERED: weakref.WeakKeyDictionary[SparkSession, dict[str, tuple[str, ...]]] = weakref.WeakKeyDictionary()


def _register(
    spark: SparkSession,
    done: dict[str, tuple[str, ...]],
    name: str,
    key: tuple[str, ...],
    make: Callable[[], Any],
) -> None:
    """Register ``make()`` under ``name`` unless ``done`` (``spark``'s in :data:`_REGISTERED`) says the session
    holds the function ``key`` stands for already."""
    if done.get(name) == key:
        return
    spark.udf.register(name, make())
    done[name] = key


def register_functions(
    spark: SparkSession,
    udf_file: str | Path | None = None,
    dart_store: str | None = None,
    descriptor_set_b64: str | None = None,
) -> None:
    """Register every Dagger function that runs as a UDF under its SQL name, DartGet/DartContains
    on ``dart_store`` (the spec's), Filters/SelectFields on the schema ``descriptor_set_b64`` (default:
    protos/), and the functions of ``udf_file`` (the spec's ``udf_file``), if any. A function the session
    holds already (the same library function, store or schema under that name) is not registered again;
    a ``udf_file``'s functions always are (the file may have changed).

    Raises SpecError when the file cannot be loaded (see :func:`job.functions.user.load_user_functions`).
    """
    done = _REGISTERED.setdefault(spark, {})
    for name, (fn, returns) in LIBRARY_UDFS.items():
        _register(spark, done, name, ("library",), functools.partial(settling_arrow_udf, fn, returns))
    # DistinctCount's aggregate (job.spark.jvm), when the session has its jar
    if done.get(jvm_functions.DISTINCT_COUNT) != ("jvm",) and jvm_functions.register(spark):
        for name in (
            jvm_functions.DISTINCT_COUNT,
            jvm_functions.DISTINCT_COUNT_MERGE,
            jvm_functions.WINDOW_RECORDS,
        ):
            done[name] = ("jvm",)
    store = dart_store or os.environ.get("DAGGERS_DART_STORE") or ""
    for name, fn in dart_functions(dart_store).items():
        _register(
            spark, done, name, ("dart", store), functools.partial(settling_arrow_udf, fn, DART_UDFS[name])
        )
    schema = hashlib.sha256((descriptor_set_b64 or "").encode()).hexdigest()
    for name, fn in schema_functions(descriptor_set_b64).items():
        returns = "array<binary>" if name == FILTERS_UDF else "array<string>"
        _register(spark, done, name, ("schema", schema), functools.partial(settling_arrow_udf, fn, returns))
    if udf_file:
        from job.functions.user import load_user_functions

        for f in load_user_functions(udf_file).values():
            wrapped = (
                settling_arrow_udf(f.fn, f.returns) if f.vectorized else udf(f.fn, f.returns, useArrow=True)
            )
            spark.udf.register(f.name, wrapped)
            done[f.name] = ("user",)
