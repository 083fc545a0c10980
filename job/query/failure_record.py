"""A dagger's failure as a record: what ended its run, as data rather than as a line of its log.

When a dagger ends on an error, its process (:mod:`job.control.launch`) writes ``failure.json`` into its state
folder, and a shared host (:mod:`job.shared.hosted`, :mod:`job.shared.group`) puts the same record in the
dagger's state file of its channel (:mod:`job.shared.channel`)::

    {"title": "Sink error", "message": "...", "hint": "..." or null, "at": <epoch seconds>, "exit_code": 2}

The controller shows ``Title: message`` and the hint from the record of the run that just ended (one written
after that run started); it reads the log only when there is none (a process killed before it could write).
This module imports neither Spark nor the sources and sinks: the controller reads records with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from job.errors import DaggerError

#: In a dagger's state folder: the record of the last run that ended on an error.
FAILURE_FILE = "failure.json"
#: Exit code of a dagger process that ends on a known error (a :class:`DaggerError`).
EXIT_KNOWN_ERROR = 2
#: Exit code of a dagger process that ends on an unexpected exception (Python's own for an uncaught one).
EXIT_UNEXPECTED = 1
#: The title of an exception that is neither a DaggerError nor a failure of Spark's.
UNEXPECTED_TITLE = "Unexpected error"
_SPARK_MODULES = ("pyspark", "py4j")


@dataclass(frozen=True)
class FailureRecord:
    """What ended a dagger's run: the error's title, message and hint, when (epoch seconds), and the process's
    exit code (None when it is not known: a shared host that an earlier controller started is gone)."""

    title: str
    message: str
    hint: str | None
    at: float
    exit_code: int | None

    @classmethod
    def of(
        cls, err: DaggerError, exit_code: int | None = EXIT_KNOWN_ERROR, at: float | None = None
    ) -> FailureRecord:
        """Return the record of ``err`` (``at``: now when None)."""
        return cls(err.title, err.message, err.hint, time.time() if at is None else at, exit_code)

    @classmethod
    def from_json(cls, data: object) -> FailureRecord | None:
        """Return the record ``data`` holds, or None when it is not one (a field missing or mistyped)."""
        if not isinstance(data, dict):
            return None
        title, message, hint = data.get("title"), data.get("message"), data.get("hint")
        at, code = data.get("at"), data.get("exit_code")
        if not (isinstance(title, str) and title and isinstance(message, str)):
            return None
        if not (hint is None or isinstance(hint, str)):
            return None
        if isinstance(at, bool) or not isinstance(at, int | float):
            return None
        if isinstance(code, bool) or not (code is None or isinstance(code, int)):
            return None
        return cls(title, message, hint, float(at), code)

    def as_json(self) -> dict[str, Any]:
        """Return the record as the JSON object it is stored as."""
        return {
            "title": self.title,
            "message": self.message,
            "hint": self.hint,
            "at": self.at,
            "exit_code": self.exit_code,
        }

    def text(self) -> str:
        """Return the record as a person reads it: ``Title: message``, then ``hint: ...`` on a line of its own
        when there is one (as :meth:`job.errors.DaggerError.state_text` words an error)."""
        return f"{self.title}: {self.message}" + (f"\nhint: {self.hint}" if self.hint else "")


def as_dagger_error(exc: BaseException) -> DaggerError:
    """Return the error a person reads for ``exc``: itself when it is a DaggerError; what
    :func:`job.spark.failure.explain_failure` finds in a failure of Spark's (an exception of PySpark or py4j,
    or one that such an exception caused); else an ``Unexpected error`` naming the exception's class and
    message."""
    from job.spark.failure import causes, explain_failure

    if isinstance(exc, DaggerError):
        return exc
    if any(type(link).__module__.split(".")[0] in _SPARK_MODULES for link in causes(exc)):
        return explain_failure(exc)
    err = DaggerError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    err.title = UNEXPECTED_TITLE
    return err


def failure_of(exc: BaseException, at: float | None = None) -> FailureRecord:
    """Return the record of a run that ended on ``exc`` (see :func:`as_dagger_error`): exit code
    :data:`EXIT_KNOWN_ERROR` for a DaggerError, :data:`EXIT_UNEXPECTED` for any other exception."""
    code = EXIT_KNOWN_ERROR if isinstance(exc, DaggerError) else EXIT_UNEXPECTED
    return FailureRecord.of(as_dagger_error(exc), code, at)


def write_failure(state_dir: Path, record: FailureRecord) -> Path:
    """Write ``record`` to ``state_dir/failure.json`` atomically (a temporary file in the same folder, flushed
    to disk, then renamed over it): a reader sees the old record or the new one, never a part of one. Return
    its path.

    Raises OSError when the folder cannot be created or written (the temporary file is removed)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / FAILURE_FILE
    fd, tmp = tempfile.mkstemp(prefix=f".{FAILURE_FILE}.", suffix=".tmp", dir=state_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record.as_json(), fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def read_failure(state_dir: Path, since: float | None = None) -> FailureRecord | None:
    """Return the record in ``state_dir/failure.json``; None when there is none, it cannot be read, or it was
    written before ``since`` (the record of an older run)."""
    try:
        data = json.loads((state_dir / FAILURE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    record = FailureRecord.from_json(data)
    return record if record is not None and (since is None or record.at >= since) else None
