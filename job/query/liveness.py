"""A streaming query's liveness file, shared by the dedicated launcher and the shared host.

``<checkpoint>/query.json`` is written by :func:`liveness_listener`'s listener when Spark reports the query
started and refreshed on every progress and idle event. The runner's ``status.json`` only changes
after a micro-batch, so without it a dagger that resumes onto topics with nothing new would look
"starting" forever. The controller (:mod:`job.control`) reads it with :func:`read_json`; this module
sits below both the controller and the shared host, so neither imports the other for it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

#: Written under the checkpoint on every streaming-query event.
QUERY_FILE = "query.json"

log = logging.getLogger("daggers.launch")


def read_json(path: Path) -> dict[str, Any] | None:
    """Return the JSON object in ``path``, or None when it is missing, partial or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_query_state(path: Path, state: str, query_id: str, run_id: str, **extra: Any) -> None:
    """Write ``{"state", "at", "id", "run_id", **extra}`` to ``path`` atomically; never raise (a
    listener must never kill the query)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({"state": state, "at": time.time(), "id": query_id, "run_id": run_id, **extra})
        )
        tmp.replace(path)
    except Exception:
        log.exception("cannot write %s", path)


def liveness_listener(path: Path) -> Any:
    """Return a StreamingQueryListener that writes ``{"state", "at", "id", "run_id"}`` to ``path`` on
    every query event and never raises (pyspark is imported here, so the controller needs none)."""
    from job.query.events import QueryEvents

    class LivenessListener(QueryEvents):
        def _write(self, state: str, query_id: str, run_id: str, **extra: Any) -> None:
            write_query_state(path, state, query_id, run_id, **extra)

        def on_started(self, query_id: str, run_id: str) -> None:
            self._write("started", query_id, run_id)

        def on_progress(self, progress: dict[str, Any]) -> None:
            self._write("active", str(progress.get("id", "")), str(progress.get("runId", "")))

        def on_idle(self, query_id: str, run_id: str) -> None:
            self._write("idle", query_id, run_id)

        def on_terminated(self, query_id: str, run_id: str, exception: str | None) -> None:
            self._write("terminated", query_id, run_id, exception=exception)

    return LivenessListener()
