"""The sink contract: ``open()`` once, ``bind(schema)`` with the query's output, ``write(table, batch_id)``
per micro-batch, ``close()``.

* ``open()`` checks what can be checked without the query's output: the server is reachable, the
  target exists (or may be created), the credentials are allowed. It raises SinkError before any
  data is read.
* ``bind(schema)`` checks the query's output schema against the sink (a column without a protobuf
  field, a type that does not fit, a table without the key) and creates targets that depend on it
  (a PostgreSQL table). The runner calls it at start with the Arrow schema of the result
  (:func:`start_sinks`); otherwise :meth:`Sink.write` calls it before writing the first batch.
* A micro-batch can be written again after a crash (Spark replays the last batch from the
  checkpoint), so every sink is idempotent per row key: InfluxDB overwrites a point, PostgreSQL
  upserts, Kafka sends the same records with the same keys (see :mod:`job.sinks.kafka`).

Each sink keeps its own :class:`SinkMetrics` (rows written, write latency, failures, retries). While a
write is being retried, its metrics say so (``retrying``: attempt, of, next_at, since, error) and the sink's
``retry_listener`` hears of it before each wait and once more when the write ends (the runner writes
``status.json`` then, see :meth:`job.query.runner.DaggerJob.on_sink_retry`).

A sink whose server does not answer at start (``open()`` raises :class:`SinkUnreachable`) is tried again
with the same policy as a failed write (its ``max_retries`` and ``max_backoff_s``), saying so the same way
(:meth:`Sink.open_retrying`); a sink that refuses (credentials, a missing database it may not create) fails
at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from job.common.words import counted
from job.errors import SinkError

log = logging.getLogger("daggers.sink")

#: The longest error text a retry shows in ``status.json`` (the sinks' error texts carry no secret).
RETRY_ERROR_CHARS = 200

#: Columns whose values identify a row of a windowed dagger: the default key of upserts and records.
TIME_COLUMN = "window_timestamp"
TAG_PREFIXES = ("tag_", "label_")


class SinkUnreachable(SinkError):
    """The sink's server did not answer (no connection, a timeout, a 5xx): trying again later may help."""


def backoff_s(retry: int, cap_s: float) -> float:
    """Return the wait before retry number ``retry`` (1, 2, ...) of a failed write: 0.5 s doubling each
    time, times a jitter of 0.5-1.5 so that daggers cut off together do not all retry at once, and never
    more than ``cap_s`` (a sink's ``max_backoff_s``, documented as the longest wait between two retries).

    The cap is taken after the jitter (before, waits reached 44.8 s with a cap of 30 s); once the doubling
    reaches the cap, the wait is between half the cap and the cap."""
    doubled = 0.5 * 2.0 ** min(max(retry - 1, 0), 60)  # 2**60 s is past any cap; no float overflow after it
    return min(cap_s, min(cap_s, doubled) * (0.5 + random.random()))


def default_key_columns(names: Sequence[str]) -> list[str]:
    """Return the default row key of a result with columns ``names``: window_timestamp (when there)
    then the tag_*/label_* columns, in output order. Empty when there are none."""
    keys = [TIME_COLUMN] if TIME_COLUMN in names else []
    return keys + [n for n in names if n.startswith(TAG_PREFIXES)]


def key_columns(
    given: Sequence[str] | None, names: Sequence[str], *, needed_to: str = "", sink: str = ""
) -> list[str]:
    """Return the row key of a result with columns ``names``: the sink's ``key_columns`` when ``given``, else
    :func:`default_key_columns`.

    Raises SinkError for a key column that is not in the output, and, when ``needed_to`` says what the key is
    for (``make document ids of``, ``upsert on``), for an empty key (the hint names the ``sink`` type)."""
    keys = list(given) if given is not None else default_key_columns(names)
    if needed_to and not keys:
        raise SinkError(
            f"the query's output ({', '.join(names)}) has no window_timestamp or tag_*/label_* "
            f"column to {needed_to}",
            hint=f"set key_columns on the {sink} sink",
        )
    missing = [k for k in keys if k not in names]
    if missing:
        raise SinkError(f"key_columns {missing} are not columns of the query's output ({', '.join(names)})")
    return keys


