"""Token lifetimes and ends, on a real server and PostgreSQL: every token expires within the maximum (366
days), an unbounded one is refused with 422 naming the field, a team admin's controller token stops
when its maker is no longer the team's admin, and ``daggers logout`` revokes the token on the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from sqlalchemy import update

from job.control.client import save_login
from job.control.errors import ControlError
from job.control.models import ApiToken
from job.stack.ports import free_port
from tests.job.server.server_world import World, seeded_server

pytestmark = pytest.mark.integration

YEAR = 366 * 86400


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with seeded_server(postgres.dsn, tmp_path_factory.mktemp("server")) as world:
        yield world


def call(
    world: World, who: str | None, method: str, path: str, body: Any = None, token: str | None = None
) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else world.headers(who)
    return requests.request(method, world.api(path), headers=headers, json=body, timeout=30)


def daggers(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "job.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def cli_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGGERS_")}
    env.update(DAGGERS_CREDENTIALS=str(tmp_path / "cfg" / "credentials.json"), HOME=str(tmp_path))
    return env


# ---- lifetimes ------------------------------------------------------------------------------------------


def test_token_lifetimes_are_bounded_and_named_when_refused(world: World) -> None:
    r = call(world, "root", "POST", "/tokens", {"user": "alice", "expires_in_s": 1e300})
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "expires_in_s: 1e+300 is not a lifetime between 0 and 31622400 s (366 days)",
    )
    r = call(world, "root", "POST", "/tokens", {"user": "alice", "expires_in_s": YEAR + 1})
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "expires_in_s: 31622401.0 is not a lifetime between 0 and 31622400 s (366 days)",
    )
    r = requests.post(
        world.api("/tokens"),
        data=b'{"user": "alice", "expires_in_s": Infinity}',
        headers={**world.headers("root"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "expires_in_s: not a finite number (NaN, Infinity, or too large)",
    )
    # without a lifetime: the maximum; a personal one and a team admin's controller token alike
    for who, body in (("root", {"user": "alice"}), ("adam", {"cluster": "a-jkt"})):
        r = call(world, who, "POST", "/tokens", body)
        assert r.status_code == 201, r.text
        world.secrets.append(r.json()["token"])
        assert round(r.json()["expires_at"] - r.json()["created_at"]) == YEAR
    token_id = r.json()["token_id"]
    r = call(world, "root", "POST", f"/tokens/{token_id}/expire", {"at": 1e300})
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "at: 1e+300 is not a time within 366 days from now",
    )
    r = requests.post(
        world.api(f"/tokens/{token_id}/expire"),
        data=b'{"at": NaN}',
        headers={**world.headers("root"), "Content-Type": "application/json"},
        timeout=30,
    )
    assert (r.status_code, r.json()["error"]["message"]) == (
        422,
        "at: not a finite number (NaN, Infinity, or too large)",
    )


def test_the_maximum_is_configured_by_environment(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGGERS_MAX_TOKEN_DAYS", "7")
    with pytest.raises(ControlError) as refused:
        world.root.create_token("alice", expires_in_s=864000)
    assert (refused.value.message, refused.value.hint) == (
        "expires_in_s: 864000 is not a lifetime between 0 and 604800 s (7 days)",
        "the longest a token lives is $DAGGERS_MAX_TOKEN_DAYS days",
    )
    view, token = world.root.create_token("alice")
    world.secrets.append(token)
    assert round(view.expires_at - view.created_at) == 7 * 86400
    monkeypatch.setenv("DAGGERS_MAX_TOKEN_DAYS", "forever")
    with pytest.raises(ControlError) as refused:
        world.root.create_token("alice")
    assert (
        refused.value.message
        == "$DAGGERS_MAX_TOKEN_DAYS 'forever' is not a number of days between 0 and 3660"
    )


def test_token_list_shows_a_lifetime_no_calendar_holds(world: World, tmp_path: Path) -> None:
    view, token = world.root.create_token("bob", description="from an old registry")
    world.secrets.append(token)
    with world.registry.session() as s:  # a registry written before lifetimes were bounded
        s.execute(update(ApiToken).where(ApiToken.token_id == view.token_id).values(expires_at=1e300))
    env = {
        **cli_env(tmp_path),
        "DAGGERS_SERVER": world.url,
        "DAGGERS_TOKEN": world.tokens["root"],
        "COLUMNS": "200",
    }
    r = daggers("token", "list", "--for", "bob", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if view.token_id in line)
    assert row.split("│")[6].strip() == "never"
    r = daggers("token", "list", "--for", "bob", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [t["expires_at"] for t in json.loads(r.stdout) if t["token_id"] == view.token_id] == [1e300]


# ---- a team admin's controller tokens -------------------------------------------------------------------


def test_a_team_admins_controller_token_works_only_while_its_maker_is_the_teams_admin(world: World) -> None:
    world.root.add_user("tadmin")
    world.root.set_member("team-a", "tadmin", "admin")
    _view, personal = world.root.create_token("tadmin")
    world.secrets.append(personal)
    r = call(world, None, "POST", "/tokens", {"cluster": "a-jkt", "description": "gw-9"}, token=personal)
    assert r.status_code == 201, r.text
    made = r.json()
    world.secrets.append(made["token"])
    assert (made["created_by"], round(made["expires_at"] - made["created_at"])) == ("tadmin", YEAR)

    def settings() -> tuple[int, str]:
        r = call(world, None, "GET", "/controller/a-jkt/settings", token=made["token"])
        return r.status_code, r.json().get("cluster") or r.json()["error"]["message"]

    assert settings() == (200, "a-jkt")
    gone = (401, f"token {made['token_id']} was made by tadmin, who is no longer an admin of team team-a")
    world.root.set_member("team-a", "tadmin", "editor")
    assert settings() == gone
    r = call(world, None, "GET", "/controller/a-jkt/settings", token=made["token"])
    assert r.json()["error"]["hint"] == "a team admin makes a new one: daggers token create --cluster a-jkt"
    world.root.set_member("team-a", "tadmin", "admin")
    assert settings() == (200, "a-jkt")
    world.root.remove_member("team-a", "tadmin")
    assert settings() == gone
    # a superuser's controller token is not affected
    r = call(world, "ctl-a", "GET", "/controller/a-jkt/settings")
    assert (r.status_code, r.json()["cluster"]) == (200, "a-jkt")


# ---- logout -----------------------------------------------------------------------------------------------


def test_logout_revokes_the_token_on_the_server(world: World, tmp_path: Path) -> None:
    view, token = world.root.create_token("vera", description="vera's laptop")
    world.secrets.append(token)
    env = cli_env(tmp_path)
    r = daggers("login", "--server", world.url, "--token-stdin", env=env, stdin=token + "\n")
    assert r.returncode == 0, r.stdout + r.stderr
    # a user may revoke their own token, and no one else's
    r = call(world, None, "POST", f"/tokens/{world.root.tokens('alice')[0].token_id}/revoke", token=token)
    assert r.status_code == 403
    r = daggers("logout", env=env)
    assert (r.returncode, r.stdout, r.stderr) == (0, "signed out; the token is revoked on the server\n", "")
    assert not (tmp_path / "cfg" / "credentials.json").exists()
    r = call(world, None, "GET", "/whoami", token=token)
    assert (r.status_code, r.json()["error"]["message"]) == (401, f"token {view.token_id} was revoked")
    assert world.root.tokens("vera")[-1].revoked_at is not None


def test_logout_with_the_server_unreachable_says_so_and_forgets_the_token(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _view, token = world.root.create_token("vera")
    world.secrets.append(token)
    env = cli_env(tmp_path)
    monkeypatch.setenv("DAGGERS_CREDENTIALS", env["DAGGERS_CREDENTIALS"])
    gone = f"http://127.0.0.1:{free_port()}"
    path = save_login(gone, token)
    r = daggers("logout", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout) == {
        "ok": True,
        "signed_out": True,
        "revoked": False,
        "problem": f"the token was not revoked on its server: the server {gone} cannot "
        "be reached: ConnectionError",
    }
    assert not path.exists()
    save_login(gone, token)
    r = daggers("logout", env=env)
    assert (r.returncode, r.stdout) == (0, "signed out\n")
    assert r.stderr == (
        f"Warning: the token was not revoked on its server: the server {gone} cannot be reached: "
        "ConnectionError\n"
    )
