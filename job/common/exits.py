"""How a process ended, in words: a negative return code is the signal that killed it, not an exit code."""

from __future__ import annotations

import signal


def signal_name(number: int) -> str:
    """Return the name of signal ``number`` (``SIGKILL``), or ``signal N`` for one Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def how_it_ended(code: int | None, *, after_name: bool = False) -> str:
    """Return how a process with return code ``code`` ended: ``killed by signal 9 (SIGKILL)`` (negative, as
    :mod:`subprocess` reports a signal), ``exited with code 2``, or ``its exit code is not known`` (None).
    With ``after_name``, to follow the process's name: ``was killed by signal 9 (SIGKILL)``."""
    if code is None:
        return "its exit code is not known"
    if code < 0:
        return f"{'was ' if after_name else ''}killed by signal {-code} ({signal_name(-code)})"
    return f"exited with code {code}"
