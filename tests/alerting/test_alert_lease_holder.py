"""A lease held by a process of this host is free once that process is gone: exited, or a zombie nobody reaped
(the same check as the stack's, :func:`job.stack.process.pid_alive`)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from alerting.store import _holder_alive
from tests.helpers import wait_until


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split(" ", 1)[0]


def test_a_holder_of_this_host_is_alive_only_while_its_process_runs() -> None:
    host = socket.gethostname()
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert _holder_alive(f"{host}:{proc.pid}:abcd1234")
    finally:
        proc.kill()
    wait_until("the killed process to be a zombie", lambda: _state(proc.pid) == "Z", 30)
    assert not _holder_alive(f"{host}:{proc.pid}:abcd1234")  # not reaped yet: it holds nothing
    proc.wait()
    assert not _holder_alive(f"{host}:{proc.pid}:abcd1234")
    assert _holder_alive(f"{host}:{os.getpid()}:abcd1234")
    assert _holder_alive("another-host:1:abcd1234")  # another host's: the lease's expiry decides
