"""The optional dependencies: a missing extra's package is one clear error (title, message, hint), never a
ModuleNotFoundError traceback. Missing packages are simulated the way Python sees an uninstalled one
(``sys.modules[name] = None`` makes ``import name`` raise ImportError); tests/test_install_extras.py installs the
real wheel without them."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

from job.cli.main import app
from job.common.optional import MissingDependencyError, install_hint, require, require_installed

runner = CliRunner()

SERVER_HINT = (
    "install the server extra: pip install '.[server]' in a Daggers checkout, "
    "or pip install 'daggers-<version>-py3-none-any.whl[server]' from a built wheel"
)


def test_require_returns_the_module() -> None:
    assert require("json", "server") is sys.modules["json"]


def test_a_missing_package_names_itself_its_extra_and_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "influxdb_client", None)
    with pytest.raises(MissingDependencyError) as info:
        require("influxdb_client", "influx2", needed_by="an influx sink with api: v2")
    assert info.value.title == "influxdb-client is not installed"
    assert (
        info.value.message
        == "an influx sink with api: v2 needs the influxdb-client package, from Daggers' influx2 extra"
    )
    assert info.value.hint == install_hint("influx2")
    assert isinstance(info.value.__cause__, ImportError)


def test_a_package_whose_own_dependency_is_missing_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "starlette", None)
    monkeypatch.delitem(sys.modules, "fastapi", raising=False)
    monkeypatch.delitem(sys.modules, "fastapi.applications", raising=False)
    with pytest.raises(MissingDependencyError) as info:
        require("fastapi", "server")
    assert info.value.title == "fastapi is not installed"
    assert info.value.message.startswith(
        "this needs the fastapi package, from Daggers' server extra (it cannot import starlette"
    )


def test_an_unknown_extra_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown extra 'spark'"):
        require("json", "spark")


def test_require_installed_checks_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    require_installed("json", "atlas")
    with pytest.raises(MissingDependencyError) as info:
        require_installed("no_such_package_here", "atlas", needed_by="daggers atlas")
    assert info.value.title == "no-such-package-here is not installed"


def test_daggers_server_without_its_extra_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    result = runner.invoke(app, ["server", "--state-dir", str(tmp_path), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.splitlines()[:2] == [
        "uvicorn is not installed: daggers server needs the uvicorn package, from Daggers' server extra",
        f"hint: {SERVER_HINT}",
    ]


def test_a_postgresql_registry_without_psycopg_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    result = runner.invoke(
        app, ["registry", "init", "--admin", "alice", "--registry", "postgresql://alice@127.0.0.1:9/daggers"]
    )
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.output.splitlines()[0] == (
        "psycopg is not installed: a PostgreSQL registry needs the psycopg "
        "package, from Daggers' postgres extra"
    )
