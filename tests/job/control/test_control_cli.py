"""The scriptable subcommands (``--json``), on SQLite and PostgreSQL registries; and, as a separate
process, team B being refused team A's dagger on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from job.cli.control import register
from job.control import Registry
from tests.job.control.control_seed import bookings_spec, seed

REPO = Path(__file__).resolve().parents[3]


def cli() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def run(args: list[str], *, code: int = 0, env: dict[str, str] | None = None) -> Any:
    result = CliRunner().invoke(cli(), args, env=env)
    assert result.exit_code == code, (args, result.output)
    return json.loads(result.output) if "--json" in args else result.output


def test_the_whole_workflow_as_scripts(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = registry.url
    r = ["--registry", url, "--json"]
    assert run(["registry", "init", "--admin", "root", *r])["admin"] == "root"
    for args in (
        ["user", "add", "alice"],
        ["user", "add", "bob"],
        ["team", "add", "team-a"],
        ["team", "add", "team-b"],
        ["team", "member", "team-a", "alice", "--role", "editor"],
        ["team", "member", "team-b", "bob", "--role", "editor"],
        ["dc", "add", "jkt"],
        [
            "cluster",
            "add",
            "a-jkt",
            "--team",
            "team-a",
            "--dc",
            "jkt",
            "--master",
            "local[2]",
            "--kafka",
            "127.0.0.1:9",
            "--influx",
            "http://127.0.0.1:9",
        ],
    ):
        assert run([*args, "--user", "root", *r])["ok"] is True
    env = {"DAGGERS_USER": "alice"}
    v1 = tmp_path / "v1.yaml"
    v1.write_text(bookings_spec("cli-counts"))
    created = run(["dagger", "create", str(v1), "--cluster", "a-jkt", *r], env=env)
    assert created["dagger"]["ref"] == "team-a/cli-counts" and created["dagger"]["actual_state"] == "created"
    listed = run(["dagger", "list", *r], env=env)
    assert [d["ref"] for d in listed] == ["team-a/cli-counts"]
    assert run(["dagger", "validate", str(v1), "--cluster", "a-jkt", *r], env=env)["ok"] is True
    v2 = tmp_path / "v2.yaml"
    v2.write_text(bookings_spec("cli-counts").replace("trigger_interval_s: 1", "trigger_interval_s: 3"))
    edited = run(["dagger", "edit", "cli-counts", str(v2), "--expect-version", "1", *r], env=env)
    assert (edited["version"], edited["checkpoint_epoch"], edited["compatibility"]["resume"]) == (2, 1, True)
    v3 = tmp_path / "v3.yaml"
    v3.write_text(bookings_spec("cli-counts").replace("count(1)", "sum(fare_idr)"))
    refused = run(["dagger", "edit", "cli-counts", str(v3), *r], code=2, env=env)
    assert (
        refused["error"]["title"] == "Conflict"
        and "cannot resume from the checkpoint" in refused["error"]["message"]
    )
    assert "--fresh-start" in refused["error"]["hint"]
    fresh = run(["dagger", "edit", "cli-counts", str(v3), "--fresh-start", *r], env=env)
    assert (fresh["version"], fresh["checkpoint_epoch"], fresh["compatibility"]["resume"]) == (3, 2, False)
    human = run(
        ["dagger", "rollback", "cli-counts", "--to", "1", "--fresh-start", "--registry", url], env=env
    )
    assert "version 4" in human and "starts a NEW checkpoint" in human
    history = run(["dagger", "history", "cli-counts", *r], env=env)
    assert [(v["version"], v["checkpoint_epoch"], v["created_by"]) for v in history] == [
        (1, 1, "alice"),
        (2, 1, "alice"),
        (3, 2, "alice"),
        (4, 3, "alice"),
    ]
    diff = run(["dagger", "diff", "cli-counts", "--from", "1", "--to", "2", *r], env=env)["diff"]
    assert "-trigger_interval_s: 1\n+trigger_interval_s: 3\n" in diff
    assert run(["dagger", "spec", "cli-counts", "--version", "2", *r], env=env)["spec_text"] == v2.read_text()
    for verb, desired in (("deploy", "running"), ("stop", "stopped"), ("restart", "running")):
        assert run(["dagger", verb, "cli-counts", *r], env=env)["dagger"]["desired_state"] == desired
    published = run(["dagger", "publish", "cli-counts", "--topic", "counts-out", *r], env=env)
    assert published["version"] == 5 and published["compatibility"]["resume"] is True
    assert run(["whoami", *r], env=env) == {
        "user": "alice",
        "superuser": False,
        "teams": {"team-a": "editor"},
    }
    audit = run(["audit", "--target", "cli-counts", *r], env=env)
    assert [a["action"] for a in reversed(audit)] == [
        "create",
        "edit",
        "edit",
        "rollback",
        "deploy",
        "stop",
        "restart",
        "publish",
    ]
    assert all(a["user"] == "alice" and a["at"] > 0 for a in audit)
    health = run(["cluster", "health", "a-jkt", *r], env=env)
    assert health["recorded"] is False and health["daggers"] == {"running": 0, "total": 1}
    # without --user (and no server), the OS user acts: one the registry does not know can do nothing
    monkeypatch.setattr("getpass.getuser", lambda: "stranger")
    nobody = run(["dagger", "list", *r], code=2)
    assert nobody["error"]["message"] == "unknown user 'stranger' in the registry"
    bob = run(["dagger", "stop", "team-a/cli-counts", *r], code=2, env={"DAGGERS_USER": "bob"})
    assert bob["error"] == {
        "title": "Not found",
        "message": "no dagger 'team-a/cli-counts' in your teams",
        "hint": None,
    }


def test_team_b_is_refused_on_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = Registry(url)
    seed(registry)
    from job.control import ControlPlane

    ControlPlane(registry, "alice").create("a-jkt", bookings_spec("private"), deploy=True)
    registry.close()
    spec = tmp_path / "mine.yaml"
    spec.write_text(bookings_spec("private").replace("trigger_interval_s: 1", "trigger_interval_s: 7"))

    def daggers(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "job.cli", *args, "--registry", url, "--user", "bob"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )

    for args in (
        ["dagger", "show", "team-a/private"],
        ["dagger", "stop", "team-a/private"],
        ["dagger", "preview", "team-a/private"],
        ["dagger", "edit", "private", str(spec)],
        ["dagger", "history", "private"],
        ["dagger", "delete", "team-a/private"],
    ):
        done = daggers(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Not found: no dagger" in done.stderr and "in your teams" in done.stderr
    listed = daggers("dagger", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    clusters = daggers("cluster", "list", "--json")
    assert [c["name"] for c in json.loads(clusters.stdout)] == ["b-jkt"]
    registry = Registry(url)
    from job.control import ControlPlane

    view = ControlPlane(registry, "alice").dagger("private")
    assert (view.current_version, view.desired_state) == (1, "running")
    registry.close()
