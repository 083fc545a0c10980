"""A command that fails with a Daggers error prints the error model's line (``title: message``, then its
``hint:``) and exits 2; only with ``daggers --debug`` (or ``DAGGERS_DEBUG=1``) does the traceback come first.
One failing command of each command group, run through the real console script as a user's shell runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

DAGGERS = Path(sys.executable).parent / "daggers"


@dataclass(frozen=True)
class Case:
    """``daggers ARGS`` run in a folder that ``setup`` prepares; the lines it prints on stderr (``{dir}``:
    the folder); the exception class its trace ends with."""

    args: list[str]
    lines: list[str]
    raised: str
    setup: Callable[[Path], None] = lambda _: None


def _bad_stack_state(folder: Path) -> None:
    (folder / "st").mkdir()
    (folder / "st" / "stack.json").write_text("{")


CASES = {
    "run": Case(
        ["run", "nope.yaml"], ["Invalid dagger spec: no spec file at nope.yaml"], "job.errors.SpecError"
    ),
    "sql": Case(
        ["sql", "check", "nope.yaml"],
        ["Invalid dagger spec: no spec file at nope.yaml"],
        "job.errors.SpecError",
    ),
    "protos": Case(
        ["protos", "build", "--root", "{dir}"],
        ["Schema error: no .proto files under {dir}"],
        "job.errors.SchemaError",
    ),
    "stack": Case(
        ["status", "--state-dir", "st"],
        [
            "Local stack error: cannot read {dir}/st/stack.json: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1); delete it if no service runs"
        ],
        "job.stack.errors.StackError",
        _bad_stack_state,
    ),
    "produce": Case(
        ["produce", "--stream", "booking", "--topic", "t", "--bootstrap", "127.0.0.1:9", "--count", "1"]
        + ["--cities", "Atlantis"],
        [
            "Invalid event generator arguments: unknown city 'Atlantis'; known cities: Jakarta, Bandung, Surabaya, "
            "Yogyakarta, Medan, Denpasar, Makassar, Semarang, Singapore, Bangkok"
        ],
        "job.produce.generator.GenerateError",
    ),
    "chaos": Case(
        ["chaos", "run", "nope.yaml"],
        ["Invalid dagger spec: no experiment file at nope.yaml"],
        "job.errors.SpecError",
    ),
    "alerts": Case(
        ["alerts", "check", "--config", "nope.yaml"],
        [
            "Invalid alerting configuration: no alerting configuration at nope.yaml",
            "hint: pass --config, or see examples/alerts/alerting.yaml",
        ],
        "alerting.errors.AlertConfigError",
    ),
    "atlas": Case(
        ["atlas", "--port", "70000"],
        ["Cannot start the Atlas: --port: 70000 is not a TCP port (1-65535, or 0 for any free port)"],
        "job.cli.atlas.AtlasLaunchError",
    ),
    "control": Case(
        ["dagger", "list", "--user", "ghost", "--registry", "sqlite:///{dir}/registry.db"],
        [
            "Not found: unknown user 'ghost' in the registry",
            "hint: an admin adds users with: daggers user add NAME",
        ],
        "job.control.errors.NotFoundError",
    ),
    "registry": Case(
        ["registry", "init", "--admin", "root", "--registry", "sqlite:////proc/nope/registry.db"],
        ["Registry error: cannot make the registry's folder /proc/nope: No such file or directory"],
        "job.control.errors.RegistryError",
    ),
    "server": Case(
        ["server", "--max-spec-kb", "0", "--registry", "sqlite:///{dir}/registry.db"],
        [
            "Invalid command line: --max-spec-kb 0: it must be greater than 0",
            "hint: see daggers server --help",
        ],
        "job.errors.CommandLineError",
    ),
    "token": Case(
        ["token", "list", "--server", "http://127.0.0.1:9"],
        [
            "Not signed in: no credential for the server http://127.0.0.1:9",
            "hint: sign in with: daggers login --server http://127.0.0.1:9",
        ],
        "job.control.errors.AuthError",
    ),
    "jvm": Case(
        ["jvm-archive", "--path", "/proc/nope/x.jsa"],
        [
            "JVM archive: cannot make the folder /proc/nope: No such file or directory",
            "hint: name a file in a folder you can write (daggers jvm-archive --path FILE)",
        ],
        "job.spark.jvm_archive.ArchiveError",
    ),
}


def daggers(args: list[str], cwd: Path, debug_env: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "XDG_CONFIG_HOME": str(cwd / "config")}
    for name in (
        "DAGGERS_DEBUG",
        "DAGGERS_SERVER",
        "DAGGERS_TOKEN",
        "DAGGERS_REGISTRY",
        "DAGGERS_CREDENTIALS",
    ):
        env.pop(name, None)
    if debug_env:
        env["DAGGERS_DEBUG"] = "1"
    return subprocess.run(
        [str(DAGGERS), *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=env
    )


@pytest.mark.parametrize("group", CASES)
def test_an_error_is_its_line_and_the_trace_only_with_debug(group: str, tmp_path: Path) -> None:
    case = CASES[group]
    case.setup(tmp_path)
    args = [a.replace("{dir}", str(tmp_path)) for a in case.args]
    lines = [line.replace("{dir}", str(tmp_path)) for line in case.lines]
    with ThreadPoolExecutor(3) as pool:
        plain, debug, by_env = pool.map(
            lambda run: daggers(*run),
            [(args, tmp_path), (["--debug", *args], tmp_path), (args, tmp_path, True)],
        )
    assert (plain.returncode, plain.stdout, plain.stderr.splitlines()) == (2, "", lines)
    for traced in (debug, by_env):
        assert traced.returncode == 2 and traced.stdout == ""
        trace, _, error = traced.stderr.rpartition("\n\n")
        assert error.splitlines() == lines, traced.stderr
        assert trace.startswith("Traceback (most recent call last):\n"), traced.stderr
        assert any(line.startswith(f"{case.raised}: ") for line in trace.splitlines()), traced.stderr
