"""The client of :mod:`job.shared.forkserver`: ``python -S forkclient.py -m MODULE [ARGS]``.

Run by ``spark_python.sh`` in place of ``python -m MODULE`` when the C client (``forkclient.c``, the
same protocol in 0.3 MB) could not be built. It sends its standard streams,
environment and working folder to the fork server, then stands for the child the server forked:
SIGTERM and SIGINT are passed on to it (unless this process was started with them ignored: then the
child ignores them too), and it exits with the child's exit code. When the server
cannot be reached, it runs the module itself (``exec`` of the interpreter), as Spark asked.

It uses the standard library only (``-S``: no site-packages), so that it stays a few MB.
"""

from __future__ import annotations

import array
import contextlib
import os
import signal
import socket
import sys

#: Held (blocked) from the request until the child's PID comes, then forwarded to the child.
HELD = {signal.SIGTERM, signal.SIGINT}
#: Signals whose "ignored" passes to the child (an exec keeps SIG_IGN): the JVM starts Python with SIGINT
#: ignored, and a child forked from the server must ignore it as ``python -m MODULE`` started here would.
PASSED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def ignored_signals() -> list[int]:
    """Return the signals of :data:`PASSED` this process ignores (it was started with them ignored)."""
    return [int(sig) for sig in PASSED if signal.getsignal(sig) == signal.SIG_IGN]


def run_locally(args: list[str]) -> None:
    """Replace this process with ``python ARGS`` (the interpreter named by DAGGERS_PYTHON), the working
    folder off its import path (``PYTHONSAFEPATH``: ``python -m`` would put it first)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)  # a signal that came meanwhile acts here now
    python = os.environ.get("DAGGERS_PYTHON") or sys.executable
    os.execve(python, [python, *args], {**os.environ, "PYTHONSAFEPATH": "1"})


def encode(
    module: str, args: list[str], cwd: str, env: dict[str, str], ignored: list[int] | None = None
) -> bytes:
    """Return the request: NUL-terminated module, folder, the signals ignored (numbers joined by commas),
    argument count, arguments and ``KEY=VALUE`` environment entries."""
    parts = [
        module,
        cwd,
        ",".join(map(str, ignored or [])),
        str(len(args)),
        *args,
        *(f"{k}={v}" for k, v in env.items()),
    ]
    return b"".join(os.fsencode(p) + b"\0" for p in parts)


def main(args: list[str]) -> int:
    path = os.environ.get("DAGGERS_FORK_SERVER", "")
    if len(args) < 2 or args[0] != "-m" or not path:
        run_locally(args)
    # held until the child is known, then forwarded to it: Spark may stop the runner at any moment
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    ignored = ignored_signals()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        conn.sendmsg(
            [encode(args[1], args[2:], os.getcwd(), dict(os.environ), ignored)],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))],
        )
        first = conn.recv(64)  # the child's PID, its first word; nothing when the server refused
    except OSError:
        first = b""
    if first.startswith(b"exit "):  # the module ran (an older server sent the PID after the child's end)
        return int(first.split()[1])
    try:
        pid = int(first)
    except ValueError:  # refused, or no server: nothing ran
        conn.close()
        run_locally(args)
        return 1  # not reached
    for sig in HELD - set(ignored):  # an ignored one never comes: the child ignores it too
        signal.signal(sig, lambda signum, _frame: _forward(pid, signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HELD)
    reply = conn.recv(64)  # "exit <code>", or nothing when the child died without a word
    if reply.startswith(b"exit "):
        return int(reply.split()[1])
    return 143


def _forward(pid: int, signum: int) -> None:
    """Pass ``signum`` on to the child, but SIGINT only while the child is in this client's process group:
    a child that leads a group of its own (PySpark's daemons) would not get a terminal's Ctrl-C either."""
    with contextlib.suppress(OSError):
        if signum != signal.SIGINT or os.getpgid(pid) == os.getpgrp():
            os.kill(pid, signum)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
