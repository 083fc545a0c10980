"""Single sign-on: the device flow (RFC 8628) against an authlib provider the test starts on 127.0.0.1,
the id token verified by the server (JWKS signature, issuer, audience, expiry), the OIDC subject mapped to
a Daggers user; refused sign-ins are audited with the subject and rate-limited like tokens."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from joserfc.jwk import RSAKey
from sqlalchemy import select

from job.control import Registry
from job.control.device_flow import device_signin
from job.control.errors import AuthError
from job.control.models import AuditEntry
from tests.job.control.control_seed import postgres_url
from tests.job.server.oidc_provider import Provider, running_provider
from tests.job.server.server_world import running_server, seed_tokens

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sso(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Provider, Registry]]:
    url = postgres_url(postgres.dsn)
    registry = Registry(url)
    root, _tokens = seed_tokens(registry)
    with running_provider() as provider:
        root.link_oidc("alice", provider.issuer, "alice@example.com")
        log = tmp_path_factory.mktemp("sso") / "server.log"
        with running_server(
            url, log, "--oidc-issuer", provider.issuer, "--oidc-client-id", "daggers"
        ) as base:
            yield base, provider, registry
    registry.close()


def test_device_flow_signs_alice_in_and_the_audit_names_her_subject(sso: Any) -> None:
    base, provider, registry = sso
    shown: list[tuple[str, str]] = []

    def show(url: str, code: str) -> None:
        shown.append((url, code))
        threading.Timer(1.5, provider.approve, (code, "alice@example.com")).start()  # the user, in a browser

    answer = device_signin(base, show=show, timeout_s=60)
    assert answer["user"] == "alice" and answer["token"].startswith("dgr_")
    assert shown[0][0] == f"{provider.issuer}/activate?user_code={shown[0][1]}"
    from job.control.remote import RemoteControlPlane

    plane = RemoteControlPlane(base, answer["token"])
    assert plane.whoami() == {
        "user": "alice",
        "superuser": False,
        "teams": {"team-a": "editor"},
        "credential": "oidc:alice@example.com",
    }
    with registry.session() as s:
        entry = s.scalars(
            select(AuditEntry).where(AuditEntry.action == "sign in", AuditEntry.allowed.is_(True))
        ).one()
        assert (entry.user, entry.credential, entry.source) == (
            "alice",
            "oidc:alice@example.com",
            "127.0.0.1",
        )


def test_a_refused_device_grant_and_bad_id_tokens_are_401(sso: Any) -> None:
    base, provider, registry = sso
    with pytest.raises(AuthError, match="single sign-on did not complete: access_denied"):
        device_signin(
            base,
            show=lambda _u, code: provider.approve(code, "alice@example.com", approved=False),
            timeout_s=30,
        )
    other_key = RSAKey.generate_key(2048, parameters={"kid": "test-key"})
    stranger = RSAKey.generate_key(2048, parameters={"kid": "another-key"})
    cases = {
        provider.id_token(
            "mallory@example.com"
        ): "no Daggers user has the OIDC identity 'mallory@example.com'",
        provider.id_token(
            "alice@example.com", audience="someone-else"
        ): "the id token is not valid: invalid_claim",
        provider.id_token("alice@example.com", lifetime_s=-120): "the id token is not valid: expired_token",
        provider.id_token("alice@example.com", key=other_key): "the id token is not valid: bad_signature",
        provider.id_token("alice@example.com", key=stranger): "the id token is not signed by a key of the "
        "OIDC provider",
    }
    for id_token, message in cases.items():
        r = requests.post(f"{base}/api/v1/auth/oidc/token", json={"id_token": id_token}, timeout=30)
        assert r.status_code == 401, r.text
        assert r.json()["error"]["message"] == message
        assert id_token not in r.text
    with registry.session() as s:
        refused = s.scalars(
            select(AuditEntry).where(
                AuditEntry.action.startswith("sign in: POST"), AuditEntry.allowed.is_(False)
            )
        ).all()
        assert [a.details["reason"] for a in refused][-5:] == list(cases.values())
        assert all(a.source == "127.0.0.1" for a in refused)


def test_login_oidc_on_the_command_line_stores_a_0600_credential(
    sso: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from job.cli.main import app

    base, provider, _registry = sso
    monkeypatch.setenv("DAGGERS_CREDENTIALS", str(tmp_path / "creds.json"))
    monkeypatch.delenv("DAGGERS_USER", raising=False)
    import job.control.device_flow as flow

    real = flow.device_signin

    def approving(server: str, **kw: Any) -> dict[str, Any]:
        show = kw.pop("show")

        def also_approve(url: str, code: str) -> None:
            show(url, code)
            threading.Timer(1.0, provider.approve, (code, "alice@example.com")).start()

        return real(server, show=also_approve, **kw)

    monkeypatch.setattr(flow, "device_signin", approving)
    result = CliRunner().invoke(app, ["login", "--server", base, "--oidc"])
    assert result.exit_code == 0, result.output
    assert "enter the code" in result.output and f"signed in to {base} as alice" in result.output
    assert (tmp_path / "creds.json").stat().st_mode & 0o777 == 0o600
    result = CliRunner().invoke(app, ["whoami", "--json"])
    assert result.exit_code == 0 and '"user": "alice"' in result.output
