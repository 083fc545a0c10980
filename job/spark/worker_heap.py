"""Keep the garbage collection PySpark runs after every task cheap in its Python workers.

A reused PySpark worker (``pyspark.daemon``) calls ``gc.collect()`` after each task. A full
collection walks every container object of the process, and a worker that has imported pyarrow,
numpy, protobuf, confluent-kafka and the job's modules holds a few hundred thousand of them: that
walk was ~80% of the workers' CPU in a shared application of ten light pass-through daggers (py-spy,
0.2 cores per worker for tasks reading ~200 records each).

:func:`settle` moves the objects alive at the start of a task into the collector's permanent
generation (``gc.freeze()``), which later collections skip. It does so in the first
:data:`FREEZES` tasks of a process only, so that modules and caches that load on first use are
frozen too; by then the collector has run after each earlier task, so no garbage of theirs is
frozen. Objects created later are collected as before.
"""

from __future__ import annotations

import gc
import os

#: How many tasks of a process freeze what is alive when they start.
FREEZES = 3

_pid = -1
_done = 0


def settle() -> None:
    """Freeze the objects alive now, in the first :data:`FREEZES` calls of this process (a forked
    child counts its own); afterwards a no-op."""
    global _pid, _done
    pid = os.getpid()
    if pid != _pid:
        _pid, _done = pid, 0
    if _done >= FREEZES:
        return
    if _done == 0:
        gc.collect()  # once: whatever the imports left in cycles is not frozen
    _done += 1
    gc.freeze()


def frozen() -> int:
    """Return the number of objects in the permanent generation (for tests and diagnostics)."""
    return gc.get_freeze_count()
