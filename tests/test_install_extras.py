"""Every install path works: the wheel, built once, installed with no extra and with each extra alone, runs the
commands of that extra; a missing extra is one line naming the package and how to install it.

One core virtualenv holds the wheel and its core dependencies. Each extra gets its own fresh virtualenv on top
of the core one (a ``.pth`` file puts the core site-packages after its own), into which pip installs
``daggers[<extra>]``: pip finds the core already there and adds only that extra's packages, so each extra is
proven alone, never beside another.

The dependencies are the very distributions installed beside the tests, linked, not unpacked again (pip
downloading and unpacking 0.5 GB proved nothing about Daggers, and took 2 minutes): for the core, the closure of
the wheel's ``Requires-Dist`` (markers evaluated, versions checked against each requirement); for an extra, the
closure with that extra less the core's. pip then installs the wheel with ``--no-index``: it must find every
requirement of the wheel among the linked ones, with a matching version, or it fails; so a package the wheel
forgets to require is missing at run time, and one it requires but nothing links fails the install. With no
index pip has no other candidate, so it never replaces (nor deletes through) a link.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

import pytest
import requests
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from job.common.optional import install_hint
from job.stack.ports import free_port
from tests.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[1]
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
PIP_TIMEOUT_S = 1500


def _run(
    argv: list[str | Path],
    *,
    timeout: float = 120,
    check: bool = True,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
    )
    if check:
        assert result.returncode == 0, f"{argv}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def _site(venv: Path) -> Path:
    return venv / "lib" / PY / "site-packages"


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of its packages (never in the checkout: setuptools' build/
    folder would keep deleted modules)."""
    src = tmp_path_factory.mktemp("src")
    for package in ("job", "tui", "web_atlas", "alerting", "protos"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, src],
        timeout=600,
    )
    return next(dist.glob("daggers-*.whl"))


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """Return the ``Requires-Dist`` of ``wheel``'s metadata."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        meta = HeaderParser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in meta.get_all("Requires-Dist") or []]


def closure(requirements: list[Requirement], extra: str) -> dict[str, metadata.Distribution]:
    """Return the distributions installed for this interpreter that pip needs for ``requirements`` with
    ``extra`` (``""``: none), by canonical name, following each one's own requirements and extras.

    Raises AssertionError if a needed distribution's version does not match its requirement (and
    PackageNotFoundError if one is not installed here)."""
    found: dict[str, metadata.Distribution] = {}
    done: set[tuple[str, frozenset[str]]] = set()
    todo = [(requirement, extra) for requirement in requirements]
    while todo:
        requirement, env_extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": env_extra}):
            continue
        dist = metadata.distribution(requirement.name)
        assert requirement.specifier.contains(dist.version, prereleases=True), (
            str(requirement),
            dist.version,
        )
        key = (canonicalize_name(requirement.name), frozenset(requirement.extras))
        if key in done:
            continue
        done.add(key)
        found[key[0]] = dist
        for line in dist.requires or []:
            todo.extend((Requirement(line), e) for e in ("", *sorted(requirement.extras)))
    return found


def link(site: Path, dists: list[metadata.Distribution]) -> set[str]:
    """Link into ``site`` each top-level file and folder that ``dists`` installed in site-packages (and the
    cached bytecode of a top-level module); return the names linked. Their scripts are not linked."""
    names: set[str] = set()
    for dist in dists:
        assert dist.files is not None, dist.metadata["Name"]
        tops = {f.parts[0] for f in dist.files if f.parts[0] not in ("..", "__pycache__")}
        names |= tops
        for name in tops:
            source = Path(str(dist.locate_file(name)))
            (site / name).symlink_to(source)
            cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
            if source.suffix == ".py" and cached.is_file():
                (site / "__pycache__").mkdir(exist_ok=True)
                (site / "__pycache__" / cached.name).symlink_to(cached)
    return names


def install(venv: Path, wheel: str) -> None:
    """Install ``wheel`` (a path, with any ``[extra]``) into ``venv`` with this interpreter's pip, from no
    index: every requirement must already be there. Compiled, as a user's pip does (under
    PYTHONDONTWRITEBYTECODE each command would compile what it imports again, ~0.15 s)."""
    _run(
        [sys.executable, "-m", "pip", "--python", venv / "bin/python", "install", "-q", "--no-index", wheel],
        timeout=PIP_TIMEOUT_S,
    )


@pytest.fixture(scope="session")
def core(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh virtualenv with the wheel and its core dependencies, no extra."""
    venv = tmp_path_factory.mktemp("venvs") / "core"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    linked = link(_site(venv), list(closure(wheel_requirements(wheel), "").values()))
    install(venv, str(wheel))
    # pip installed the wheel's packages and nothing else
    assert {p.name for p in _site(venv).iterdir()} - linked - {"__pycache__"} == {
        "alerting",
        "daggers-0.1.0.dist-info",
        "job",
        "protos",
        "tui",
        "web_atlas",
    }
    return venv


