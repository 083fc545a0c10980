"""Signals a chaos run sends: to a whole process group, and a slow-down of process groups."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterable


def signal_group(pgid: int | None, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; return False when there is none (None, or gone)."""
    if not pgid:
        return False
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def throttle(
    pgids: int | Iterable[int],
    seconds: float,
    stopped_fraction: float,
    stop: threading.Event | None = None,
    period_s: float = 0.1,
) -> int:
    """Slow process group(s) ``pgids`` down for ``seconds``: in every ``period_s`` they are stopped (SIGSTOP)
    for ``stopped_fraction`` of the period and run for the rest. Always leaves them running (SIGCONT).

    Returns the number of periods. Raises ProcessLookupError when a group does not exist.
    """
    groups = [pgids] if isinstance(pgids, int) else list(pgids)
    periods = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end and not (stop is not None and stop.is_set()):
            for pgid in groups:
                os.killpg(pgid, signal.SIGSTOP)
            time.sleep(period_s * stopped_fraction)
            for pgid in groups:
                os.killpg(pgid, signal.SIGCONT)
            time.sleep(period_s * (1 - stopped_fraction))
            periods += 1
    finally:
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGCONT)
    return periods
