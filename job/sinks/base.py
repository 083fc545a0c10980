"""The sink contract: ``open()`` once, ``write(table, batch_id)`` per micro-batch, ``close()``.

A micro-batch can be written again after a crash (Spark replays the last batch from the
checkpoint), so every sink must be idempotent per row key: writing the same rows twice leaves
the same result.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import pyarrow as pa


@dataclass
class SinkMetrics:
    """What a sink has done since the job started."""

    rows_written: int = 0
    rows_skipped: int = 0
    writes: int = 0
    failures: int = 0
    retries: int = 0
    last_write_ms: float = 0.0
    write_ms_total: float = 0.0
    last_error: str | None = None
    extra: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        """Return the metrics as plain JSON-able values."""
        return {k: v for k, v in self.__dict__.items()}


class Sink(ABC):
    """Writes result rows somewhere. Subclasses set ``name`` and implement open/write."""

    name: str = "sink"

    def __init__(self) -> None:
        self.metrics = SinkMetrics()

    @abstractmethod
    def open(self) -> None:
        """Check that the sink can work (reachable, target exists, allowed).

        Raises SinkError with what is wrong, before any data is read.
        """

    @abstractmethod
    def _write(self, table: pa.Table, batch_id: int) -> int:
        """Write ``table``; return how many rows were written. Raises SinkError when it gives up."""

    def write(self, table: pa.Table, batch_id: int) -> int:
        """Write one micro-batch, recording metrics; return the rows written."""
        started = time.perf_counter()
        try:
            written = self._write(table, batch_id)
        except Exception as exc:
            self.metrics.failures += 1
            self.metrics.last_error = str(exc)
            raise
        elapsed = (time.perf_counter() - started) * 1000
        self.metrics.writes += 1
        self.metrics.rows_written += written
        self.metrics.last_write_ms = elapsed
        self.metrics.write_ms_total += elapsed
        return written

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Default: nothing."""


def build_sinks(specs: list[object]) -> list[Sink]:
    """Return a sink for each sink spec of a dagger."""
    from job.sinks.influx import InfluxSink
    from job.sinks.log import LogSink
    from job.spec import InfluxSinkSpec, LogSinkSpec

    out: list[Sink] = []
    for spec in specs:
        if isinstance(spec, InfluxSinkSpec):
            out.append(InfluxSink(spec))
        elif isinstance(spec, LogSinkSpec):
            out.append(LogSink(spec))
        else:  # pragma: no cover - the spec model rejects other types
            raise TypeError(f"no sink for {type(spec).__name__}")
    return out
