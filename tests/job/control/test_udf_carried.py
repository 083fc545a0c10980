"""A dagger's ``udf_file``, named relative to its spec file (as docs/functions.md says), travels with the spec:
``daggers dagger create/edit`` send its content (``udf_file_base64``) and the dagger's controller writes it into
the dagger's folder and runs that copy. A deployed dagger crashed with "udf_file: no file at
…/daggers/<n>/boom.py" after create and ``sql check`` said OK. A spec is untrusted data: the carried file stays
inside the dagger's folder and within its size bound, and a relative ``udf_file`` whose content did not come
with the spec is refused when it is created, naming the field.

The real CLI and control plane on a SQLite registry, a real controller (a real process stands in for the
dagger, fake_dagger.py), and the loader every dagger process uses (job.spec.load_spec, then
job.functions.user.load_user_functions) on the spec file the controller wrote."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.models import DaggerVersion
from job.control.specs import cluster_env, parse_text
from job.control.udf_carry import with_local_udf
from job.errors import SpecError
from job.functions.user import load_user_functions
from job.spec import load_spec
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_control_cli import cli
from tests.job.control.test_controller import fake, settings, until

BOOM = """from job.functions.user import dagger_function


@dagger_function(returns="double")
def Boom(fare):
    return None if fare is None else fare * {factor}
"""
CARRIED_FROM_A_CLIENT = "udf_file_base64: " + base64.b64encode(BOOM.format(factor=2).encode()).decode() + "\n"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    seed(reg)
    yield reg
    reg.close()


def _cli(registry: Registry, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(
        cli(), [*args, "--registry", registry.url], env={"DAGGERS_USER": "alice", "COLUMNS": "200"}
    )
    assert result.exit_code == code, result.output
    return str(result.output)


def _spec_folder(tmp_path: Path, factor: int, name: str = "udfs") -> Path:
    """A user's folder (not the working one) with the spec and the udf_file beside it."""
    folder = tmp_path / "team-repo"
    folder.mkdir(exist_ok=True)
    (folder / "boom.py").write_text(BOOM.format(factor=factor))
    (folder / "spec.yaml").write_text(
        bookings_spec(name) + "# the functions beside this file\nudf_file: boom.py\n"
    )
    return folder / "spec.yaml"


def _ran(view: Any) -> dict[str, Any]:
    """Load the spec file the controller wrote for the running version, as a dagger process does, and its
    functions; return Boom's value for 10 and where its file is."""
    run_spec = load_spec(Path(view.checkpoint).parent / f"v{view.running_version}.yaml")
    assert run_spec.udf_file is not None
    boom = load_user_functions(run_spec.udf_file)["boom"]  # it crashed here: "udf_file: no file at …"
    assert run_spec.udf_file_base64 is None  # the controller's copy names the file it wrote
    file = Path(run_spec.udf_file)
    return {"boom(10)": boom.fn(10.0), "file": file, "mode": oct(file.stat().st_mode & 0o777)}