@dataclass
class SinkMetrics:
    """What a sink has done since the job started.

    ``rows_written`` counts rows the target acknowledged (a replayed batch counts again),
    ``rows_skipped`` rows left out on purpose (e.g. a point without fields), ``writes`` the
    micro-batches written, ``failures`` the writes that gave up, ``retries`` the attempts made again
    after a transient error. Latencies are milliseconds per micro-batch write.

    ``retrying`` is set only while a write waits to be tried again: ``attempt`` (the retry about to be made,
    1, 2, ...) ``of`` (the sink's max_retries), ``next_at`` (Unix time of that try), ``since`` (Unix time of
    the write's first failure) and ``error`` (short, no secret). It is left out of :meth:`to_dict` otherwise.
    """

    sink_type: str = ""
    rows_written: int = 0
    rows_skipped: int = 0
    writes: int = 0
    failures: int = 0
    retries: int = 0
    last_write_ms: float = 0.0
    max_write_ms: float = 0.0
    write_ms_total: float = 0.0
    last_error: str | None = None
    extra: dict[str, int] = field(default_factory=dict)
    target: str = ""  # where the rows go, for people: "measurement m in database d at http://…"
    first_window: str | None = None  # the earliest and latest window_timestamp written (ISO, UTC)
    last_window: str | None = None
    retrying: dict[str, Any] | None = None

    @property
    def mean_write_ms(self) -> float:
        """Return the mean latency of a micro-batch write (0.0 before the first)."""
        return self.write_ms_total / self.writes if self.writes else 0.0

    def to_dict(self) -> dict[str, object]:
        """Return the metrics as plain JSON-able values (with ``mean_write_ms``)."""
        out: dict[str, object] = {k: v for k, v in self.__dict__.items()}
        out["extra"] = dict(self.extra)
        if self.retrying is None:
            del out["retrying"]
        else:
            out["retrying"] = dict(self.retrying)
        out["mean_write_ms"] = round(self.mean_write_ms, 3)
        return out