def with_extra(core: Path, wheel: Path, extra: str) -> Path:
    """A fresh virtualenv on top of ``core`` with ``daggers[extra]``; returns its python."""
    venv = core.parent / extra
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    (_site(venv) / "daggers_core.pth").write_text(f"{_site(core)}\n")
    requirements = wheel_requirements(wheel)
    core_names = closure(requirements, "").keys()
    dists = [d for name, d in closure(requirements, extra).items() if name not in core_names]
    linked = link(_site(venv), dists)
    install(venv, f"{wheel}[{extra}]")
    # pip found daggers in the core and installed nothing
    assert {p.name for p in _site(venv).iterdir()} - linked - {"__pycache__"} == {"daggers_core.pth"}
    return venv / "bin/python"


@pytest.fixture(scope="session")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("state")


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts (each in its own session); all are killed with their children at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _daggers(python: Path, *args: str | Path, **kw) -> subprocess.CompletedProcess[str]:
    return _run([python, "-m", "job.cli", *args], **kw)


def _missing(result: subprocess.CompletedProcess[str], package: str, needed_by: str, extra: str) -> None:
    """Assert ``result`` is the one-line error of a missing ``package`` (exit 2, no traceback)."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[:2] == [
        f"{package} is not installed: {needed_by} needs the {package} package, from Daggers' {extra} extra",
        f"hint: {install_hint(extra)}",
    ], result.stderr


def test_core_runs_the_control_plane_and_names_each_missing_extra(
    core: Path, state: Path, tmp_path: Path
) -> None:
    daggers = core / "bin/daggers"  # the console script of the wheel
    done = _run([daggers, "registry", "init", "--admin", "alice", "--state-dir", state])
    assert done.stdout.strip() == f"registry sqlite:///{state / 'registry.db'} ready; superuser alice"
    checked = _run([daggers, "alerts", "check", "--config", ROOT / "examples/alerts/alerting.yaml"])
    assert checked.stdout.startswith(f"OK {ROOT / 'examples/alerts/alerting.yaml'}: ")
    # the SQL tools and the schemas come with the wheel: run away from the checkout, so nothing is read from it
    spec = ROOT / "examples/bookings-per-s2.yaml"
    sql = _run([daggers, "sql", "check", spec], cwd=tmp_path)
    assert sql.stdout.startswith("OK bookings-per-s2: reads {'data_stream': ['city_id', "), sql.stdout
    protos = _run([daggers, "protos", "list"], cwd=tmp_path).stdout.splitlines()
    assert [line.split()[0] for line in protos][:4] == [
        "daggers.aggregates.BookingAggregate",
        "daggers.events.ApiLog",
        "daggers.events.BookingLog",
        "daggers.events.DriverLocationPing",
    ]

    _missing(
        _run([daggers, "tui", "--user", "alice", "--state-dir", state], check=False),
        "textual",
        "the console",
        "tui",
    )
    _missing(
        _run([daggers, "server", "--state-dir", state, "--port", str(free_port())], check=False),
        "uvicorn",
        "daggers server",
        "server",
    )
    _missing(
        _run([daggers, "atlas", "--port", str(free_port())], check=False, cwd=tmp_path),
        "streamlit",
        "daggers atlas",
        "atlas",
    )
    _missing(
        _run(
            [
                daggers,
                "registry",
                "init",
                "--admin",
                "alice",
                "--registry",
                "postgresql://alice@127.0.0.1:9/daggers",
            ],
            check=False,
        ),
        "psycopg",
        "a PostgreSQL registry",
        "postgres",
    )
    config = tmp_path / "alerts.yaml"
    config.write_text("influx: {url: 'http://127.0.0.1:9', database: daggers}\nrules: []\n")
    _missing(
        _run([daggers, "alerts", "run", "--config", config, "--state-dir", state], check=False),
        "apscheduler",
        "the alert engine",
        "alerting",
    )


def test_tui_extra_alone_opens_the_console(core: Path, wheel: Path, state: Path) -> None:
    python = with_extra(core, wheel, "tui")
    assert "Open the operator console." in _daggers(python, "tui", "--help").stdout
    _daggers(
        python, "registry", "init", "--admin", "alice", "--state-dir", state, check=False
    )  # once a session
    shown = _run(
        [
            python,
            "-c",
            (
                "import asyncio\n"
                "from job.control.client import open_plane\n"
                "from tui.app import DaggersApp\n"
                "async def main():\n"
                f"    app = DaggersApp(open_plane('alice', 'sqlite:///{state / 'registry.db'}'))\n"
                "    async with app.run_test() as pilot:\n"
                "        await pilot.pause()\n"
                "        print(type(app.screen).__name__)\n"
                "asyncio.run(main())\n"
            ),
        ],
        timeout=300,
    )
    assert shown.stdout.strip().splitlines()[-1] == "ClustersScreen"  # a superuser of no team starts there


def test_server_extra_alone_serves_the_api(
    core: Path, wheel: Path, state: Path, tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    python = with_extra(core, wheel, "server")
    assert "--port" in _daggers(python, "server", "--help").stdout
    _daggers(python, "registry", "init", "--admin", "alice", "--state-dir", state, check=False)
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [python, "-m", "job.cli", "server", "--state-dir", state, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    started.append(proc)

    def healthy() -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    wait_until("the server's health", healthy, 180, proc=proc, log=log)


def test_atlas_extra_alone_serves_the_map(
    core: Path, wheel: Path, tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    python = with_extra(core, wheel, "atlas")
    assert "--basemap" in _daggers(python, "atlas", "--help").stdout
    port = free_port()
    log = tmp_path / "atlas.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                python,
                "-m",
                "job.cli",
                "atlas",
                "--port",
                str(port),
                "--influx",
                f"http://127.0.0.1:{free_port()}",
            ],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    started.append(proc)

    def healthy() -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=5).ok
        except requests.RequestException:
            return False

    wait_until("the Atlas's health", healthy, 180, proc=proc, log=log)


def test_alerting_extra_alone_runs_the_engine(
    core: Path, wheel: Path, state: Path, tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    python = with_extra(core, wheel, "alerting")
    config = tmp_path / "alerts.yaml"
    config.write_text(f"influx: {{url: 'http://127.0.0.1:{free_port()}', database: daggers}}\nrules: []\n")
    assert _daggers(python, "alerts", "check", "--config", config).stdout.startswith(f"OK {config}: 0 rules")
    log = tmp_path / "alerts.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                python,
                "-m",
                "job.cli",
                "alerts",
                "run",
                "--config",
                config,
                "--state-dir",
                tmp_path / "alerts-state",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    started.append(proc)
    wait_until("the alert engine's start", lambda: "started" in log.read_text(), 120, proc=proc, log=log)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, log.read_text()
    assert log.read_text().splitlines()[-1] == "alert engine stopped"
