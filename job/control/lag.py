"""Consumer lag of a dagger: records on its topics that its last committed micro-batch has not read.

Offsets live only in the Spark checkpoint (no consumer group is committed), so the lag is the
brokers' end offsets minus the offsets of the newest batch in ``<checkpoint>/spark/commits``, as
planned in ``<checkpoint>/spark/offsets/<batch>`` (a ``v1`` line, a metadata line, then one line per
source: ``{topic: {partition: next offset}}``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from job.sources import offsets as kofs

Offsets = dict[str, dict[str, int]]


def committed_batches(spark: Path) -> list[int]:
    """Return the ids of the batches committed in a query's checkpoint folder ``spark``, oldest first."""
    try:
        return sorted(int(p.name) for p in (spark / "commits").iterdir() if p.name.isdigit())
    except OSError:
        return []


def batch_offsets(spark: Path, batch: int) -> Offsets | None:
    """Return the next offset per topic and partition planned for ``batch`` in ``spark/offsets``, merged
    over the query's sources; None when the file cannot be read."""
    try:
        lines = (spark / "offsets" / str(batch)).read_text().splitlines()
    except OSError:
        return None
    merged: Offsets = {}
    for line in lines[2:]:
        line = line.strip()
        if not line or line == "-":
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            for topic, parts in data.items():
                if isinstance(parts, dict):
                    merged.setdefault(topic, {}).update({str(p): int(o) for p, o in parts.items()})
    return merged


def committed_offsets(checkpoint: Path) -> Offsets | None:
    """Return the next offset to read per topic and partition after the last committed batch, merged
    over the query's sources; None when no batch has been committed yet."""
    spark = Path(checkpoint) / "spark"
    for batch in reversed(committed_batches(spark)):
        merged = batch_offsets(spark, batch)
        if merged is not None:
            return merged
    return None


def lag_of(committed: Offsets, ends: Offsets) -> int:
    """Return the records between ``committed`` and ``ends`` summed over partitions (a partition the
    checkpoint has not seen yet counts from offset 0; a negative difference counts as 0)."""
    total = 0
    for topic, parts in ends.items():
        for part, end in parts.items():
            total += max(int(end) - int(committed.get(topic, {}).get(part, 0)), 0)
    return total


def end_offsets(bootstrap: str, topics: Iterable[str], consumer_config: dict[str, str] | None = None,
                timeout: float = 5.0) -> Offsets:
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
