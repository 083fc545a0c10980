"""Consumer lag of a dagger: records on its topics that its last committed micro-batch has not read.

Offsets live only in the Spark checkpoint (no consumer group is committed), so the lag is the
brokers' end offsets minus the offsets of the newest batch in ``<checkpoint>/spark/commits``, as
planned in ``<checkpoint>/spark/offsets/<batch>`` (a ``v1`` line, a metadata line, then one line per
source: ``{topic: {partition: next offset}}``). An end offset below the dagger's position is no lag at all
(the broker lost records or answered wrongly): the lag is unknown then, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from job.errors import DaggerError
from job.query.offset_log import (
    Offsets,
    batch_offsets,
    behind_reason,
    committed_batches,
    committed_offsets,
    ends_behind,
    lag_of,
)
from job.sources import offsets as kofs

__all__ = [
    "LagUnknown",
    "Offsets",
    "batch_offsets",
    "committed_batches",
    "committed_offsets",
    "dagger_lag",
    "end_offsets",
    "lag_of",
]


class LagUnknown(DaggerError):
    """The brokers answered, but their end offsets are behind the dagger's position: no lag can be told."""

    title = "Lag unknown"


def end_offsets(
    bootstrap: str, topics: Iterable[str], consumer_config: dict[str, str] | None = None, timeout: float = 5.0
) -> Offsets:
    """Return the end offsets of ``topics`` on ``bootstrap`` (exact on tansu too). Raises SourceError."""
    consumer = kofs.driver_consumer(bootstrap, consumer_config)
    try:
        tps = kofs.partitions_of(consumer, list(topics), bootstrap, timeout)
        return kofs.end_offsets(consumer, tps, timeout)
    finally:
        consumer.close()


def dagger_lag(checkpoint: Path, streams: Iterable[tuple[str, list[str], dict[str, str]]]) -> int | None:
    """Return the lag of the dagger whose checkpoint is ``checkpoint`` reading ``streams`` (bootstrap,
    topics, consumer config); None before its first committed batch. Raises SourceError when the end offsets
    cannot be read, LagUnknown when one is below the dagger's position."""
    committed = committed_offsets(checkpoint)
    if committed is None:
        return None
    total = 0
    for bootstrap, topics, config in streams:
        ends = end_offsets(bootstrap, topics, config)
        if behind := ends_behind(committed, ends):
            raise LagUnknown(behind_reason(behind))
        total += lag_of(committed, ends)
    return total
