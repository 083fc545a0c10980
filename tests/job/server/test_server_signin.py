"""Signing in to a real server on PostgreSQL: failed sign-ins are limited per address and per token id but
never lock out a valid credential, and every refusal (429 too) is audited; a refused preview starts no
Spark; plain HTTP off this machine gets a warning and a TLS key others can read is refused."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter
from sqlalchemy import select

from job.control.models import AuditEntry
from job.control.registry import Registry
from job.stack.ports import free_port
from tests.helpers import wait_until
from tests.job.control.control_seed import bookings_spec
from tests.job.server.server_world import World, running_server, seeded_server

pytestmark = pytest.mark.integration

MAX_FAILED = 3


@pytest.fixture(scope="module")
def world(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with seeded_server(
        postgres.dsn, tmp_path_factory.mktemp("server"), "--max-failed-signins", str(MAX_FAILED)
    ) as world:
        yield world


def from_address(address: str) -> requests.Session:
    """Return a session whose connections come from ``address`` (127.0.0.0/8 is all this machine's)."""

    class From(HTTPAdapter):
        def init_poolmanager(self, *a: Any, **kw: Any) -> None:
            kw["source_address"] = (address, 0)
            super().init_poolmanager(*a, **kw)

    s = requests.Session()
    s.mount("http://", From())
    return s


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def refusals_since(registry: Registry, last_id: int) -> list[tuple[str | None, str | None, str]]:
    """Return (credential, source, reason) of the refused sign-ins audited after entry ``last_id``."""
    with registry.session() as s:
        rows = s.scalars(
            select(AuditEntry)
            .where(AuditEntry.id > last_id, AuditEntry.user == "(not signed in)")
            .order_by(AuditEntry.id)
        ).all()
        return [(a.credential, a.source, a.details["reason"]) for a in rows]


def last_audit_id(registry: Registry) -> int:
    with registry.session() as s:
        return s.scalar(select(AuditEntry.id).order_by(AuditEntry.id.desc()).limit(1)) or 0


# ---- sign-in limits -------------------------------------------------------------------------------------


def test_after_an_address_fails_too_often_its_valid_tokens_are_still_served(world: World) -> None:
    s = from_address("127.0.0.2")
    mark = last_audit_id(world.registry)
    bad = bearer("dgr_000000000000_wrong")
    codes = [s.get(world.api("/whoami"), headers=bad, timeout=30).status_code for _ in range(MAX_FAILED + 1)]
    assert codes == [401, 401, 401, 429]
    limited = s.get(world.api("/whoami"), headers=bad, timeout=30)
    assert limited.status_code == 429
    wait = int(limited.headers["Retry-After"])
    assert 1 <= wait <= 60
    assert limited.json() == {
        "error": {
            "title": "Too many failed sign-ins",
            "message": "too many failed sign-ins from 127.0.0.2",
            "hint": f"wait {wait} s (a valid credential is served meanwhile)",
        }
    }
    # a superuser, a viewer and a controller behind that same address are served
    r = s.get(world.api("/whoami"), headers=bearer(world.tokens["root"]), timeout=30)
    assert (r.status_code, r.json()["user"], r.json()["superuser"]) == (200, "root", True)
    r = s.get(world.api("/whoami"), headers=bearer(world.tokens["vera"]), timeout=30)
    assert (r.status_code, r.json()["user"]) == (200, "vera")
    r = s.get(world.api("/controller/a-jkt/settings"), headers=bearer(world.tokens["ctl-a"]), timeout=30)
    assert (r.status_code, r.json()["cluster"]) == (200, "a-jkt")
    # every refusal is audited, the 429s too; the served requests are not refusals
    assert refusals_since(world.registry, mark) == [
        *[("token:000000000000", "127.0.0.2", "token 000000000000 is not valid")] * MAX_FAILED,
        *[("token:000000000000", "127.0.0.2", "too many failed sign-ins from 127.0.0.2")] * 2,
    ]


def test_a_token_id_that_fails_too_often_is_limited_from_every_address_but_its_valid_secret_is_served(
    world: World,
) -> None:
    token_id = world.root.tokens("bob")[0].token_id
    wrong = bearer(f"dgr_{token_id}_not-the-secret")
    first, second = from_address("127.0.0.3"), from_address("127.0.0.4")
    mark = last_audit_id(world.registry)
    assert [
        first.get(world.api("/whoami"), headers=wrong, timeout=30).status_code for _ in range(MAX_FAILED)
    ] == [401] * MAX_FAILED
    r = second.get(
        world.api("/whoami"), headers=wrong, timeout=30
    )  # another address: the token id is limited
    assert (r.status_code, r.json()["error"]["message"]) == (
        429,
        f"too many failed sign-ins with token {token_id}",
    )
    assert math.isclose(int(r.headers["Retry-After"]), 60, abs_tol=60)
    r = second.get(world.api("/whoami"), headers=bearer(world.tokens["bob"]), timeout=30)
    assert (r.status_code, r.json()["user"]) == (200, "bob")
    # the second address has no failures of its own: another bad token from it is a plain 401
    r = second.get(world.api("/whoami"), headers=bearer("dgr_111111111111_wrong"), timeout=30)
    assert (r.status_code, r.json()["error"]["message"]) == (401, "token 111111111111 is not valid")
    assert refusals_since(world.registry, mark) == [
        *[(f"token:{token_id}", "127.0.0.3", f"token {token_id} is not valid")] * MAX_FAILED,
        (f"token:{token_id}", "127.0.0.4", f"too many failed sign-ins with token {token_id}"),
        ("token:111111111111", "127.0.0.4", "token 111111111111 is not valid"),
    ]


def test_the_limiter_forgets_failures_after_its_window_and_holds_at_most_max_keys() -> None:
    from job.server.auth import SigninLimiter

    now = [1000.0]
    limiter = SigninLimiter(2, 60.0, max_keys=3, clock=lambda: now[0])
    limiter.failed(["address:a", "token:t"])
    now[0] += 30
    limiter.failed(["address:a"])
    assert limiter.retry_after(["address:b", "token:t"]) is None
    assert limiter.retry_after(["token:t", "address:a"]) == ("address:a", 30.0)
    now[0] += 30  # the first failure is a window old: address:a is under its limit again
    assert limiter.retry_after(["address:a"]) is None
    for key in ("k1", "k2", "k3", "k4"):
        limiter.failed([key, key])
    assert sorted(limiter._failures) == ["k2", "k3", "k4"]  # the key failed longest ago is forgotten first
    assert limiter.retry_after(["k1"]) is None and limiter.retry_after(["k4"]) == ("k4", 60.0)


# ---- the role check before Spark ------------------------------------------------------------------------


def _server_pid(url: str) -> int:
    """Return the pid of the ``daggers server`` child of this process that listens on ``url``'s port."""
    port = url.rsplit(":", 1)[1]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"server" in argv and port.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no server process on port {port}")


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Return (pid, command name) of every process below ``pid``."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 1 :].split()
            children.setdefault(int(rest[1]), []).append((int(entry.name), name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def test_a_refused_preview_starts_no_spark(world: World) -> None:
    b = world.root.create("b-jkt", bookings_spec("bp1"))
    cases = [
        (
            "bob",
            "POST",
            "/preview",
            {"cluster": "a-jkt", "spec": bookings_spec("x")},
            404,
            "no cluster 'a-jkt' in your teams",
        ),
        (
            "vera",
            "POST",
            "/preview",
            {"cluster": "b-jkt", "spec": bookings_spec("x")},
            404,
            "no cluster 'b-jkt' in your teams",
        ),
        (
            "vera",
            "POST",
            f"/daggers/team-b/{b.name}/preview",
            {},
            404,
            f"no dagger 'team-b/{b.name}' in your teams",
        ),
        (
            "ctl-a",
            "POST",
            "/preview",
            {"cluster": "a-jkt", "spec": bookings_spec("x")},
            403,
            "a controller credential (cluster a-jkt) may not POST /api/v1/preview",
        ),
    ]
    for who, method, path, body, code, message in cases:
        r = requests.request(method, world.api(path), headers=world.headers(who), json=body, timeout=120)
        assert (r.status_code, r.json()["error"]["message"]) == (code, message), (who, path)
    assert [name for _pid, name in _descendants(_server_pid(world.url))] == []


# ---- plain HTTP and TLS keys ----------------------------------------------------------------------------


def _env(tmp_path: Path, registry_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGGERS_")}
    env.update(DAGGERS_CREDENTIALS=str(tmp_path / "cfg" / "credentials.json"), HOME=str(tmp_path))
    if registry_url:
        env["DAGGERS_REGISTRY"] = registry_url
    return env


def daggers(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "job.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


CLEAR = "tokens travel in clear"


def test_plain_http_off_this_machine_is_warned_about_by_the_server_and_by_login(
    world: World, tmp_path: Path
) -> None:
    assert CLEAR not in world.log.read_text()  # 127.0.0.1: no warning
    log = tmp_path / "open.log"
    with running_server(world.registry.url, log, "--host", "0.0.0.0") as base:
        assert (
            f"Warning: the server listens on 0.0.0.0 over plain HTTP: {CLEAR}. Give it --cert and --key, "
            "or put it behind a TLS proxy and listen on 127.0.0.1"
        ) in log.read_text()
        port = base.rsplit(":", 1)[1]
        env = _env(tmp_path)
        r = daggers(
            "login",
            "--server",
            f"http://0.0.0.0:{port}",
            "--token-stdin",
            env=env,
            stdin=world.tokens["alice"] + "\n",
        )
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stderr == (
            f"Warning: http://0.0.0.0:{port} is plain HTTP: the token travels in clear. Use "
            "https:// (a server with --cert and --key)\n"
        )
        r = daggers("login", "--server", base, "--token-stdin", env=env, stdin=world.tokens["alice"] + "\n")
        assert (r.returncode, r.stderr) == (0, ""), r.stdout + r.stderr  # 127.0.0.1: no warning


def test_a_tls_key_others_can_read_is_refused_at_start(world: World, tmp_path: Path) -> None:
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    key = tmp_path / "key.pem"
    cert.private_key_pem.write_to_path(str(key))
    key.chmod(0o640)
    log = tmp_path / "server.log"
    env = _env(tmp_path, world.registry.url)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "job.cli",
                "server",
                "--port",
                str(free_port()),
                "--cert",
                str(tmp_path / "cert.pem"),
                "--key",
                str(key),
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_until("the server to refuse its key", lambda: proc.poll() is not None, 60, every_s=0.2, log=log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 2
    assert log.read_text().splitlines() == [
        f"Control plane: the TLS key {key} can be read by other users (mode 640): not using it",
        f"hint: chmod 600 {key}",
    ]
