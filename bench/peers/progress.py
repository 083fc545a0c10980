"""A tiny progress file every peer writes, so the harness knows how far it got and since when.

Kept free of project imports: the Quix Streams peer runs in its own virtualenv and loads this file
by path.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


class ProgressFile:
    """Counts events and writes ``{"events", "first_event_at", "updated_at", "points", "done"}`` as JSON.

    Writes at most every ``every_s`` seconds (and on :meth:`flush`), atomically (write then rename).
    """

    def __init__(self, path: str | Path, every_s: float = 0.5) -> None:
        self.path = Path(path)
        self.every_s = every_s
        self.events = 0
        self.points = 0
        self.first_event_at: float | None = None
        self._written_at = 0.0

    def add(self, events: int, points: int = 0) -> None:
        """Count ``events`` consumed and ``points`` written; write the file when it is due."""
        now = time.time()
        if events and self.first_event_at is None:
            self.first_event_at = now
        self.events += events
        self.points += points
        if now - self._written_at >= self.every_s:
            self.flush()

    def flush(self, done: bool = False) -> None:
        """Write the file now."""
        self._written_at = time.time()
        body = {
            "events": self.events,
            "points": self.points,
            "first_event_at": self.first_event_at,
            "updated_at": self._written_at,
            "done": done,
            "pid": os.getpid(),
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body))
        tmp.replace(self.path)


def read_progress(path: str | Path) -> dict:
    """Return a progress file's content ({} while it does not exist or is being replaced)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
