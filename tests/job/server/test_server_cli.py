"""The CLI through a real server: ``daggers login`` keeps the token in a 0600 file, commands act as the
token's user, ``--user`` is refused, and HTTPS with a certificate the test makes (trustme)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from job.control import Registry
from tests.job.control.control_seed import bookings_spec, postgres_url
from tests.job.server.server_world import running_server, seed_tokens

pytestmark = pytest.mark.integration


def daggers(*args: str, env: dict[str, str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "job.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def tls_server(
    postgres: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path, dict[str, str], Registry]]:
    import trustme

    folder = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    (folder / "server.pem").chmod(0o600)  # the server refuses a key others can read
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    _root, tokens = seed_tokens(registry)
    registry.close()
    with running_server(
        url,
        folder / "server.log",
        "--cert",
        str(folder / "server.pem"),
        "--key",
        str(folder / "server.pem"),
        scheme="https",
        verify=str(folder / "ca.pem"),
    ) as base:
        yield base, folder / "ca.pem", tokens, Registry(url)


def test_login_then_commands_act_as_the_tokens_user_over_tls(tls_server: Any, tmp_path: Path) -> None:
    base, ca, tokens, registry = tls_server
    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGGERS_")}
    env["DAGGERS_CREDENTIALS"] = str(tmp_path / "cfg" / "credentials.json")
    env["HOME"] = str(tmp_path)
    r = daggers(
        "login", "--server", base, "--ca", str(ca), "--token-stdin", env=env, stdin=tokens["alice"] + "\n"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"signed in to {base} as alice")
    creds = tmp_path / "cfg" / "credentials.json"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    assert json.loads(creds.read_text())["token"] == tokens["alice"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(bookings_spec("via-server"))
    r = daggers("dagger", "create", str(spec), "--cluster", "a-jkt", "--json", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["dagger"]["created_by"] == "alice"
    r = daggers("dagger", "list", "--json", env=env)
    assert [d["ref"] for d in json.loads(r.stdout)] == ["team-a/via-server"]
    r = daggers("whoami", "--user", "root", env=env)
    assert r.returncode == 2
    assert "--user (or $DAGGERS_USER) cannot be used with the server" in r.stderr + r.stdout
    r = daggers(
        "dagger", "deploy", "team-a/via-server", "--json", env={**env, "DAGGERS_TOKEN": tokens["vera"]}
    )
    assert r.returncode == 2
    assert json.loads(r.stdout)["error"]["title"] == "Permission denied"
    # plain HTTP to the TLS port and an unknown CA both fail with one line, never the token
    r = daggers(
        "whoami",
        env={
            **env,
            "DAGGERS_CA": "",
            "DAGGERS_CREDENTIALS": str(tmp_path / "none.json"),
            "DAGGERS_SERVER": base,
            "DAGGERS_TOKEN": tokens["alice"],
            "REQUESTS_CA_BUNDLE": "",
            "SSL_CERT_FILE": "",
        },
    )
    assert (
        r.returncode == 2 and "TLS to" in r.stdout + r.stderr and tokens["alice"] not in r.stdout + r.stderr
    )
    creds.chmod(0o644)
    r = daggers("whoami", env=env)
    assert r.returncode == 2 and "can be read by other users" in r.stdout + r.stderr
    registry.close()


def test_without_a_server_the_cli_is_embedded_as_the_os_user(tmp_path: Path) -> None:
    import getpass

    env = {k: v for k, v in os.environ.items() if not k.startswith("DAGGERS_")}
    env["DAGGERS_CREDENTIALS"] = str(tmp_path / "none.json")
    reg = f"sqlite:///{tmp_path / 'registry.db'}"
    me = getpass.getuser()
    assert daggers("registry", "init", "--admin", me, "--registry", reg, env=env).returncode == 0
    r = daggers("whoami", "--registry", reg, "--json", env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["user"] == me
