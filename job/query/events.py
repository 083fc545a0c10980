"""Streaming query events delivered to Python cheaply: :class:`QueryEvents`.

PySpark's own listener path converts every event field by field over py4j: one call per getter, and
a Java ``NoSuchElementException`` to end each list or map it iterates (the sources, the state
operators, the metrics). PySpark turns each such exception into a Python one by asking the JVM
whether it is one of a dozen classes, and every ask makes the JVM look up a class that does not
exist through its whole class path. Measured in a shared host with four light daggers (JFR, 45 s),
that cost 30% of the application's JVM CPU, all of it in the one thread that delivers every query's
events, so events queued behind each other.

:class:`QueryEvents` is still a ``StreamingQueryListener`` (``spark.streams.addListener`` takes it)
but its Java side hands Python the progress as its JSON text in one call, and the other events as
their ids (two calls each, three for a terminated query's exception). A handler that raises is
logged and never reaches Spark.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger("daggers.events")

#: The Java wrapper PySpark registers a Python listener through.
_WRAPPER = "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper"


class QueryEvents(StreamingQueryListener):
    """A listener with cheap events; override the ``on_*`` methods you need (each does nothing here).

    Each is called in Spark's listener thread, one event at a time for every query of the
    application: keep them short.
    """

    def on_started(self, query_id: str, run_id: str) -> None:
        """The query ``query_id`` (run ``run_id``) started."""

    def on_progress(self, progress: dict[str, Any]) -> None:
        """A micro-batch ended: ``progress`` is Spark's ``StreamingQueryProgress`` as parsed JSON."""

    def on_idle(self, query_id: str, run_id: str) -> None:
        """The query waited a whole trigger for new data."""

    def on_terminated(self, query_id: str, run_id: str, exception: str | None) -> None:
        """The query ended: ``exception`` is its error's text, or None when it was stopped."""

    # ---- PySpark's own path (used only where the bridge below is not, e.g. Spark Connect) ---------

    def onQueryStarted(self, event: Any) -> None:
        self.on_started(str(event.id), str(event.runId))

    def onQueryProgress(self, event: Any) -> None:
        self.on_progress(json.loads(event.progress.json))

    def onQueryIdle(self, event: Any) -> None:
        self.on_idle(str(event.id), str(event.runId))

    def onQueryTerminated(self, event: Any) -> None:
        self.on_terminated(str(event.id), str(event.runId), event.exception)

    @property
    def _jlistener(self) -> Any:
        """The Java object ``StreamingQueryManager.addListener``/``removeListener`` pass to the JVM."""
        if not hasattr(self, "_jlistenerobj"):
            from py4j.java_gateway import JavaClass
            from pyspark import SparkContext

            gateway = SparkContext._gateway
            assert gateway is not None, "no SparkContext is running"
            # by its full name: no package walk (each step is a failed class lookup in the JVM)
            self._jlistenerobj = JavaClass(_WRAPPER, gateway._gateway_client)(_Bridge(self))
        return self._jlistenerobj


def _ids(jevent: Any) -> tuple[str, str]:
    return str(jevent.id().toString()), str(jevent.runId().toString())


class _Bridge:
    """The Python object the JVM calls (py4j callback) for each event of a :class:`QueryEvents`."""

    def __init__(self, events: QueryEvents) -> None:
        self.events = events

    def _deliver(self, what: str, call: Any) -> None:
        try:
            call()
        except Exception:  # a listener must never kill the query or the listener thread
            log.exception("query %s listener failed", what)

    def onQueryStarted(self, jevent: Any) -> None:
        self._deliver("started", lambda: self.events.on_started(*_ids(jevent)))

    def onQueryProgress(self, jevent: Any) -> None:
        self._deliver("progress", lambda: self.events.on_progress(json.loads(jevent.progress().json())))

    def onQueryIdle(self, jevent: Any) -> None:
        self._deliver("idle", lambda: self.events.on_idle(*_ids(jevent)))

    def onQueryTerminated(self, jevent: Any) -> None:
        def call() -> None:
            exception = jevent.exception()
            self.events.on_terminated(*_ids(jevent), str(exception.get()) if exception.isDefined() else None)

        self._deliver("terminated", call)

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
