"""``daggers server``, ``daggers login``/``logout`` and ``daggers token``: the shared control plane."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from job.cli.common import print_table
from job.cli.control.options import JsonOpt, PlaneOptions, RegistryOpt, StateOpt, plane_options, registry_url
from job.cli.control.reply import emit, errors, ok, out

token_app = typer.Typer(help="API tokens: personal ones and clusters' controller ones.", no_args_is_help=True)


def server(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0: one the OS picks).")] = 8470,
    cert: Annotated[Path | None, typer.Option("--cert", help="TLS certificate chain (PEM).")] = None,
    key: Annotated[Path | None, typer.Option("--key", help="TLS private key (PEM).")] = None,
    oidc_issuer: Annotated[
        str | None,
        typer.Option(envvar="DAGGERS_OIDC_ISSUER", help="OIDC provider's issuer URL (single sign-on)."),
    ] = None,
    oidc_client_id: Annotated[
        str | None, typer.Option(envvar="DAGGERS_OIDC_CLIENT_ID", help="Daggers' client id at the provider.")
    ] = None,
    max_spec_kb: Annotated[int, typer.Option(help="Largest spec accepted, KiB.")] = 256,
    max_failed_signins: Annotated[
        int,
        typer.Option(
            help="Failed sign-ins per minute from one address, "
            "and with one token, before 429 (a valid "
            "credential is always served)."
        ),
    ] = 10,
    failover_after: Annotated[
        float,
        typer.Option(
            help="Seconds a cluster's controller is silent, by this "
            "server's clock, before the cluster it fails over "
            "to takes its daggers (controllers may only ask "
            "for longer)."
        ),
    ] = 60.0,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help=(
                "Serve the registry's view of every cluster and dagger as Prometheus metrics at /metrics on "
                "this port (plain HTTP, no token: keep it on a private network; 0: one the OS picks, "
                "printed; default: none)."
            ),
        ),
    ] = None,
    metrics_host: Annotated[str, typer.Option(help="Address the metrics port listens on.")] = "127.0.0.1",
    allow_carried_udfs: Annotated[
        bool,
        typer.Option(
            help="Take a udf_file's code carried in a spec from clients (daggers dagger create/edit send it). "
            "It runs on the controllers' hosts as their user: only where every editor may run code there."
        ),
    ] = False,
    registry: RegistryOpt = None,
    state_dir: StateOpt = None,
) -> None:
    """Serve the control plane as an HTTP JSON API (/api/v1; OpenAPI at /api/v1/openapi.json). It alone
    opens the registry: give its URL by $DAGGERS_REGISTRY (a password in --registry would show in ps).
    Without --cert and --key, an address beyond this machine gets a warning: tokens would travel in clear.
    With --metrics-port, it also serves the platform's state for Prometheus, alive when a controller is not."""
    from pydantic import ValidationError

    from job.errors import CommandLineError
    from job.server.run import clear_text_warning, serve
    from job.server.settings import OidcSettings, ServerSettings

    with errors(False):
        oidc = (
            OidcSettings(issuer=oidc_issuer, client_id=oidc_client_id)
            if oidc_issuer and oidc_client_id
            else None
        )
        try:
            settings = ServerSettings(
                host=host,
                port=port,
                certfile=cert,
                keyfile=key,
                oidc=oidc,
                max_failed_signins=max_failed_signins,
                failover_after_s=failover_after,
                max_spec_bytes=max_spec_kb * 1024,
                max_body_bytes=max(1 << 20, 4 * max_spec_kb * 1024),
                allow_carried_udfs=allow_carried_udfs,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            option, given = {
                "port": ("--port", port),
                "max_spec_bytes": ("--max-spec-kb", max_spec_kb),
                "max_body_bytes": ("--max-spec-kb", max_spec_kb),
                "max_failed_signins": ("--max-failed-signins", max_failed_signins),
                "failover_after_s": ("--failover-after", failover_after),
            }.get(field, (field, first["input"]))
            reason = first["msg"].removeprefix("Value error, ").replace("Input should be", "it must be")
            raise CommandLineError(f"{option} {given}: {reason}", hint="see daggers server --help") from None
        if warning := clear_text_warning(settings):
            typer.echo(f"Warning: {warning}", err=True)
        serve(
            registry_url(registry, state_dir), settings, metrics_port=metrics_port, metrics_host=metrics_host
        )


def login(
    server: Annotated[str, typer.Option("--server", help="The server's URL, https://host:port.")],
    oidc: Annotated[bool, typer.Option("--oidc", help="Sign in with single sign-on (device flow).")] = False,
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="Read the token from standard input instead of a prompt.")
    ] = False,
    ca: Annotated[
        Path | None,
        typer.Option(
            "--ca", help="The CA bundle that signed the server's certificate (default: the system's)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Sign in to a server and keep the credential in a file only you can read."""
    from job.control.client import save_login
    from job.control.remote import RemoteControlPlane
    from job.server.run import url_warning

    verify: bool | str = str(ca.absolute()) if ca else True
    if warning := url_warning(server):
        typer.echo(f"Warning: {warning}", err=True)
    with errors(as_json):
        if oidc:
            from job.control.device_flow import device_signin

            answer = device_signin(
                server,
                verify=verify,
                show=lambda url, code: out.print(f"Open {url} and enter the code [bold]{code}[/]; waiting…"),
            )
            token = answer["token"]
        elif token_stdin:
            token = sys.stdin.readline().strip()
        else:
            token = typer.prompt("API token", hide_input=True).strip()
        me = RemoteControlPlane(server, token, verify=verify).whoami()
        path = save_login(server, token, str(ca.absolute()) if ca else None)
        ok(
            f"signed in to {server} as {me['user']} (credential kept in {path})",
            {"server": server, "user": me["user"], "credentials": str(path)},
            as_json,
        )


def logout(as_json: JsonOpt = False) -> None:
    """Revoke the stored credential on its server, then forget it. When the server cannot revoke it
    (unreachable, or the token no longer signs in), say so, and forget it all the same."""
    from job.control.client import forget_login, load_login
    from job.control.remote import RemoteControlPlane
    from job.control.tokens import split_token
    from job.errors import DaggerError

    revoked, problem = False, None
    try:
        login = load_login()
        parts = split_token(str(login["token"])) if login else None
        if login is not None and parts is None:
            raise DaggerError(f"the stored credential for {login['server']} is not a Daggers token")
        if login is not None and parts is not None:
            RemoteControlPlane(
                login["server"], login["token"], verify=login.get("ca") or True, timeout=15
            ).revoke_token(parts[0])
            revoked = True
    except DaggerError as exc:
        problem = f"the token was not revoked on its server: {exc.message}"
        if not as_json:
            typer.echo(f"Warning: {problem}", err=True)
    gone = forget_login()
    message = (
        "signed out; the token is revoked on the server"
        if revoked
        else "signed out"
        if gone
        else "not signed in"
    )
    ok(message, {"signed_out": gone, "revoked": revoked, "problem": problem}, as_json)


def _when(ts: float | None) -> str:
    if ts is None or ts == 0:
        return "-"
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")
    except (
        OverflowError,
        OSError,
        ValueError,
    ):  # a time no calendar holds (a registry written before the bound)
        return "never" if ts > 0 else "-"


@token_app.command("create")
@plane_options
def token_create(
    for_user: Annotated[
        str | None, typer.Option("--for", help="A personal token for this user (superusers).")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="A controller token for this cluster (its team's admins).")
    ] = None,
    description: Annotated[str, typer.Option("--description")] = "",
    days: Annotated[float | None, typer.Option("--days", help="Expire after this many days.")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Make a token; it is printed once and only its hash is kept."""
    with errors(as_json):
        view, token = opts.plane().create_token(
            for_user, cluster=cluster, description=description, expires_in_s=days * 86400 if days else None
        )
    emit(
        {**view.to_dict(), "token": token},
        as_json,
        lambda: out.print(
            f"token {view.token_id} for {view.user or 'the controller of ' + str(view.cluster)} "
            f"(shown once, keep it safe):\n{token}"
        ),
    )


@token_app.command("list")
@plane_options
def token_list(
    for_user: Annotated[str | None, typer.Option("--for", help="Only this user's.")] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """List tokens (superusers); never their secrets."""
    with errors(as_json):
        rows = opts.plane().tokens(for_user)

    def human() -> None:
        t = Table("id", "kind", "user / cluster", "description", "created", "expires", "revoked", "last used")
        for r in rows:
            t.add_row(
                r.token_id,
                r.kind,
                r.user or r.cluster or "-",
                r.description,
                _when(r.created_at),
                _when(r.expires_at),
                _when(r.revoked_at),
                _when(r.last_used_at),
            )
        print_table(out, t, empty="No tokens yet: daggers token create --for USER")

    emit([r.to_dict() for r in rows], as_json, human)


@token_app.command("revoke")
@plane_options
def token_revoke(token_id: str, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """Revoke a token now."""
    with errors(as_json):
        view = opts.plane().revoke_token(token_id)
        ok(f"token {token_id} revoked", {"token": view.to_dict()}, as_json)


@token_app.command("expire")
@plane_options
def token_expire(token_id: str, *, opts: PlaneOptions, as_json: JsonOpt = False) -> None:
    """Make a token expire now."""
    with errors(as_json):
        view = opts.plane().expire_token(token_id)
        ok(f"token {token_id} expired", {"token": view.to_dict()}, as_json)


@plane_options
def user_oidc(
    name: str,
    subject: Annotated[str, typer.Option("--subject", help="The OIDC subject (sub claim).")],
    issuer: Annotated[
        str | None, typer.Option("--issuer", help="The provider (embedded mode; a server uses its own).")
    ] = None,
    *,
    opts: PlaneOptions,
    as_json: JsonOpt = False,
) -> None:
    """Map an OIDC subject to a user (superusers)."""
    with errors(as_json):
        opts.plane().link_oidc(name, issuer or os.environ.get("DAGGERS_OIDC_ISSUER", ""), subject)
        ok(f"OIDC subject {subject} signs in as {name}", {"user": name, "subject": subject}, as_json)


def register(app: typer.Typer) -> None:
    """Add ``server``, ``login``, ``logout`` and ``token`` to ``app`` (and ``user oidc``)."""
    from job.cli.control.users import user_app

    app.command("server")(server)
    app.command("login")(login)
    app.command("logout")(logout)
    app.add_typer(token_app, name="token")
    user_app.command("oidc")(user_oidc)
