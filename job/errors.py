"""The error hierarchy every part of Daggers raises.

Each error has a short ``title`` (what kind of problem, for a UI header or a log prefix) and a
message that names the field, line, column, topic or offset the user has to look at. The CLI and
the console show ``title: message`` and never a traceback for these.
"""

from __future__ import annotations

import os

#: Set (to anything but 0/false/no) by ``daggers --debug``: full tracebacks and Spark's own logs, in every
#: process of the tree (children inherit it).
DEBUG_ENV = "DAGGERS_DEBUG"


def debug_enabled() -> bool:
    """Whether full tracebacks (and Spark's own logs) are wanted: ``--debug`` or ``DAGGERS_DEBUG=1``."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


class DaggerError(Exception):
    """Base of all errors Daggers reports to a user."""

    title: str = "Dagger error"

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"

    def state_text(self) -> str:
        """Return the error as a person reads it in a dagger's log or state: ``Title: message``, then
        ``hint: ...`` on the next line when there is one."""
        return f"{self.title}: {self.message}" + (f"\nhint: {self.hint}" if self.hint else "")


class CommandLineError(DaggerError):
    """A ``daggers`` command line that cannot be read: an unknown command or option, a value of the wrong
    type, a missing argument. The message names the option or argument."""

    title = "Invalid command line"


class SpecError(DaggerError):
    """The dagger spec (YAML) is invalid. The message names each bad field."""

    title = "Invalid dagger spec"


class SchemaError(DaggerError):
    """A protobuf schema cannot be compiled, or a message class or field is unknown."""

    title = "Schema error"


class SqlError(DaggerError):
    """Dagger SQL that does not parse or does not fit the streams. Carries line and column (1-based)."""

    title = "Dagger SQL error"

    def __init__(
        self, message: str, *, line: int | None = None, col: int | None = None, hint: str | None = None
    ) -> None:
        where = f"line {line}, column {col}: " if line is not None and col is not None else ""
        super().__init__(where + message, hint=hint)
        self.line = line
        self.col = col
        self.reason = message


class FunctionError(DaggerError):
    """A Dagger function cannot run on a dagger's data: a dart collection that cannot be read, a
    class or field path its schema lacks, a value with no feature type. Raised in Spark's workers."""

    title = "Function error"


class SourceError(DaggerError):
    """The Kafka source cannot work: unreachable broker, missing topic, bad start offset."""

    title = "Source error"


class BadRecordError(SourceError):
    """A record could not be decoded and the stream's policy is ``fail``."""

    title = "Bad record"

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(
            f"cannot decode the record at topic {topic!r} partition {partition} offset {offset}: {reason}",
            hint="set bad_records: skip (or dead-letter) on the stream to keep the job running",
        )
        self.topic, self.partition, self.offset, self.reason = topic, partition, offset, reason


class SinkError(DaggerError):
    """A sink cannot write: unreachable server, missing database, rejected points."""

    title = "Sink error"


class EnrichError(DaggerError):
    """A lookup (enrichment from PostgreSQL, Elasticsearch or HTTP) failed and its ``fail_on_errors`` is true, or
    cannot work (a missing package)."""

    title = "Lookup error"


class BackpressureError(SinkError):
    """The sink's server asks us to slow down; try again after ``retry_after`` seconds."""

    title = "Sink backpressure"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after
