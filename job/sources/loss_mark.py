"""Where a partition's new data begins after a data loss, kept in the checkpoint's folder.

A broker that lost its newest records (killed -9), or came back empty (in memory), reuses the offsets the
checkpoint has already read: offsets alone cannot tell the records written since from the ones read before.
What can: where the broker's log began again. A position past the partition's end means its log restarted
below it: every record it holds then was written after the loss (a broker that came back empty), or kept from
before it (one that kept part of its log, read again): the partition's first offset when the loss was first
seen. A planned batch whose start the broker still holds, but not its end, lost its tail: new records begin at
the partition's end. The first sight is kept (one small JSON file per partition, keyed by the checkpoint's
position), so the hint of the failing stream ("read on from offset N") and the reading on with
``fail_on_data_loss: false``, in a later run, name the same offset."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mark:
    """The checkpoint's ``position`` the broker lost, and ``end``: where the new data begins, as first seen."""

    position: int
    end: int
    seen_ms: int

    def seen_at(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.seen_ms / 1000))


def _file(folder: str, topic: str, partition: int | str) -> Path:
    return Path(folder) / f"{topic}-{partition}.json"


def recall(folder: str, topic: str, partition: int | str, position: int) -> Mark | None:
    """The mark of a loss of ``position`` in the partition, or None (none kept, or kept for another position)."""
    if not folder:
        return None
    try:
        raw = json.loads(_file(folder, topic, partition).read_text(encoding="utf-8"))
        mark = Mark(int(raw["position"]), int(raw["end"]), int(raw["seen_ms"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return mark if mark.position == position else None


def remember(
    folder: str, topic: str, partition: int | str, position: int, end: int, replace: bool = False
) -> int:
    """Keep ``end`` as where new data begins once ``position`` is lost (the first sight wins unless
    ``replace``); return the offset kept."""
    if not replace and (kept := recall(folder, topic, partition, position)) is not None:
        return kept.end
    if folder:
        path = _file(folder, topic, partition)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        body = {"position": position, "end": end, "seen_ms": int(time.time() * 1000)}
        tmp.write_text(json.dumps(body), encoding="utf-8")
        os.replace(tmp, path)
    return end
