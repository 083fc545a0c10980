"""Register the Dagger function library with a SparkSession.

Scalar functions run as Arrow UDFs: Spark hands each Python worker whole Arrow arrays, and the
work is numpy-vectorised (no per-row Python).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.functions import arrow_udf


def s2id_arrow(lat: pa.Array, lng: pa.Array, level: pa.Array) -> pa.Array:
    """S2Id over Arrow arrays: the signed decimal cell id string, NULL where any input is NULL or not finite."""
    from job.functions import s2

    lat_np = pc.fill_null(lat.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    lng_np = pc.fill_null(lng.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False)
    lvl = pc.fill_null(level.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    bad = ~np.isfinite(lat_np) | ~np.isfinite(lng_np) | (lvl < 0) | (lvl > 30)
    if len(lvl) and (lvl == lvl[0]).all():
        level_arg: int | np.ndarray = int(lvl[0]) if not bad.all() else 0
    else:
        level_arg = np.where(bad, 0, lvl)
    if isinstance(level_arg, int) and not 0 <= level_arg <= 30:
        level_arg = 0
    ids = s2.latlng_to_cell_id(np.where(bad, 0.0, lat_np), np.where(bad, 0.0, lng_np), level_arg)
    text = s2.to_decimal_strings(ids, signed=True)
    return pa.array(text, pa.string(), mask=bad)


def register_functions(spark: SparkSession) -> None:
    """Register every Dagger scalar function under its SQL name."""
    spark.udf.register("S2Id", arrow_udf(s2id_arrow, "string"))
