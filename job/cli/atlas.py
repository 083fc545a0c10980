"""``daggers atlas``: start the Atlas map (a Streamlit app in ``web_atlas/``) on a local port.

Call :func:`register` on the main Typer app. The engine never imports Streamlit or pydeck: the
command runs ``python -m streamlit run web_atlas/app.py`` as a child process, with static serving
on (the offline base map is served by the app at ``/app/static/``), no usage statistics, no browser
opened, and the InfluxDB URL and database in the environment (``DAGGERS_INFLUX``,
``DAGGERS_ATLAS_DB``). A password for InfluxDB is only taken from ``DAGGERS_INFLUX_PASSWORD``
(with ``DAGGERS_INFLUX_USERNAME``), never from the command line. Ctrl-C stops the app.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer
from rich.markup import escape

from job.cli.common import SafeConsole, fail
from job.common.optional import install_hint, require_installed
from job.errors import DaggerError
from job.stack.pdeathsig import die_with_parent
from job.stack.ports import free_port, port_in_use

DEFAULT_PORT = 8501
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_INFLUX = "http://127.0.0.1:8086"
DEFAULT_DATABASE = "daggers"
BASEMAPS = ("offline", "style", "tiles", "none")
"""Base map kinds (``web_atlas.basemap``): the shipped offline map, a MapLibre style URL, XYZ raster tiles, none."""
EXIT_ERROR = 2
_REPO_ROOT = Path(__file__).resolve().parents[2]


class AtlasLaunchError(DaggerError):
    """``daggers atlas`` cannot start: Streamlit is missing, the app is not found, a bad option."""

    title = "Cannot start the Atlas"


def app_path() -> Path:
    """Return the path of the Atlas's Streamlit script (``web_atlas/app.py``).

    Raises:
        AtlasLaunchError: the ``web_atlas`` package is not next to ``job`` nor importable.
    """
    candidate = _REPO_ROOT / "web_atlas" / "app.py"
    if candidate.is_file():
        return candidate
    spec = importlib.util.find_spec("web_atlas")  # finds the package without importing it
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            if (Path(folder) / "app.py").is_file():
                return Path(folder) / "app.py"
    raise AtlasLaunchError("the Atlas app (web_atlas/app.py) is not installed", hint=install_hint("atlas"))


def streamlit_argv(
    port: int, address: str = DEFAULT_ADDRESS, *, python: str | None = None, app: Path | None = None
) -> list[str]:
    """Return the command that serves the Atlas on ``address:port`` (``python -m streamlit run ...``)."""
    return [
        python or sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app or app_path()),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--server.enableStaticServing",
        "true",
        "--server.fileWatcherType",
        "none",
        "--server.runOnSave",
        "false",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--global.developmentMode",
        "false",
        "--theme.primaryColor",
        "#2b6cb0",
    ]


def atlas_env(
    influx_url: str,
    database: str,
    base: Mapping[str, str] | None = None,
    *,
    basemap: str | None = None,
    basemap_url: str | None = None,
) -> dict[str, str]:
    """Return the environment of the Atlas process: ``base`` (default ``os.environ``) plus the InfluxDB
    URL and database, the base map when given, and the project root on ``PYTHONPATH`` so
    ``web_atlas`` imports."""
    env = dict(os.environ if base is None else base)
    env["DAGGERS_INFLUX"] = influx_url
    env["DAGGERS_ATLAS_DB"] = database
    if basemap:
        env["DAGGERS_ATLAS_BASEMAP"] = basemap
    if basemap_url:
        env["DAGGERS_ATLAS_BASEMAP_URL"] = basemap_url
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONSAFEPATH"] = "1"  # `python -m streamlit` would import a streamlit.py in the working folder
    return env


def check_basemap(basemap: str, basemap_url: str | None) -> None:
    """Validate ``--basemap`` and ``--basemap-url`` (the app checks the URL's form again).

    Raises:
        AtlasLaunchError: an unknown kind, or ``style``/``tiles`` without a URL (the message names the option).
    """
    if basemap not in BASEMAPS:
        raise AtlasLaunchError(f"--basemap: {basemap!r} is not one of {', '.join(BASEMAPS)}")
    if basemap in ("style", "tiles") and not (basemap_url or "").strip():
        example = (
            "https://tiles.example/{z}/{x}/{y}.png"
            if basemap == "tiles"
            else "https://maps.example/style.json"
        )
        raise AtlasLaunchError(
            f"--basemap {basemap} needs --basemap-url", hint=f"for example --basemap-url {example}"
        )


def check_options(influx_url: str, database: str, port: int, address: str) -> int:
    """Validate the options; return the port to use (a free one from the OS when ``port`` is 0).

    Raises:
        AtlasLaunchError: a bad URL, database or port, or the port is taken (the message names the option).
    """
    parts = urlsplit(influx_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AtlasLaunchError(f"--influx: {influx_url!r} is not an http(s) URL such as {DEFAULT_INFLUX}")
    if parts.username or parts.password:
        raise AtlasLaunchError(
            "--influx: do not put credentials in the URL",
            hint="set DAGGERS_INFLUX_USERNAME and DAGGERS_INFLUX_PASSWORD instead",
        )
    if not database.strip():
        raise AtlasLaunchError("--db: the database name is empty")
    if port == 0:
        return free_port(address)
    if not 1 <= port <= 65535:
        raise AtlasLaunchError(f"--port: {port} is not a TCP port (1-65535, or 0 for any free port)")
    if port_in_use(address, port):
        raise AtlasLaunchError(
            f"--port: {address}:{port} is already in use",
            hint="pass another --port, or --port 0 for any free one",
        )
    return port


def atlas_command(
    influx: Annotated[
        str, typer.Option("--influx", envvar="DAGGERS_INFLUX", help="InfluxDB 1.x URL the daggers write to.")
    ] = DEFAULT_INFLUX,
    db: Annotated[
        str, typer.Option("--db", envvar="DAGGERS_ATLAS_DB", help="InfluxDB database.")
    ] = DEFAULT_DATABASE,
    port: Annotated[
        int, typer.Option("--port", help="Port of the web page (0: any free port).")
    ] = DEFAULT_PORT,
    address: Annotated[str, typer.Option("--address", help="Address to listen on.")] = DEFAULT_ADDRESS,
    basemap: Annotated[
        str,
        typer.Option(
            "--basemap",
            envvar="DAGGERS_ATLAS_BASEMAP",
            help="Base map: offline (shipped Natural Earth map), style (a MapLibre style URL), tiles (an XYZ raster "
            "tile URL) or none.",
        ),
    ] = "offline",
    basemap_url: Annotated[
        str | None,
        typer.Option(
            "--basemap-url",
            envvar="DAGGERS_ATLAS_BASEMAP_URL",
            help="The style URL or the tile URL template with {z}, {x} and {y}.",
        ),
    ] = None,
) -> None:
    """Open the Atlas: a map of a dagger's S2-cell aggregates in InfluxDB (Ctrl-C stops it)."""
    out = SafeConsole(highlight=False, soft_wrap=True)
    try:
        require_installed("streamlit", "atlas", needed_by="daggers atlas")
        require_installed("pydeck", "atlas", needed_by="daggers atlas")
        port = check_options(influx, db, port, address)
        check_basemap(basemap, basemap_url)
        argv = streamlit_argv(port, address)
    except DaggerError as exc:
        fail(exc)
    from job.stack.influx import influx_ping  # requests: not imported by every other command

    influx = influx.rstrip("/")
    if not influx_ping(influx):
        out.print(
            f"[yellow]warning:[/yellow] InfluxDB at {escape(influx)} does not answer /ping yet; "
            "the map shows an error until it does ([bold]daggers up[/bold] starts one)."
        )
    out.print(
        f"[bold]Atlas[/bold] on [link=http://{address}:{port}]http://{address}:{port}[/link]  "
        f"(InfluxDB {escape(influx)}, database {escape(db)}); Ctrl-C stops it"
    )
    # the kernel stops Streamlit when this process dies, even by SIGKILL; SIGTERM stops it here, first
    child = subprocess.Popen(
        argv,
        env=atlas_env(influx, db, basemap=basemap, basemap_url=basemap_url),
        preexec_fn=die_with_parent(signal.SIGTERM),
    )
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        code = child.wait()
    except KeyboardInterrupt:  # Ctrl-C (the child got the same SIGINT from the terminal) or SIGTERM
        code = stop_child(child)
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise typer.Exit(0 if code in (0, -signal.SIGINT, -signal.SIGTERM) else code)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM handler: stop waiting for the app as Ctrl-C does."""
    raise KeyboardInterrupt


def stop_child(child: subprocess.Popen[bytes], grace_s: float = 10.0) -> int:
    """Stop the Streamlit ``child`` and return its exit code: SIGTERM (it may have had SIGINT already),
    then SIGKILL after ``grace_s``."""
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
    try:
        return child.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait()


def register(app: typer.Typer) -> None:
    """Add the ``atlas`` command to ``app``."""
    app.command("atlas")(atlas_command)


__all__ = [
    "BASEMAPS",
    "AtlasLaunchError",
    "app_path",
    "atlas_command",
    "atlas_env",
    "check_basemap",
    "check_options",
    "register",
    "streamlit_argv",
]
