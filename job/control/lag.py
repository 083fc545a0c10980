"""Consumer lag of a dagger: records on its topics that its last committed micro-batch has not read.

Offsets live only in the Spark checkpoint (no consumer group is committed), so the lag is the
brokers' end offsets minus the offsets of the newest batch in ``<checkpoint>/spark/commits``, as
planned in ``<checkpoint>/spark/offsets/<batch>`` (a ``v1`` line, a metadata line, then one line per
source: ``{topic: {partition: next offset}}``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from job.query.offset_log import Offsets, batch_offsets, committed_batches, committed_offsets, lag_of
from job.sources import offsets as kofs

__all__ = [
    "Offsets",
    "batch_offsets",
    "committed_batches",
    "committed_offsets",
    "dagger_lag",
    "end_offsets",
    "lag_of",
]


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
    topics, consumer config); None before its first committed batch. Raises SourceError."""
    committed = committed_offsets(checkpoint)
    if committed is None:
        return None
    total = 0
    for bootstrap, topics, config in streams:
        total += lag_of(committed, end_offsets(bootstrap, topics, config))
    return total
