"""The records a micro-batch drops as late, counted per window (see :mod:`job.sql.lateness` for when).

The stream's frame observes its records per window (``dagger_window_records``, :mod:`job.spark.jvm`: 1 a
record, or the records a group stands for where the source aggregated first); Spark drops a window's
records when its end is at or before the watermark for late data, which is the watermark of the micro-batch
before (Spark's ``eventTimeWatermarkForLateEvents``, the ``watermark`` the previous progress report gave).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from job.sources.config import PARTIAL_RECORDS
from job.spark.jvm import WINDOW_RECORDS

if TYPE_CHECKING:
    from job.query.plan import DaggerPlan

#: The observed metric (Spark's ``Dataset.observe``) of a stream's records per window end.
METRIC = "dagger_windows"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def window_records(records: Column, window_ms: int) -> Column:
    """The observed aggregate: each row's window end (microseconds; NULL without a time) with ``records``."""
    size = window_ms * 1000
    micros = F.unix_micros(F.col("rowtime"))
    end = micros - F.pmod(micros, F.lit(size)) + F.lit(size)  # a TUMBLE window's end, as Spark's window()
    return F.call_function(WINDOW_RECORDS, end, records.cast("long")).alias("windows")


def observe_windows(
    frame: DataFrame, index: int, partial: bool, window_ms: int, where: str | None = None
) -> DataFrame:
    """Return stream ``index``'s ``frame`` observing its records per window of ``window_ms`` (:data:`METRIC`):
    1 a record, or the records a row stands for where the source aggregated first (``partial``), only those
    ``where`` (Spark SQL over the frame) keeps."""
    records = F.col(PARTIAL_RECORDS) if partial else F.lit(1)
    if where:
        records = F.when(F.expr(where), records).otherwise(F.lit(0))
    return frame.observe(f"{METRIC}_{index}", window_records(records, window_ms))


def observed_windows(p: dict[str, Any]) -> dict[int, int] | None:
    """The records per window end (microseconds) the micro-batch of progress report ``p`` read, over all
    its streams; None when no frame observes them."""
    seen = [m for name, m in (p.get("observedMetrics") or {}).items() if name.startswith(METRIC)]
    if not seen:
        return None
    out: dict[int, int] = {}
    for metric in seen:
        for pair in filter(None, str((metric or {}).get("windows") or "").split(",")):
            end, _, records = pair.partition(":")
            out[int(end)] = out.get(int(end), 0) + int(records)
    return out


def late_records(windows: dict[int, int], watermark: str | None) -> int:
    """The records of ``windows`` (end in microseconds → records) that end at or before ``watermark`` (an ISO
    time as progress reports give it; None: no watermark yet, nothing is late)."""
    if not watermark:
        return 0
    limit = (datetime.fromisoformat(watermark.replace("Z", "+00:00")) - _EPOCH) // timedelta(microseconds=1)
    return sum(records for end, records in windows.items() if end <= limit)


def counted_before_filter(plan: DaggerPlan) -> bool:
    """Whether a dagger's late records are counted before its WHERE, so that at most that many were its own: a
    fused member whose query filters (its group observes the stream once for all, see
    :func:`job.shared.fusion.late_window_ms`)."""
    return plan.spec.isolation == "fused" and (
        plan.translation.late_window_ms is None or plan.translation.late_where is not None
    )
