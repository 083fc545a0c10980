"""A fork server for the Python processes Spark keeps per streaming query in a shared host.

Spark runs each streaming Python data source's planning side (``initialOffset``, ``latestOffset``,
``partitions``, ``commit``) in a Python process of its own, started with
``<pythonExec> -m pyspark.sql.streaming.python_streaming_source_runner`` and kept for the life of
the query. Started afresh, each one imports pyspark, pyarrow, numpy, protobuf and the Kafka source
again: about 70 MB (PSS) per query, measured, which is most of a shared dagger's memory.

In a shared host, Spark's ``pythonExec`` is :data:`LAUNCHER` (``spark_python.sh``). For the
source runner it runs :mod:`job.shared.forkclient`, which hands its standard streams, environment
and working folder to this server over a Unix socket; the server, which imported those modules once,
forks a child that runs the runner module with them. The child shares the imported modules' pages
with the server (copy on write, ``gc.freeze()`` keeps the collector from touching them), so a query
costs a few MB. PySpark's daemons of the data sources' planning workers (``-m pyspark.daemon
pyspark.sql.worker.*``, one per module, for the application's life) are forked the same way: their workers
unpickle the Kafka source, which imported everything again in each (~0.5-1 core-s a worker); and so is
the UDF workers' daemon (:mod:`job.spark.worker_daemon`), which imported them once per application. The UDF
workers fork from that daemon. Every other Python process is the plain interpreter (the launcher
``exec``\\ s it).

Lifetimes: the client stays as the process Spark knows (it forwards SIGTERM/SIGINT to the child, holding
one that comes before the child's PID until it has it, and exits with the child's exit code; the child
ignores what the client was started with ignored, as an exec would); when the
client goes away (Spark killed it), the child's connection closes and the child exits. The server exits
when the process that started it exits.

Protocol (one request per connection, a ``SOCK_SEQPACKET`` socket, so messages keep their bounds):
the client sends one message (module, folder, the signals it was started with ignored, argument count,
arguments and ``KEY=VALUE`` environment entries, each NUL-terminated) with its file descriptors 0, 1 and 2 attached
(``SCM_RIGHTS``); the forked child answers with its PID (decimal), then sends ``exit <code>`` when the
module returns or raises ``SystemExit`` (both from the child, so always in that order); a refused request is
closed with no answer, and the client then runs the module itself. The client is ``forkclient.c`` (0.3 MB), built at
start with the system's C compiler, or :mod:`job.shared.forkclient` (10 MB) without one.

The working folder is never on the import path: ``python -m`` puts it first, so a ``pyspark.py`` in the folder a
dagger was started from ran in the server and in every child forked from it. The server starts with ``-P``
(:func:`command`), its children keep its path, and the launcher and both clients set ``PYTHONSAFEPATH`` for what
they run themselves (an interpreter older than 3.11 ignores it, where ``-P`` would stop it).
"""

from __future__ import annotations

import array
import contextlib
import gc
import logging
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TypedDict

from job.errors import debug_enabled
from job.spark.worker_daemon import PRELOAD as WORKER_PRELOAD

#: The streaming source runner, one per query for its life.
RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
#: PySpark's worker daemon, which Spark starts (one per worker module, for the application's life) for the
#: planning side of Python data sources: ``lookup_data_sources``, ``create_data_source``,
#: ``plan_data_source_read``; its workers unpickle the Kafka source, i.e. import it. (Spark passes no
#: daemon module of ours to these: ``spark.python.daemon.module`` reaches the UDF workers only.)
DAEMON = "pyspark.daemon"
#: The daemon of the UDF workers and the sources' readers (``spark.python.daemon.module``), one per
#: application (per executor on a cluster).
WORKERS = "job.spark.worker_daemon"
#: The modules served: anything else is refused (the client then runs it itself).
SERVED = (RUNNER, DAEMON, WORKERS)
#: Imported once by the server, before it forks: what the runner, the Kafka source and the workers need.
PRELOAD = (RUNNER, *WORKER_PRELOAD)
#: Spark's ``pythonExec`` where a fork server runs: a shared host, a dedicated dagger on ``local[...]``.
LAUNCHER = Path(__file__).with_name("spark_python.sh")
#: Environment read by :data:`LAUNCHER`: the interpreter, and the server's socket (unset: no server).
PYTHON_ENV, SOCKET_ENV, CLIENT_ENV = "DAGGERS_PYTHON", "DAGGERS_FORK_SERVER", "DAGGERS_FORK_CLIENT"
MAX_MESSAGE = 1 << 20

log = logging.getLogger("daggers.shared")


