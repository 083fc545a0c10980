"""A real ``daggers server`` process on an OS port over a seeded registry, for the server tests.

The registry is the one of tests/job/control/control_seed.py (team-a: adam admin, alice editor, vera
viewer; team-b: bob editor; root superuser; clusters a-jkt, a-sgp, b-jkt). Every user gets a personal
token, and clusters a-jkt and b-jkt a controller token.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import requests

from job.control import ControlPlane, Registry
from job.stack.ports import free_port
from tests.helpers import wait_until
from tests.job.control.control_seed import seed

USERS = ("root", "adam", "alice", "vera", "bob")


@dataclass
class World:
    """A running server: ``url`` (…/api/v1 is the API), the registry, root's embedded plane, the tokens by
    user or ``ctl-a``/``ctl-b``, the server's log file, and every secret handed out (to scan for)."""

    url: str
    registry: Registry
    root: ControlPlane
    tokens: dict[str, str]
    log: Path
    secrets: list[str] = field(default_factory=list)

    def api(self, path: str) -> str:
        return f"{self.url}/api/v1{path}"

    def headers(self, who: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}


def seed_tokens(registry: Registry) -> tuple[ControlPlane, dict[str, str]]:
    """Seed ``registry``; return root's plane and a token per user and per controller (ctl-a, ctl-b)."""
    root = seed(registry)
    tokens = {u: root.create_token(u, description=f"{u}'s")[1] for u in USERS}
    tokens["ctl-a"] = root.create_token(cluster="a-jkt")[1]
    tokens["ctl-b"] = root.create_token(cluster="b-jkt")[1]
    return root, tokens


@contextmanager
def running_server(
    registry_url: str,
    log: Path,
    *args: str,
    scheme: str = "http",
    verify: bool | str = True,
    code: Path | None = None,
) -> Iterator[str]:
    """Run ``daggers server`` on a free port (the registry URL by environment); yield its base URL; stop it.
    ``code``: a folder holding another version's ``job`` package, run instead of this checkout's."""
    env = {**os.environ, "DAGGERS_REGISTRY": registry_url, "PYTHONUNBUFFERED": "1"}
    if code is not None:
        env["PYTHONPATH"] = str(code)

    def start() -> tuple[subprocess.Popen, str]:
        port = free_port()
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "job.cli", "server", "--port", str(port), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=code,
            )
        return proc, f"{scheme}://127.0.0.1:{port}"

    def up_or_exited(proc: subprocess.Popen, url: str) -> bool:
        if proc.poll() is not None:
            return True
        try:
            return requests.get(f"{url}/api/v1/health", timeout=2, verify=verify).ok
        except requests.RequestException:
            return False

    for _ in range(3):  # a port free when chosen may be taken by another program before the server binds it
        before = log.stat().st_size if log.exists() else 0
        proc, url = start()
        wait_until("the server to start", partial(up_or_exited, proc, url), 60, every_s=0.2, log=log)
        if proc.poll() is None or b"address already in use" not in log.read_bytes()[before:]:
            break
    try:
        wait_until("the server to start", lambda: up_or_exited(proc, url), 1, proc=proc, log=log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextmanager
def seeded_server(postgres_dsn: str, folder: Path, *args: str) -> Iterator[World]:
    """A fresh PostgreSQL registry seeded with the users' and controllers' tokens, and ``daggers server ARGS``
    on it logging into ``folder``: the World of a module of server tests; the registry closed at the end."""
    from tests.job.control.control_seed import postgres_url

    url = postgres_url(postgres_dsn)
    registry = Registry(url)
    try:
        root, tokens = seed_tokens(registry)
        log = folder / "server.log"
        with running_server(url, log, *args) as base:
            yield World(base, registry, root, tokens, log, secrets=list(tokens.values()))
    finally:
        registry.close()
