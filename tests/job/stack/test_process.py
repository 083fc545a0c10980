"""Stopping a service process: SIGINT first (noida-db keeps its data folder on it), but not to one that
ignores SIGINT, which only waited out the timeout (a Spark standalone cluster started from a pytest-xdist
worker took 31 s to stop, 10 s a process)."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from job.stack.process import ManagedProcess, ignores_signal
from tests.helpers import wait_until

IGNORING = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
# Takes SIGINT whatever it inherited: a test run started in the background (nohup, `&` in a script) has
# SIGINT ignored, and a child inherits that
TAKING = (
    "import os, signal; signal.signal(signal.SIGINT, signal.SIG_DFL); print('ready', flush=True); "
    "os.execvp('sleep', ['sleep', '60'])"
)


def _started(tmp_path: Path, argv: list[str]) -> ManagedProcess:
    proc = ManagedProcess("the probe", argv, log_path=tmp_path / "probe.log")
    proc.start()
    wait_until(
        "the probe to start",
        lambda: "ready" in (tmp_path / "probe.log").read_text().splitlines(),
        60,
        every_s=0.05,
    )
    return proc


def test_a_process_that_ignores_sigint_is_sent_sigterm_at_once(tmp_path: Path) -> None:
    proc = _started(tmp_path, [sys.executable, "-c", IGNORING])
    assert proc.pid is not None and ignores_signal(proc.pid, signal.SIGINT)
    started = time.monotonic()
    proc.stop(timeout=120)
    assert time.monotonic() - started < 60  # not the 120 s a SIGINT it ignores would wait
    assert proc._popen is not None and proc._popen.returncode == -signal.SIGTERM


def test_a_process_that_takes_sigint_gets_it_first(tmp_path: Path) -> None:
    proc = _started(tmp_path, [sys.executable, "-c", TAKING])
    assert proc.pid is not None and not ignores_signal(proc.pid, signal.SIGINT)
    proc.stop(timeout=10)
    assert proc._popen is not None and proc._popen.returncode == -signal.SIGINT


def test_a_gone_process_ignores_nothing() -> None:
    assert not ignores_signal(2**22 + 12345, signal.SIGINT)


def test_a_service_killed_while_starting_says_it_was_killed_by_a_signal(tmp_path: Path) -> None:
    """A negative return code is the signal that killed it: "exited with exit code -9" read as an exit."""
    import os

    import pytest

    from job.stack.errors import StackError

    proc = _started(tmp_path, [sys.executable, "-c", TAKING])
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    with pytest.raises(StackError) as info:
        proc.wait_healthy(lambda: False, 60)
    assert info.value.message.startswith("the probe was killed by signal 9 (SIGKILL) while starting; "), (
        info.value.message
    )
    done = _started(tmp_path, [sys.executable, "-c", "print('ready', flush=True); raise SystemExit(3)"])
    with pytest.raises(StackError) as info:
        done.wait_healthy(lambda: False, 60)
    assert info.value.message.startswith("the probe exited with code 3 while starting; "), info.value.message