class Sink(ABC):
    """Writes result rows somewhere. Subclasses set ``name`` and implement ``open`` and ``_write``."""

    name: str = "sink"

    def __init__(self) -> None:
        self.metrics = SinkMetrics(sink_type=type(self).name)
        self._bound: pa.Schema | None = None
        #: Called with the sink before each wait of a retry and when a retried write ends (``metrics.retrying``
        #: then None); it must not raise.
        self.retry_listener: Callable[[Sink], None] | None = None
        self._retry_lock = threading.Lock()  # a sink may retry from several write threads (InfluxDB)
        self._aborted: str | None = None  # why the run was killed: no more retries
        self._abort_event = threading.Event()  # ends a wait of open_retrying at once
        self._opened = False  # open_retrying succeeded (a shared host opens sinks before its query starts)

    @property
    def target(self) -> str:
        """Where the rows go, for people (the measurement, topic or table, and the server)."""
        return self.name

    @abstractmethod
    def open(self) -> None:
        """Check that the sink can work (reachable, target exists, allowed).

        Raises SinkError with what is wrong, before any data is read.
        """

    def open_retrying(self, sleep: Callable[[float], None] | None = None) -> None:
        """:meth:`open`, tried again while the server does not answer (:class:`SinkUnreachable`) with the
        sink's retry policy (spec ``max_retries``, ``max_backoff_s``; none without them), each wait reported
        like a write's retry (``metrics.retrying`` and the retry listener). Each wait is ``sleep`` (which may
        raise to end the start), by default one that :meth:`abort` ends at once. Once it succeeded, it does
        nothing until :func:`start_sinks` closes the sink again.

        Raises SinkError: the sink refused, it still did not answer after its retries, or it was aborted.
        """
        if self._opened:
            return
        spec = getattr(self, "spec", None)
        retries = int(getattr(spec, "max_retries", 0) or 0)
        cap_s = float(getattr(spec, "max_backoff_s", 30.0) or 30.0)
        attempt, started = 0, time.monotonic()
        try:
            while True:
                try:
                    self.open()
                    self._opened = True
                    return
                except SinkUnreachable as exc:
                    attempt += 1
                    if attempt > retries:
                        if not retries:
                            raise
                        raise SinkUnreachable(
                            f"{exc.message} (tried {counted(attempt, 'time')} over "
                            f"{time.monotonic() - started:.0f} s)",
                            hint=exc.hint,
                        ) from None
                    delay = backoff_s(attempt, cap_s)
                    log.warning(
                        "sink %s cannot start (%s); retry %d/%d in %.1fs",
                        self.name,
                        exc.message,
                        attempt,
                        retries,
                        delay,
                    )
                    self._retrying(attempt, retries, delay, exc.message)
                    if sleep is not None:
                        sleep(delay)
                    elif self._abort_event.wait(delay):
                        raise SinkError(
                            f"sink {self.name} stopped retrying to start: {self._aborted}"
                        ) from None
        finally:
            self._retry_over()

    def bind(self, schema: pa.Schema) -> None:
        """Check the query's output ``schema`` against the sink and prepare targets that depend on it.

        Default: nothing to check. Raises SinkError naming the column that cannot be written.
        """
        self._bound = schema

    @property
    def bound_schema(self) -> pa.Schema | None:
        """The output schema the sink was last bound to (None before :meth:`bind`)."""
        return self._bound

    @abstractmethod
    def _write(self, table: pa.Table, batch_id: int) -> int:
        """Write ``table``; return how many rows were written. Raises SinkError when it gives up."""

    def write(self, table: pa.Table, batch_id: int) -> int:
        """Write one micro-batch, recording metrics; return the rows written.

        Binds the sink to the batch's schema first when it was not bound to an equal one.
        Raises SinkError (after the sink's own retries) when the rows could not be written.
        """
        started = time.perf_counter()
        try:
            if self._bound is None or not _same_columns(self._bound, table.schema):
                self.bind(table.schema)
            written = self._write(table, batch_id)
        except Exception as exc:
            self.metrics.failures += 1
            self.metrics.last_error = str(exc)
            self._retry_over()
            raise
        elapsed = (time.perf_counter() - started) * 1000
        self.metrics.writes += 1
        self.metrics.rows_written += written
        self.metrics.last_write_ms = elapsed
        self.metrics.max_write_ms = max(self.metrics.max_write_ms, elapsed)
        self.metrics.write_ms_total += elapsed
        self.metrics.target = self.target
        if written and TIME_COLUMN in table.column_names:
            self._note_windows(table.column(TIME_COLUMN))
        self._retry_over()  # after the counts, so that the status it writes has them
        return written

    def abort(self, why: str) -> None:
        """Give up retrying: the write in progress raises SinkError before its next wait (the run is being
        killed: a stop that did not end in time)."""
        self._aborted = why
        self._abort_event.set()

    def _retrying(self, attempt: int, of: int, delay_s: float, error: str) -> None:
        """Record that the write in progress waits ``delay_s`` before retry ``attempt`` of ``of`` after
        ``error`` (short, no secret), and tell the retry listener. A sink's retry loop calls it before it
        sleeps; :meth:`write` clears it when the write ends. Raises SinkError once :meth:`abort` was called."""
        if self._aborted is not None:
            raise SinkError(
                f"sink {self.name} stopped retrying after attempt {attempt}: {self._aborted}: {error}"
            )
        now = time.time()
        with self._retry_lock:
            since = (self.metrics.retrying or {}).get("since", now)
            self.metrics.retrying = {
                "attempt": attempt,
                "of": of,
                "next_at": round(now + delay_s, 3),
                "since": since,
                "error": _short(error),
            }
        self._tell_retry_listener()

    def _retry_over(self) -> None:
        """Clear ``metrics.retrying`` after a write that was retried (it succeeded or gave up); tell the listener."""
        with self._retry_lock:
            if self.metrics.retrying is None:
                return
            self.metrics.retrying = None
        self._tell_retry_listener()

    def _tell_retry_listener(self) -> None:
        if self.retry_listener is None:
            return
        try:
            self.retry_listener(self)
        except Exception:  # reporting a retry must never break the write
            log.warning("reporting the retry of sink %s failed", self.name, exc_info=True)

    def _note_windows(self, times: pa.ChunkedArray) -> None:
        if not pa.types.is_timestamp(times.type) or times.null_count == len(times):
            return
        bounds = pc.min_max(times)
        low, high = (bounds[k].as_py() for k in ("min", "max"))
        first, last = self.metrics.first_window, self.metrics.last_window
        self.metrics.first_window = min(first, low.isoformat()) if first else low.isoformat()
        self.metrics.last_window = max(last, high.isoformat()) if last else high.isoformat()

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Default: nothing."""


def _short(error: str) -> str:
    """Return the first line of ``error``, at most :data:`RETRY_ERROR_CHARS` long."""
    lines = error.strip().splitlines()
    line = lines[0] if lines else "error"
    return line if len(line) <= RETRY_ERROR_CHARS else line[: RETRY_ERROR_CHARS - 1] + "…"


def _same_columns(a: pa.Schema, b: pa.Schema) -> bool:
    """True when both schemas have the same column names and types (time zone spellings aside)."""
    if a.names != b.names:
        return False
    for x, y in zip(a.types, b.types, strict=True):
        if x == y:
            continue
        if (
            pa.types.is_timestamp(x)
            and pa.types.is_timestamp(y)
            and x.unit == y.unit
            and bool(x.tz) == bool(y.tz)
        ):
            continue
        return False
    return True


def start_sinks(
    sinks: Sequence[Sink], schema: pa.Schema | None = None, sleep: Callable[[float], None] | None = None
) -> None:
    """Open every sink and, given the query's output ``schema``, bind each to it; ``sleep`` is each wait
    between two tries to open (see :meth:`Sink.open_retrying`).

    When one cannot work, whatever it raised (a SinkError, a missing package, a bug, Ctrl-C), the sinks opened
    so far are closed again before it goes on, so no connection is left behind. A SinkError is raised again
    named after its sink (``sink 'kafka': ...``), its cause kept; anything else is raised as it was.
    """
    from job.errors import SinkError

    opened: list[Sink] = []
    current: Sink | None = None
    try:
        for current in sinks:
            current.open_retrying(sleep)
            opened.append(current)
            if schema is not None:
                current.bind(schema)
    except BaseException as exc:
        for done in opened:
            done._opened = False
            try:
                done.close()
            except Exception:  # closing is best effort; the first error is the one to report
                log.debug("closing sink %s failed", done.name, exc_info=True)
        if not isinstance(exc, SinkError):
            raise
        name = current.name if current is not None else "?"
        raise SinkError(f"sink {name!r}: {exc.message}", hint=exc.hint) from exc
