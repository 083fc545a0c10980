"""The fork server (job.shared.forkserver) with both clients: a request runs in a child forked from the
server, with the client's streams, environment, folder and arguments; the exit code comes back; signals
reach the child; a refused module and a missing server fall back to running the module in place."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from job.shared import forkserver
from job.stack.process import pid_alive
from tests.helpers import wait_until
from tests.job.shared.test_host_isolation import children_of

REPO = Path(__file__).resolve().parents[3]
TARGET = "tests.job.shared.fork_target"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    sock = tmp_path_factory.mktemp("fs") / "sock"
    assert len(str(sock)) < 100, sock  # a Unix socket path has 108 bytes
    proc = subprocess.Popen(
        [sys.executable, "-m", "job.shared.forkserver", str(sock), "--also", TARGET], cwd=REPO
    )
    wait_until("the fork server to start", sock.with_suffix(".ready").exists, 60, every_s=0.05, proc=proc)
    yield proc.pid, sock
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module", params=["c", "python"])
def client_env(
    request: pytest.FixtureRequest, server: tuple[int, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    env = {
        **os.environ,
        forkserver.SOCKET_ENV: str(server[1]),
        forkserver.PYTHON_ENV: sys.executable,
        "FORK_TEST_MARKER": "m-42",
        "PYTHONPATH": str(REPO),
    }
    env.pop(forkserver.CLIENT_ENV, None)
    if request.param == "c":
        built = forkserver.build_client(tmp_path_factory.mktemp("client"))
        assert built is not None, "cc is on the machine: the C client must build"
        env[forkserver.CLIENT_ENV] = str(built)
    return env


def client_argv(env: dict[str, str], *args: str) -> list[str]:
    """The client the launcher would run: the C one when built, else the Python one."""
    client = env.get(forkserver.CLIENT_ENV)
    if client:
        return [client, *args]
    return [sys.executable, "-S", str(forkserver.LAUNCHER.with_name("forkclient.py")), *args]


def fields(line: str) -> dict[str, Any]:
    return json.loads(line)


def test_a_request_runs_in_a_forked_child_with_the_clients_streams_env_and_exit_code(
    server: tuple[int, Path], client_env: dict[str, str], tmp_path: Path
) -> None:
    done = subprocess.run(
        client_argv(client_env, "-m", TARGET, "a b", "7"),
        env=client_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 7, done.stderr
    got = fields(done.stdout.strip())
    assert got["ppid"] == server[0]  # forked by the server, not started afresh
    assert got["comm"] == "python-forked"  # what top shows (the command line is the server's)
    assert got["cwd"] == str(tmp_path) and got["marker"] == "m-42" and got["argv"] == ["a b", "7"]
    assert done.stderr.strip() == "to stderr"


def test_a_child_whose_spark_connection_ended_exits_quietly_and_a_failure_still_shows(
    client_env: dict[str, str], tmp_path: Path
) -> None:
    """A source runner whose JVM stopped first ends in an end of file, then a broken pipe: no traceback in the
    dagger's log for that (one with ``DAGGERS_DEBUG=1``); any other exception still prints its traceback."""

    def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            client_argv(client_env, "-m", TARGET, *args),
            env={**client_env, **env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )

    quiet = run("--hang-up")
    assert (quiet.returncode, quiet.stderr.strip()) == (0, "to stderr")
    shown = run("--hang-up", DAGGERS_DEBUG="1")
    assert shown.returncode == 1
    assert "EOFError" in shown.stderr and shown.stderr.rstrip().endswith(
        "BrokenPipeError: [Errno 32] Broken pipe"
    )
    failed = run("--fail")
    assert failed.returncode == 1 and failed.stderr.rstrip().endswith("ValueError: a real failure")