def test_the_udf_file_beside_the_spec_runs_where_the_controller_runs_it(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in cluster_env("127.0.0.1:9", "http://127.0.0.1:9").items():  # as a dagger's process has
        monkeypatch.setenv(name, value)
    spec = _spec_folder(tmp_path, factor=2)
    assert "OK" in _cli(registry, "dagger", "validate", str(spec), "--cluster", "a-jkt")
    _cli(registry, "dagger", "create", str(spec), "--cluster", "a-jkt", "--deploy")
    alice = ControlPlane(registry, "alice")
    ctl = Controller(registry, "a-jkt", tmp_path / "controller", settings=settings(), command=fake({}))
    ctl.claim()
    try:
        v1 = until(ctl, alice, "udfs", lambda d: d.actual_state == "running")
        folder = Path(v1.checkpoint).parent
        assert _ran(v1) == {"boom(10)": 20.0, "file": folder / "v1-udf" / "boom.py", "mode": "0o600"}
        # the registry keeps the text as written (its comment too), the file's content added
        text = alice.version("udfs", 1).spec_text
        assert "# the functions beside this file\nudf_file: boom.py\nudf_file_base64: |\n" in text

        # a new version of the file beside the spec is the next version's
        spec = _spec_folder(tmp_path, factor=3)
        assert (
            "note: the functions of udf_file changed: open windows keep what they counted under the old ones"
            in (_cli(registry, "dagger", "edit", "udfs", str(spec)))
        )
        v2 = until(ctl, alice, "udfs", lambda d: d.running_version == 2 and d.actual_state == "running")
        assert _ran(v2) == {"boom(10)": 30.0, "file": folder / "v2-udf" / "boom.py", "mode": "0o600"}
        assert _ran(v1)["boom(10)"] == 20.0  # the running version's file is its own
    finally:
        alice.stop("udfs")
        until(ctl, alice, "udfs", lambda d: d.actual_state == "stopped")
        ctl.release()


def test_create_refuses_a_udf_file_that_is_not_beside_the_spec(registry: Registry, tmp_path: Path) -> None:
    spec = _spec_folder(tmp_path, factor=2)
    (spec.parent / "boom.py").unlink()
    out = _cli(registry, "dagger", "create", str(spec), "--cluster", "a-jkt", code=2)
    assert f"Invalid dagger spec: udf_file: no file at {spec.parent / 'boom.py'}" in " ".join(out.split()), (
        out
    )
    assert ControlPlane(registry, "alice").daggers() == []


def test_a_relative_udf_file_whose_content_did_not_come_is_refused_naming_the_field(
    registry: Registry,
) -> None:
    """A client of the server's API that sends only the spec's text: the controller would find no file."""
    server = ControlPlane(registry, "alice", serves_clients=True)
    text = bookings_spec("udfs") + "udf_file: boom.py\n"
    v = server.validate("a-jkt", text)
    assert (v.ok, v.title, v.message) == (
        False,
        "Invalid dagger spec",
        "udf_file: 'boom.py' is relative to the spec file, but its content did not come with the spec "
        "(udf_file_base64): the dagger's controller would find no such file",
    )
    with pytest.raises(SpecError) as info:
        server.create("a-jkt", text)
    assert info.value.message == v.message and "daggers dagger create" in (info.value.hint or "")
    # an absolute one names a file on the controller's host, as before; a carried one is taken
    assert server.validate("a-jkt", bookings_spec("udfs") + "udf_file: /opt/team/boom.py\n").ok
    assert server.validate("a-jkt", text + CARRIED_FROM_A_CLIENT).ok


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "udf_file: ../../outside.py\n" + CARRIED_FROM_A_CLIENT,
            "spec:24: udf_file: udf_file '../../outside.py' must name a .py file relative to the spec "
            "file's folder (no '..') to be carried with the spec",
        ),
        (
            "udf_file: /etc/cron.daily/boom.py\n" + CARRIED_FROM_A_CLIENT,
            "spec:24: udf_file: udf_file '/etc/cron.daily/boom.py' must name a .py file relative to the "
            "spec file's folder (no '..') to be carried with the spec",
        ),
        (
            "udf_file: dagger.log\n" + CARRIED_FROM_A_CLIENT,
            "spec:24: udf_file: udf_file 'dagger.log' must name a .py file relative to the spec file's "
            "folder (no '..') to be carried with the spec",
        ),
        (
            "udf_file: " + "a" * 300 + ".py\n" + CARRIED_FROM_A_CLIENT,  # killed the controller writing it
            "spec:24: udf_file: udf_file is 303 characters in 1 part: a carried file's name is at most "
            "120 characters in at most 4 parts",
        ),
        (
            "udf_file: " + "d/" * 30 + "x.py\n" + CARRIED_FROM_A_CLIENT,
            "spec:24: udf_file: udf_file is 64 characters in 31 parts: a carried file's name is at most "
            "120 characters in at most 4 parts",
        ),
        (CARRIED_FROM_A_CLIENT, "spec:24: udf_file_base64: the spec names no udf_file for it to carry"),
        (
            "udf_file: boom.py\nudf_file_base64: 'not base64!'\n",
            "spec:25: udf_file_base64: is not base64 (the content of udf_file, which daggers dagger create adds)",
        ),
        (
            "udf_file: boom.py\nudf_file_base64: " + base64.b64encode(b"#" * 150_000).decode() + "\n",
            "spec:25: udf_file_base64: the file it carries is larger than 128 KiB",
        ),
    ],
)
def test_a_carried_file_a_client_sends_is_checked_as_data(
    registry: Registry, extra: str, message: str
) -> None:
    v = ControlPlane(registry, "alice", serves_clients=True).validate("a-jkt", bookings_spec("udfs") + extra)
    assert (v.ok, v.message) == (False, message)


def test_the_controller_writes_no_carried_file_outside_the_daggers_folder(
    registry: Registry, tmp_path: Path
) -> None:
    """A registry's text that escaped the checks (written into the database): the controller checks again."""
    alice = ControlPlane(registry, "alice")
    alice.create("a-jkt", bookings_spec("udfs") + "udf_file: boom.py\n" + CARRIED_FROM_A_CLIENT, deploy=True)
    with registry.session() as s:
        version = s.scalars(select(DaggerVersion)).one()
        version.spec_text = version.spec_text.replace("udf_file: boom.py", "udf_file: ../../../outside.py")
    ctl = Controller(registry, "a-jkt", tmp_path / "controller", settings=settings(), command=fake({}))
    ctl.claim()
    try:
        failed = until(ctl, alice, "udfs", lambda d: d.actual_state == "failed")
        assert failed.last_error == (
            "Invalid dagger spec: udf_file_base64: udf_file '../../../outside.py' must name a .py file relative to the "
            "spec file's folder (no '..') to be carried with the spec"
        )
        assert not list(tmp_path.rglob("outside.py"))
    finally:
        ctl.release()


def test_a_preview_in_the_users_own_process_runs_the_carried_file() -> None:
    """The CLI on a registry and the console run a preview themselves: the carried file is written for it."""
    text = bookings_spec("udfs") + "udf_file: boom.py\n" + CARRIED_FROM_A_CLIENT
    spec = with_local_udf(parse_text(text, cluster_env("127.0.0.1:9", "http://127.0.0.1:9")))
    assert (
        spec.udf_file is not None and spec.udf_file_base64 is None and Path(spec.udf_file).name == "boom.py"
    )
    assert load_user_functions(spec.udf_file)["boom"].fn(10.0) == 20.0
