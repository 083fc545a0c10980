"""The working folder is never on the import path of the fork server, its children and what its launcher and
clients run (issue 49, item 15): ``python -m`` puts it first, so a ``pyspark.py`` in the folder a dagger was
started from ran in the fork server, and a module there shadowed the served one's imports."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from job.shared import forkserver
from tests.helpers import wait_until

REPO = Path(__file__).resolve().parents[3]
PROBE = "tests.job.shared.fork_probe"
FORKCLIENT = forkserver.LAUNCHER.with_name("forkclient.py")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A working folder that plants a ``pyspark.py`` and a ``daggers_cwd_probe.py``: each writes a marker file
    named after itself when it is imported."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("pyspark", "daggers_cwd_probe"):
        (work / f"{name}.py").write_text(
            f"from pathlib import Path\n(Path(__file__).parent / 'RAN-{name}').touch()\n"
        )
    return work


def ran(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("RAN-*"))


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    for key in (forkserver.SOCKET_ENV, forkserver.PYTHON_ENV, forkserver.CLIENT_ENV):
        env.pop(key, None)
    return {**env, "PYTHONPATH": str(REPO)}  # the probe module lives in tests/


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    short = Path(tempfile.mkdtemp(prefix="dfs-"))  # a Unix socket path has 108 bytes
    yield short
    shutil.rmtree(short, ignore_errors=True)


def test_start_does_not_import_the_working_folders_pyspark(folder: Path) -> None:
    script = (
        "from job.shared import forkserver\n"
        "started = forkserver.start(120)\n"
        "print('none' if started is None else started[0].pid, flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", script],
        cwd=folder,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    pid = done.stdout.strip()
    with contextlib.suppress(ValueError, ProcessLookupError):
        os.kill(int(pid), signal.SIGKILL)  # it would end within a second of its parent anyway
    assert ran(folder) == []
    assert pid != "none", done.stderr  # the server preloaded the real pyspark and listened


def test_a_forked_child_does_not_import_from_the_working_folder(folder: Path, socket_dir: Path) -> None:
    sock = socket_dir / "sock"
    server = subprocess.Popen(forkserver.command(sock, (PROBE,)), cwd=folder, env=base_env())
    try:
        wait_until(
            "the fork server to start", sock.with_suffix(".ready").exists, 120, every_s=0.05, proc=server
        )
        env = {**base_env(), forkserver.SOCKET_ENV: str(sock), forkserver.PYTHON_ENV: sys.executable}
        done = subprocess.run(
            [sys.executable, "-S", str(FORKCLIENT), "-m", PROBE],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        got = json.loads(done.stdout)
        assert got["ppid"] == server.pid  # forked by the server
        assert (got["cwd"], got["imported"], got["cwd_on_path"]) == (str(folder), False, False)
        assert ran(folder) == []
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("client", ["launcher", "python", "c"])
def test_a_module_run_in_place_does_not_import_from_the_working_folder(
    client: str, folder: Path, socket_dir: Path
) -> None:
    """With no server (gone, or never started) the launcher and both clients run ``python -m MODULE`` as
    Spark asked: the working folder stays off its path there too."""
    env = {
        **base_env(),
        forkserver.SOCKET_ENV: str(socket_dir / "none"),
        forkserver.PYTHON_ENV: sys.executable,
    }
    argv = {"launcher": [str(forkserver.LAUNCHER)], "python": [sys.executable, "-S", str(FORKCLIENT)]}.get(
        client
    )
    if argv is None:
        built = forkserver.build_client(socket_dir)
        assert built is not None, "cc is on the machine: the C client must build"
        argv = [str(built)]
    done = subprocess.run(
        [*argv, "-m", PROBE], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["cwd"], got["imported"], got["cwd_on_path"]) == (str(folder), False, False)
    assert ran(folder) == []