class ForkRequest(TypedDict):
    """What a client asks the server to run (:func:`job.shared.forkclient.encode`)."""

    module: str
    cwd: str
    ignored: list[int]  # the signals the client was started with ignored
    argv: list[str]
    env: dict[str, str]


def receive(conn: socket.socket) -> tuple[ForkRequest, list[int]]:
    """Return the request (``module``, ``cwd``, ``ignored``, ``argv``, ``env``) and the file descriptors
    attached."""
    fds = array.array("i")
    msg, ancdata, _flags, _addr = conn.recvmsg(MAX_MESSAGE, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    return decode(msg), list(fds)


def decode(msg: bytes) -> ForkRequest:
    """Parse a request (see :func:`job.shared.forkclient.encode`); raises ValueError when it is not one."""
    parts = [os.fsdecode(p) for p in msg.split(b"\0")[:-1]]
    if len(parts) < 4:
        raise ValueError("a short request")
    ignored = [int(n) for n in parts[2].split(",") if n]
    count = int(parts[3])
    env = dict(entry.split("=", 1) for entry in parts[4 + count :] if "=" in entry)
    return {"module": parts[0], "cwd": parts[1], "ignored": ignored, "argv": parts[4 : 4 + count], "env": env}


def child_signals(ignored: list[int]) -> None:
    """Set the signals as a fresh ``python`` started by the client would have them: those the client was
    started with ignored stay ignored (an exec keeps SIG_IGN; the JVM starts Python with SIGINT ignored, so
    a terminal's Ctrl-C must not stop a query's source runner), the others as Python sets them at start."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for sig, default in (
        (signal.SIGINT, signal.default_int_handler),
        (signal.SIGTERM, signal.SIG_DFL),
        (signal.SIGHUP, signal.SIG_DFL),
    ):
        signal.signal(sig, signal.SIG_IGN if int(sig) in ignored else default)


def run_child(conn: socket.socket, request: ForkRequest, fds: list[int]) -> None:
    """In the forked child: take the client's streams, environment and folder, run the module, report
    its exit code to the client, and exit. Never returns."""
    code = 1
    try:
        # The child's PID is its first word to the client, before its "exit": sent by the server after the
        # fork, it came after a quick child's end on a busy machine, and the client ran the module again.
        conn.sendall(str(os.getpid()).encode())
    except OSError:
        os._exit(143)  # the client is gone
    try:
        child_signals(request.get("ignored", []))
        name_process(request["module"])
        for target, fd in zip((0, 1, 2), fds, strict=False):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        sys.path[1:1] = extra
        sys.argv = [request["module"], *request["argv"]]
        threading.Thread(target=_exit_with_client, args=(conn,), daemon=True).start()
        # The module itself runs afresh as __main__ (what it imports stays loaded from the server).
        sys.modules.pop(request["module"], None)
        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # noqa: BLE001 - the child must exit, reporting what it can
        if spark_hung_up(exc) and not debug_enabled():
            code = 0  # Spark closed the connection (its query stopped, its JVM went): nothing to report
        else:
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(f"exit {code}".encode())
        os._exit(code)


def spark_hung_up(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised while handling) is the end of Spark's connection: an
    end of file where a request was due, or a broken or reset pipe. A query's source runner ends that way when
    its JVM stops first, as on a terminal's Ctrl-C, and PySpark's runner then printed a traceback of three
    chained exceptions into the dagger's log (shown now only behind ``--debug``)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, EOFError | BrokenPipeError | ConnectionResetError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: The command name (``/proc/<pid>/comm``, what ``top`` and ``ps -o comm`` show) of a child by its module:
#: every child keeps the server's command line, so this is how one tells them apart.
NAMES = {RUNNER: "python-runner", DAEMON: "python-daemon", WORKERS: "python-workers"}


def name_process(module: str) -> None:
    """Set this process's command name for ``module`` (at most 15 bytes; ``python-forked`` for others)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/comm").write_text(NAMES.get(module, "python-forked"))


def _exit_with_client(conn: socket.socket) -> None:
    """Exit the child as soon as the client's connection closes (Spark stopped or killed the client)."""
    with contextlib.suppress(OSError):
        while conn.recv(64):
            pass
    os._exit(143)


def serve(path: Path, parent: int, modules: tuple[str, ...] = SERVED) -> None:
    """Accept requests on ``path`` until the process ``parent`` exits; fork a child for each request
    to run one of ``modules`` (others are refused: the client then runs the module itself). The
    socket's folder belongs to the server: it is removed when the server exits."""
    for module in PRELOAD:
        __import__(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    # Ctrl-C in a terminal reaches the whole process group: the parent handles it, and the server ends
    # when the parent does (a child forked from here takes Python's default handler back).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server.bind(str(path))
    server.listen(64)
    gc.collect()
    gc.freeze()  # the imported modules' objects stay out of the children's collections: fewer copied pages
    ready = path.with_suffix(".ready")
    ready.write_text(str(os.getpid()))
    try:
        while os.getppid() == parent:
            readable, _, _ = select.select([server], [], [], 1.0)
            if not readable:
                continue
            conn, _ = server.accept()
            try:
                request, fds = receive(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            if request.get("module") not in modules or len(fds) != 3:
                for fd in fds:
                    os.close(fd)
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                server.close()
                run_child(conn, request, fds)
            for fd in fds:
                os.close(fd)
            conn.close()  # the child tells the client its PID
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)  # the socket's folder is the server's own


def start(timeout_s: float = 60.0, *, wait: bool = True) -> tuple[subprocess.Popen[bytes], Path] | None:
    """Start a fork server for this process and point Spark's Python at :data:`LAUNCHER`; return the
    server process and its socket, or None (with Spark's Python left as it was) when it cannot start.

    Call before the Spark session is built. The server exits when this process does. With ``wait``
    False it returns at once, without the C client: until the server listens, the launcher's (Python)
    client runs each module in place, as it does when the server is gone (a dedicated dagger starts its
    JVM meanwhile, which asks for its first Python process seconds later)."""
    if not os.access(LAUNCHER, os.X_OK):
        log.warning(
            "no fork server: %s is not executable; each query's source runner starts afresh", LAUNCHER
        )
        return None
    folder = Path(tempfile.mkdtemp(prefix="daggers-fork-"))  # short: a Unix socket path has 108 bytes
    path = folder / "sock"
    proc = subprocess.Popen(command(path))
    deadline = time.monotonic() + timeout_s
    while wait and not path.with_suffix(".ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(OSError):
                proc.kill()
            log.warning(
                "no fork server (it %s); each query's source runner starts afresh",
                "exited" if proc.poll() is not None else f"was not ready after {timeout_s:.0f} s",
            )
            return None
        time.sleep(0.05)
    env = {"PYSPARK_PYTHON": str(LAUNCHER), PYTHON_ENV: sys.executable, SOCKET_ENV: str(path)}
    client = build_client(folder) if wait else None
    if client is not None:
        env[CLIENT_ENV] = str(client)
    os.environ.update(env)
    return proc, path


def command(path: Path, also: tuple[str, ...] = ()) -> list[str]:
    """Return the command line of a fork server on socket ``path`` (serving the modules ``also`` too): ``-P``
    keeps the working folder off its import path, and so off its children's."""
    return [
        sys.executable,
        "-P",
        "-m",
        "job.shared.forkserver",
        str(path),
        *(a for m in also for a in ("--also", m)),
    ]


def start_if_local(master: str) -> tuple[subprocess.Popen[bytes], Path] | None:
    """For a dedicated dagger's application on this machine (``local[...]``): start a fork server without
    waiting for it (see :func:`start`), so that its source runner and the daemons of its source's planning
    workers fork with their imports done instead of each importing pyspark, pyarrow and the Kafka source
    again. On a cluster (``spark://``) its executors' Python stays as it was: None."""
    return start(wait=False) if master.startswith("local") else None


def spark_conf() -> dict[str, str]:
    """Return the Spark settings (``spark.executorEnv.*``) that hand the fork server's environment, as
    :func:`start` set it, to every Python process Spark starts. Without them only the JVM's own
    environment reaches them, which lacks it when the JVM was launched before the server (a SparkContext
    stopped and made again in one process): the launcher then ran ``python3``, not this interpreter."""
    return {
        f"spark.executorEnv.{key}": os.environ[key]
        for key in (PYTHON_ENV, SOCKET_ENV, CLIENT_ENV)
        if key in os.environ
    }


def build_client(folder: Path) -> Path | None:
    """Compile ``forkclient.c`` into ``folder`` with the system's C compiler; None when there is none
    or it fails (the launcher then uses the Python client)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    out = folder / "forkclient"
    done = subprocess.run(
        [cc, "-O2", "-o", str(out), str(Path(__file__).with_name("forkclient.c"))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0 or not os.access(out, os.X_OK):
        log.warning("the C fork client did not build (%s); using the Python one", done.stderr.strip()[:200])
        return None
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m job.shared.forkserver SOCKET [--also MODULE]``: serve until the parent process exits
    (``--also`` serves another module too: for tests)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m job.shared.forkserver")
    parser.add_argument("socket", type=Path)
    parser.add_argument("--also", action="append", default=[], help="Serve this module too.")
    args = parser.parse_args(argv)
    for module in args.also:
        __import__(module)
    serve(args.socket, os.getppid(), (*SERVED, *args.also))
    return 0


if __name__ == "__main__":
    sys.exit(main())
