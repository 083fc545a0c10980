"""Children that stop with their parent: on Linux, a child started with :func:`die_with_parent` as its
``preexec_fn`` gets SIGTERM from the kernel when the process that started it dies, even by SIGKILL
(``prctl(PR_SET_PDEATHSIG)``), so it never lingers with PPID 1 holding a port."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """Return a ``preexec_fn`` for ``subprocess.Popen`` that has the child receive ``sig`` when its parent
    dies; a no-op on systems without ``prctl`` (not Linux).

    The parent of the moment is captured here, so a parent that died between the fork and the ``prctl``
    is noticed too (the child then signals itself)."""
    parent = os.getpid()

    def preexec() -> None:
        if not sys.platform.startswith("linux"):
            return
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
            return  # nothing more to do in a forked child that is about to exec
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec
