"""``daggers atlas``: option checks (unit), and the real command serving the app and its blank map
style, then stopping on Ctrl-C (SIGINT)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import typer
from typer.testing import CliRunner

from job.cli.atlas import (
    AtlasLaunchError,
    app_path,
    atlas_env,
    check_basemap,
    check_options,
    register,
    streamlit_argv,
)
from job.stack.ports import free_port
from tests.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Test app."""

    register(app)
    return app


def _start_atlas(tmp_path: Path, port: int, influx: str, db: str) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``daggers atlas`` (its own session) on ``port`` and wait until Streamlit answers its health check;
    return the process and its log."""
    code = (
        "import typer; from job.cli.atlas import register; app = typer.Typer(); app.callback()(lambda: None); "
        "register(app); app()"
    )
    log = tmp_path / "atlas.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "atlas", "--influx", influx, "--db", db, "--port", str(port)],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            if requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).ok:
                return proc, log
        except requests.RequestException:
            pass
        if time.monotonic() >= deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(log.read_text())
        time.sleep(0.3)


def test_argv_and_environment() -> None:
    assert app_path() == ROOT / "web_atlas" / "app.py"
    argv = streamlit_argv(8765, python="/py")
    assert argv[:5] == ["/py", "-m", "streamlit", "run", str(ROOT / "web_atlas" / "app.py")]
    opts = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert opts["--server.port"] == "8765" and opts["--server.address"] == "127.0.0.1"
    assert opts["--server.enableStaticServing"] == "true" and opts["--browser.gatherUsageStats"] == "false"
    assert opts["--server.headless"] == "true"
    env = atlas_env("http://h:1", "db1", {"PYTHONPATH": "/x", "KEEP": "1"})
    assert (env["DAGGERS_INFLUX"], env["DAGGERS_ATLAS_DB"], env["KEEP"]) == ("http://h:1", "db1", "1")
    assert env["PYTHONPATH"] == f"{ROOT}{os.pathsep}/x"
    assert "DAGGERS_ATLAS_BASEMAP" not in env
    env = atlas_env("http://h:1", "db1", {}, basemap="tiles", basemap_url="http://t/{z}/{x}/{y}.png")
    assert (env["DAGGERS_ATLAS_BASEMAP"], env["DAGGERS_ATLAS_BASEMAP_URL"]) == (
        "tiles",
        "http://t/{z}/{x}/{y}.png",
    )


def test_option_errors_name_the_option() -> None:
    with pytest.raises(AtlasLaunchError, match="--influx: 'influx:8086' is not an http"):
        check_options("influx:8086", "daggers", 8501, "127.0.0.1")
    with pytest.raises(AtlasLaunchError, match="--influx: do not put credentials in the URL"):
        check_options("http://u:secret@h:8086", "daggers", 8501, "127.0.0.1")
    with pytest.raises(AtlasLaunchError, match="--db: the database name is empty"):
        check_options("http://h:8086", " ", 8501, "127.0.0.1")
    with pytest.raises(AtlasLaunchError, match="--port: 70000 is not a TCP port"):
        check_options("http://h:8086", "d", 70000, "127.0.0.1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AtlasLaunchError, match=f"--port: 127.0.0.1:{port} is already in use"):
            check_options("http://h:8086", "d", port, "127.0.0.1")
    assert 0 < check_options("http://h:8086", "d", 0, "127.0.0.1") < 65536


def test_basemap_options() -> None:
    check_basemap("offline", None)
    check_basemap("style", "https://maps.example/style.json")
    with pytest.raises(
        AtlasLaunchError, match="--basemap: 'globe' is not one of offline, style, tiles, none"
    ):
        check_basemap("globe", None)
    with pytest.raises(AtlasLaunchError, match="--basemap tiles needs --basemap-url"):
        check_basemap("tiles", " ")
    result = CliRunner().invoke(_app(), ["atlas", "--basemap", "style", "--port", "0"])
    assert result.exit_code == 2 and "--basemap style needs --basemap-url" in " ".join(result.output.split())


def test_cli_reports_bad_options_without_a_traceback() -> None:
    result = CliRunner().invoke(_app(), ["atlas", "--influx", "ftp://h", "--port", "0"])
    assert result.exit_code == 2
    assert "Cannot start the Atlas: --influx: 'ftp://h' is not an http(s) URL" in " ".join(
        result.output.split()
    )
    assert "Traceback" not in result.output


@pytest.mark.integration
def test_cli_serves_the_app_and_stops_on_ctrl_c(influxdb: Any, tmp_path: Path) -> None:
    port = free_port()
    proc, log = _start_atlas(tmp_path, port, influxdb.url, "atlasdb")
    try:
        style = requests.get(f"http://127.0.0.1:{port}/app/static/blank-light.json", timeout=10)
        assert style.status_code == 200
        assert [layer["id"] for layer in style.json()["layers"]] == ["background"]
        # the offline base map: its style and the GeoJSON it points at are served by the app too
        style = requests.get(f"http://127.0.0.1:{port}/app/static/basemap-light.json", timeout=10).json()
        land = requests.get(f"http://127.0.0.1:{port}{style['sources']['land']['data']}", timeout=10)
        assert land.status_code == 200 and land.json()["type"] == "FeatureCollection"
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    text = log.read_text()
    assert (
        f"Atlas on http://127.0.0.1:{port}" in text and f"InfluxDB {influxdb.url}, database atlasdb" in text
    )


def _children(pid: int) -> list[int]:
    """Return the pids of ``pid``'s children (Linux /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _alive(pid: int) -> bool:
    """Return whether ``pid`` is a process that has not exited (a zombie counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_the_streamlit_child_stops_with_the_command(sig: signal.Signals, tmp_path: Path) -> None:
    """Issue 36: ``daggers atlas`` stopped with SIGTERM left Streamlit serving the port with PPID 1.
    Only the command's own process is signalled here (not its process group), as a service manager or
    ``kill PID`` does."""
    from job.stack.ports import port_in_use

    port = free_port()
    proc, log = _start_atlas(tmp_path, port, "http://127.0.0.1:9", "x")
    try:
        (child,) = _children(proc.pid)
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        wait_until(
            f"Streamlit (pid {child}) to stop with the command",
            lambda: not _alive(child) and not port_in_use("127.0.0.1", port),
            30,
            every_s=0.2,
            log=log,
        )
        if sig == signal.SIGTERM:
            assert proc.returncode == 0, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        for pid in _leftover(proc.pid):  # a Streamlit that outlived the command
            os.kill(pid, signal.SIGKILL)


def _leftover(session: int) -> list[int]:
    """Return the pids still alive in session ``session`` (what a failed test must not leave behind)."""
    out: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # fields[3] is the session id
            out.append(int(stat.parent.name))
    return out
