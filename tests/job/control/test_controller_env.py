"""A dagger's process never gets its controller's credentials: not in its environment (its team's
``udf_file`` runs there) and not as a value of its spec's ``${NAME}``. Its team's secrets come from the
controller host's environment or from files in ``$DAGGERS_SECRETS_DIR``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from job.control import ControlPlane, Registry
from job.control.controller import Controller
from job.control.specs import CONTROL_SECRETS, dagger_env
from tests.job.control.control_seed import bookings_spec, seed
from tests.job.control.test_controller import fake, settings, until


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    reg = Registry(f"sqlite:///{tmp_path / 'registry.db'}")
    yield reg
    reg.close()


def test_dagger_env_drops_the_control_planes_credentials_and_reads_the_secrets_folder(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "PG_PASSWORD").write_text("from-file\n")
    (folder / "SET_TOO").write_text("file loses")
    (folder / "DAGGERS_TOKEN").write_text("never")
    (folder / "not-a-name").write_text("ignored")
    environ = {
        "DAGGERS_REGISTRY": "postgresql://ops:pw@h/db",
        "DAGGERS_TOKEN": "dgr_x",
        "PGPASSWORD": "pw",
        "DAGGERS_CREDENTIALS": "/root/.daggers/credentials",
        "PGPASSFILE": "/root/.pgpass",
        "SET_TOO": "env wins",
        "DAGGERS_SECRETS_DIR": str(folder),
        "HOME": "/root",
    }
    env = dagger_env(environ, {"DAGGERS_BOOTSTRAP": "b:1"})
    assert env == {
        "SET_TOO": "env wins",
        "DAGGERS_SECRETS_DIR": str(folder),
        "HOME": "/root",
        "PG_PASSWORD": "from-file",
        "DAGGERS_BOOTSTRAP": "b:1",
    }
    assert not set(CONTROL_SECRETS) & set(env)


def test_a_controller_started_dagger_sees_none_of_the_controllers_credentials(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "TEAM_SECRET").write_text("s3")
    for name in CONTROL_SECRETS:
        monkeypatch.setenv(name, f"controller-{name}")
    monkeypatch.setenv("DAGGERS_SECRETS_DIR", str(folder))
    seed(registry, kafka="127.0.0.1:19092")
    alice = ControlPlane(registry, "alice")
    alice.create("a-jkt", bookings_spec("envy"), deploy=True)
    ctl = Controller(registry, "a-jkt", tmp_path / "state", settings=settings(), command=fake({}))
    ctl.claim()
    try:
        running = until(ctl, alice, "envy", lambda d: d.actual_state == "running")
        env = json.loads((Path(running.checkpoint) / "env.json").read_text())
        assert not set(CONTROL_SECRETS) & set(env)
        assert not any(v.startswith("controller-") for v in env.values())
        assert (env["TEAM_SECRET"], env["DAGGERS_BOOTSTRAP"]) == ("s3", "127.0.0.1:19092")
    finally:
        alice.stop("envy")
        until(ctl, alice, "envy", lambda d: d.actual_state == "stopped")
        ctl.release()
