"""A fused pass-through that comes back to its group behind the others: the records it had not read yet.

After a group of pass-throughs split (:data:`job.shared.group.SPLIT_FILE`), each member ran in a query of
its own and stopped at its own offsets. The group's next generation reads from the furthest of them
(a pass-through keeps no state, so nothing before is needed), and each member that had stopped short
gets the records in between from :func:`catch_up`: one bounded batch read of the same source, through
the member's own SQL, to the member's own sinks, before the group's query starts. So every record
reaches each member once: no gap, no double (a host killed during a catch-up writes it again when it
starts, as Spark writes a batch again that it had not committed).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from job.query.offset_log import Offsets

if TYPE_CHECKING:
    import pyarrow as pa

    from job.query.plan import DaggerPlan


def catch_up(spark: Any, plan: DaggerPlan, start: Offsets, end: Offsets) -> pa.Table:
    """Return the output rows of pass-through ``plan`` over its stream's records from ``start`` up to
    ``end`` (``{topic: {partition: offset}}``), read in a new session of ``spark`` (its own views).

    Raises what the member's query raises (a bad record under ``bad_records: fail``: SourceError; its SQL
    failing at run time: Spark's error)."""
    from job.query.plan import register_plan_functions
    from job.query.runner import stream_frame
    from job.shared.fusion import member_result
    from job.sources.kafka import register_source
    from job.spark.session import active_session

    if len(plan.streams) != 1 or plan.translation.window is not None:
        raise ValueError(f"{plan.spec.name}: only a pass-through (one stream, no window) catches up")
    session = spark.newSession()
    register_plan_functions(session, plan)
    register_source(session)
    with active_session(session):  # Spark looks the source up in the thread's active session
        stream_frame(session, plan, 0, (json.dumps(start), json.dumps(end))).createOrReplaceTempView(
            plan.streams[0].table
        )
        result, _ = member_result(session, plan)
        return result.toArrow()
