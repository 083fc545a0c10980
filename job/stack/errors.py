"""Errors raised by the local stack (``daggers up`` / ``down`` / ``status``)."""

from __future__ import annotations

from job.errors import DaggerError


class StackError(DaggerError):
    """A local service cannot be started, checked or stopped.

    ``title`` is a short header; the message names the service and, where it matters, the port,
    the directory or the log file to look at.
    """

    title = "Local stack error"
