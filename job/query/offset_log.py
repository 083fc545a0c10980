"""A streaming query's offset and commit logs in its checkpoint folder (``<checkpoint>/spark``): which
batches committed, what each one read, and the watermark it ran with.

``offsets/<batch>`` holds a ``v1`` line, a metadata line (``batchWatermarkMs``, ``batchTimestampMs``, the
conf), then one line per source: ``{topic: {partition: next offset}}``; ``commits/<batch>`` exists once the
batch committed. Plain files, no Spark: the runner, the controller and the shared host read them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


#: In a fused member's checkpoint: the folder of the checkpoint its group's query commits its offsets in
#: (the member has no query of its own; its lag is the group's on the member's topics).
OFFSETS_FROM = "offsets-from"


def offsets_checkpoint(checkpoint: Path) -> Path:
    """Return the checkpoint whose offsets are ``checkpoint``'s: its group's (:data:`OFFSETS_FROM`) while it
    is a fused member, else itself (also once a query of its own has committed since it was pointed)."""
    pointer = Path(checkpoint) / OFFSETS_FROM
    try:
        named = pointer.read_text(encoding="utf-8").strip()
        pointed_at = pointer.stat().st_mtime
    except OSError:
        return Path(checkpoint)
    try:
        own = (Path(checkpoint) / "spark" / "commits").stat().st_mtime
    except OSError:
        own = None
    return Path(named) if named and (own is None or own < pointed_at) else Path(checkpoint)


def point_offsets(checkpoint: Path, group_checkpoint: Path) -> None:
    """Record in a fused member's ``checkpoint`` that its offsets are committed in ``group_checkpoint``
    (written to a temporary file, then renamed: a reader sees the old folder or the new one)."""
    pointer = Path(checkpoint) / OFFSETS_FROM
    tmp = pointer.with_name(f".{OFFSETS_FROM}.tmp")
    tmp.write_text(str(group_checkpoint), encoding="utf-8")
    tmp.replace(pointer)


def committed_offsets(checkpoint: Path) -> Offsets | None:
    """Return the next offset to read per topic and partition after the last committed batch, merged
    over the query's sources (a fused member's: its group's, see :func:`offsets_checkpoint`); None when no
    batch has been committed yet."""
    spark = offsets_checkpoint(checkpoint) / "spark"
    for batch in reversed(committed_batches(spark)):
        merged = batch_offsets(spark, batch)
        if merged is not None:
            return merged
    return None


def lag_of(committed: Offsets, ends: Offsets) -> int:
    """Return the records between ``committed`` and ``ends`` summed over partitions (a partition the
    checkpoint has not seen yet counts from offset 0; a negative difference counts as 0: right between two
    batches of one query, never for a broker's end offsets, see :func:`ends_behind`)."""
    total = 0
    for topic, parts in ends.items():
        for part, end in parts.items():
            total += max(int(end) - int(committed.get(topic, {}).get(part, 0)), 0)
    return total


def ends_behind(committed: Offsets, ends: Offsets) -> list[tuple[str, str, int, int]]:
    """Return ``(topic, partition, end, position)`` of each partition whose end offset in ``ends`` is below
    the position ``committed`` holds for it, by topic and partition: the broker lost records or answered
    wrongly, and no lag can be told from that answer."""
    out = []
    for topic, parts in sorted(ends.items()):
        for part, end in sorted(parts.items(), key=lambda kv: (len(str(kv[0])), str(kv[0]))):
            position = committed.get(topic, {}).get(str(part))
            if position is not None and int(end) < int(position):
                out.append((topic, str(part), int(end), int(position)))
    return out


def behind_reason(behind: list[tuple[str, str, int, int]]) -> str:
    """Say why no lag can be told from end offsets behind a dagger's position (:func:`ends_behind`, not
    empty): ``the broker's end offset 120 of orders/0 is behind the dagger's position 500: records lost or a
    wrong answer``."""
    topic, part, end, position = behind[0]
    more = len(behind) - 1
    also = f" (and {more} more partition{'s' if more != 1 else ''})" if more else ""
    return (
        f"the broker's end offset {end} of {topic}/{part} is behind the dagger's position {position}{also}: "
        "records lost or a wrong answer"
    )


def batch_metadata(spark: Path, batch: int) -> dict[str, Any] | None:
    """Return the metadata line of ``batch`` in ``spark/offsets`` (``batchWatermarkMs``,
    ``batchTimestampMs``, ``conf``); None when it cannot be read."""
    try:
        meta = json.loads((spark / "offsets" / str(batch)).read_text().splitlines()[1])
    except (OSError, ValueError, IndexError):
        return None
    return meta if isinstance(meta, dict) else None


def committed_watermark_ms(spark: Path) -> int | None:
    """Return the watermark (epoch ms) the last committed batch of the query in ``spark`` evicted windows
    by; None when it committed none."""
    for batch in reversed(committed_batches(spark)):
        meta = batch_metadata(spark, batch)
        if meta is not None:
            return int(meta.get("batchWatermarkMs", 0))
    return None