def test_sigterm_reaches_the_child_and_a_killed_client_takes_the_child_with_it(
    server: tuple[int, Path], client_env: dict[str, str], tmp_path: Path
) -> None:
    children = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen(
            client_argv(client_env, "-m", TARGET, "--wait"),
            env=client_env,
            cwd=tmp_path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        child = int(fields(proc.stdout.readline().strip())["pid"])
        assert child != proc.pid and pid_alive(child)
        children.append(child)
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
        assert code == (143 if sig == signal.SIGTERM else -signal.SIGKILL)
        wait_until(
            f"the child {child} to end with its client ({sig.name})",
            lambda c=child: not pid_alive(c),
            10,
            every_s=0.05,
        )


def test_sigint_reaches_a_child_in_the_clients_group_only(client_env: dict[str, str], tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches a process group: a child that leads its own (PySpark's daemons) must not get
    it from its client either, or a dagger's Ctrl-C killed its workers' daemon mid-batch."""
    proc = subprocess.Popen(
        client_argv(client_env, "-m", TARGET, "--wait", "--own-group"),
        env=client_env,
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    child = int(fields(proc.stdout.readline().strip())["pid"])
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert pid_alive(child) and proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143


def _ignoring(*sigs: signal.Signals):  # type: ignore[no-untyped-def]
    def before_exec() -> None:
        for sig in sigs:
            signal.signal(sig, signal.SIG_IGN)

    return before_exec


@pytest.mark.parametrize(
    "ignored",
    [(), (signal.SIGINT,), (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)],
    ids=["none", "sigint", "all-three"],
)
def test_the_child_has_the_signals_a_fresh_interpreter_started_there_would(
    client_env: dict[str, str], tmp_path: Path, ignored: tuple[signal.Signals, ...]
) -> None:
    """An exec keeps SIG_IGN: the JVM starts its Python with SIGINT ignored, so that a terminal's Ctrl-C
    (to the whole group) leaves a query's source runner alone. A child forked by the server must have it so too,
    or Ctrl-C killed the runner and the dagger stopped with 'the streaming query failed' (exit 2)."""
    fresh = subprocess.run(
        [sys.executable, "-m", TARGET],
        env=client_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_ignoring(*ignored),
    )
    forked = subprocess.run(
        client_argv(client_env, "-m", TARGET),
        env=client_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_ignoring(*ignored),
    )
    assert fresh.returncode == forked.returncode == 0, forked.stderr
    assert fields(forked.stdout)["ppid"] != os.getpid()  # it was forked by the server
    defaults = {signal.SIGINT: "KeyboardInterrupt", signal.SIGTERM: "default", signal.SIGHUP: "default"}
    # what this process ignores is ignored after an exec too (CI runs under nohup: SIGHUP)
    expected = {
        sig.name: "ignored" if sig in ignored or signal.getsignal(sig) == signal.SIG_IGN else default
        for sig, default in defaults.items()
    }
    assert fields(fresh.stdout)["signals"] == fields(forked.stdout)["signals"] == expected


def test_sigint_ignored_by_the_client_leaves_the_child_running(
    client_env: dict[str, str], tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        client_argv(client_env, "-m", TARGET, "--wait"),
        env=client_env,
        cwd=tmp_path,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=_ignoring(signal.SIGINT),
    )
    assert proc.stdout is not None
    child = int(fields(proc.stdout.readline().strip())["pid"])
    proc.send_signal(signal.SIGINT)  # as a terminal's Ctrl-C reaches both
    os.kill(child, signal.SIGINT)
    time.sleep(1.0)
    assert pid_alive(child) and proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143


def test_what_the_server_does_not_serve_runs_in_place(client_env: dict[str, str], tmp_path: Path) -> None:
    # the launcher sends only the source runner to the server: anything else is the plain interpreter
    done = subprocess.run(
        [str(forkserver.LAUNCHER), "-m", TARGET, "3"],
        env=client_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3 and fields(done.stdout.strip())["ppid"] == os.getpid()
    # a module the server refuses: the client runs it itself
    done = subprocess.run(
        client_argv(client_env, "-m", "platform"),
        env=client_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "Linux" in done.stdout, done.stderr
    # no server at the socket: the client runs the module itself (python replaces the client)
    gone = {**client_env, forkserver.SOCKET_ENV: str(tmp_path / "gone.sock")}
    done = subprocess.run(
        client_argv(gone, "-m", TARGET, "5"),
        env=gone,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 5 and fields(done.stdout.strip())["ppid"] == os.getpid()


@pytest.mark.parametrize("kind", ["c", "python"])
def test_a_signal_before_the_childs_pid_is_held_then_forwarded(kind: str, tmp_path: Path) -> None:
    # a server of the test's own, so that the signal lands while the client waits for the PID
    sock_path = tmp_path / "s"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(str(sock_path))
    listener.listen(1)
    env = {**os.environ, forkserver.SOCKET_ENV: str(sock_path), forkserver.PYTHON_ENV: sys.executable}
    env.pop(forkserver.CLIENT_ENV, None)
    if kind == "c":
        built = forkserver.build_client(tmp_path)
        assert built is not None, "cc is on the machine: the C client must build"
        env[forkserver.CLIENT_ENV] = str(built)
    stand_in = subprocess.Popen(["sleep", "60"])  # the "child" the server names
    client = subprocess.Popen(client_argv(env, "-m", TARGET), env=env, stdout=subprocess.DEVNULL)
    try:
        listener.settimeout(30)
        conn, _ = listener.accept()
        conn.settimeout(30)
        assert forkserver.receive(conn)[0]["module"] == TARGET
        client.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        assert client.poll() is None, "the client died of a signal it should have held"
        conn.send(str(stand_in.pid).encode())
        assert stand_in.wait(timeout=10) == -signal.SIGTERM  # forwarded once the PID came
        conn.send(b"exit 0")
        assert client.wait(timeout=10) == 0
    finally:
        for proc in (client, stand_in):
            proc.kill()
            proc.wait()
        listener.close()


REMADE = """
import os, sys
os.environ["PATH"] = "/usr/bin:/bin"  # the launcher's fallback python3 is one without pyarrow
from job.spark.session import build_session
build_session("first", master="local[1]").stop()  # the JVM runs on, without the server's environment
from job.shared import forkserver
assert forkserver.start() is not None
spark = build_session("second", master="local[1]", extra=forkserver.spark_conf())
import pyarrow as pa
def probe(batches):
    import sys
    for _ in batches:
        yield pa.RecordBatch.from_pydict({"exe": [sys.executable]})
print(spark.range(1).mapInArrow(probe, "exe string").collect()[0].exe)
"""


@pytest.mark.integration
def test_a_context_made_again_hands_the_server_and_this_interpreter_to_its_python_processes() -> None:
    """A SparkContext made after the JVM was launched: its Python processes get the server's environment
    from its settings, not the JVM's (the launcher would otherwise run ``python3``)."""
    done = subprocess.run(
        [sys.executable, "-c", REMADE],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == sys.executable


def test_the_daemons_of_a_python_data_sources_planning_workers_are_forked_from_the_server(spark) -> None:  # type: ignore[no-untyped-def]
    """The session's fork server also serves ``-m pyspark.daemon``: Spark starts one per planning worker
    module (``create_data_source``, ``plan_data_source_read``, ...), whose workers import the source."""
    from pyspark.sql.datasource import DataSource, DataSourceReader

    class Numbers(DataSource):
        @classmethod
        def name(cls) -> str:
            return "daggers_test_numbers"

        def schema(self) -> str:
            return "n long"

        def reader(self, schema):  # type: ignore[no-untyped-def]
            class Reader(DataSourceReader):
                def read(self, partition):  # type: ignore[no-untyped-def]
                    yield from ((i,) for i in range(5))

            return Reader()

    spark.dataSource.register(Numbers)
    assert [row.n for row in spark.read.format("daggers_test_numbers").load().collect()] == [0, 1, 2, 3, 4]
    servers = [
        p
        for p in children_of(os.getpid())  # the session's, and this module's own (`server`)
        if "job.shared.forkserver" in Path(f"/proc/{p}/cmdline").read_text()
    ]
    # a pyspark daemon leads a process group of its own; a source runner stays in the server's
    daemons = [c for s in servers for c in children_of(s) if os.getpgid(c) == c]
    assert daemons, {s: children_of(s) for s in servers}
    names = {Path(f"/proc/{d}/comm").read_text().strip() for d in daemons}  # and the UDF workers' daemon
    assert "python-daemon" in names and names <= {"python-daemon", "python-workers"}, names


def test_the_udf_workers_daemon_is_forked_from_the_server(spark) -> None:  # type: ignore[no-untyped-def]
    """The UDF workers' daemon (job.spark.worker_daemon) forks from the session's fork server too: a worker's
    parent is the daemon, whose parent is the server."""
    import pyarrow as pa

    def where(batches):  # type: ignore[no-untyped-def]
        import os as os_

        daemon = os_.getppid()
        with open(f"/proc/{daemon}/stat") as fh:
            server = int(fh.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{daemon}/comm") as fh:
            name = fh.read().strip()
        for _ in batches:
            yield pa.RecordBatch.from_pylist([{"server": server, "name": name}])

    rows = spark.range(4, numPartitions=2).mapInArrow(where, "server long, name string").collect()
    got = {row.server for row in rows}
    servers = {
        p
        for p in children_of(os.getpid())
        if "job.shared.forkserver" in Path(f"/proc/{p}/cmdline").read_text()
    }
    assert got and got <= servers, (got, servers)
    assert {row.name for row in rows} == {"python-workers"}  # the daemon's name in top (and its workers')


def test_a_client_never_runs_a_module_the_server_ran_already(
    client_env: dict[str, str], tmp_path: Path
) -> None:
    """The child's PID is its first word, then its exit code; a server whose PID came after the child's end
    (stop 46: on a busy machine, the module then ran twice, once here) must still be believed: a stand-in
    server answers ``exit 7`` at once, and the client exits 7 without running the module."""
    sock = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:
        listener.bind(str(sock))
        listener.listen(1)
        env = {**client_env, forkserver.SOCKET_ENV: str(sock)}
        client = subprocess.Popen(
            client_argv(env, "-m", TARGET, "7"),
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            conn, _ = listener.accept()
            with conn:
                msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
                assert msg.split(b"\0")[0] == TARGET.encode() and len(fds) == 3
                for fd in fds:
                    os.close(fd)
                conn.sendall(b"exit 7")
                out, err = client.communicate(timeout=60)
        finally:
            if client.poll() is None:
                client.kill()
    assert (client.returncode, out, err) == (7, "", "")
