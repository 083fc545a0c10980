"""Session teardowns that take long: each is a warning in the run's summary."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator


@contextlib.contextmanager
def slow_teardown(what: str, over_s: float = 5.0) -> Iterator[None]:
    """Time the stopping of a session's ``what``; a stop slower than ``over_s`` is a warning in the run's
    summary (a session fixture's teardown is the end of a test worker's run: it adds to the wall time)."""
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    if took > over_s:
        warnings.warn(f"stopping {what} took {took:.1f} s", stacklevel=1)
