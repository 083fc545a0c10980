"""Run the API with uvicorn: ``daggers server``."""

from __future__ import annotations

import ipaddress
import logging
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from job.control.errors import ControlError
from job.server.settings import ServerSettings

if TYPE_CHECKING:
    from job.control.metrics import MetricsServer
    from job.control.registry import Registry


def is_loopback(host: str | None) -> bool:
    """Return whether ``host`` (an address or a name) is this machine only: ``localhost`` or a loopback
    address; an empty host (every address) is not."""
    if not host:
        return False
    name = host.strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def clear_text_warning(settings: ServerSettings) -> str | None:
    """Return the warning for a server that listens beyond this machine without TLS, else None."""
    if settings.certfile is not None or is_loopback(settings.host):
        return None
    return (
        f"the server listens on {settings.host} over plain HTTP: tokens travel in clear. Give it "
        "--cert and --key, or put it behind a TLS proxy and listen on 127.0.0.1"
    )


def url_warning(url: str) -> str | None:
    """Return the warning for a client that sends its token to ``url`` over plain HTTP off this machine."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "http" or is_loopback(parts.hostname):
        return None
    return f"{url} is plain HTTP: the token travels in clear. Use https:// (a server with --cert and --key)"


def check_key_file(path: Path) -> None:
    """Raise ControlError when the TLS key at ``path`` is missing, not a file, or readable or writable by
    anyone but its owner."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ControlError(f"the TLS key {path} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise ControlError(f"the TLS key {path} is not a file")
    if mode & 0o077:
        raise ControlError(
            f"the TLS key {path} can be read by other users (mode {stat.S_IMODE(mode):o}): not using it",
            hint=f"chmod 600 {path}",
        )


def metrics_warning(host: str) -> str | None:
    """Return the warning for a metrics listener on ``host`` beyond this machine (it asks for no token)."""
    if is_loopback(host):
        return None
    return (
        f"/metrics on {host or 'every address'} answers anyone without a token: keep its port on a private "
        "network (firewall it to the Prometheus that scrapes it)"
    )


def serve_metrics(registry: Registry, port: int, host: str) -> MetricsServer:
    """Start the platform's ``/metrics`` listener on ``host:port`` (0: one the OS picks) and print its URL.

    Raises ControlError when the port cannot be bound."""
    from pydantic import ValidationError

    from job.control.health_model import ENV_PREFIX, HealthSettings
    from job.server.metrics import serve as serve_platform_metrics

    try:
        health = HealthSettings.from_env()
    except ValidationError as exc:
        from job.spec.wording import problem

        first = exc.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        given = first["input"] if isinstance(first["input"], str) else None  # as the variable holds it
        message = problem(first, HealthSettings.model_fields.get(name), given)
        raise ControlError(f"${ENV_PREFIX}{name.upper()}: {message}") from None
    try:
        server = serve_platform_metrics(registry, port, host, health)
    except OSError as exc:
        raise ControlError(
            f"--metrics-port {port}: cannot listen on {host}:{port}: {exc.strerror or exc}",
            hint="give a free port, or 0 for one the OS picks",
        ) from None
    if warning := metrics_warning(host):
        print(f"Warning: {warning}", file=sys.stderr, flush=True)
    print(f"Prometheus metrics (the registry's view) at {server.url}", file=sys.stderr, flush=True)
    return server


def serve(
    registry_url: str,
    settings: ServerSettings,
    *,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> None:
    """Serve the API on ``registry_url`` until interrupted (HTTPS when ``settings`` has a certificate and key),
    and the registry's view as Prometheus metrics on ``metrics_host:metrics_port`` (plain HTTP, no token;
    None: not served; 0: a port the OS picks, printed).

    Raises ControlError when only one of the certificate and the key is given, the key can be read by other
    users, the metrics port cannot be bound, or the server extra is not installed; RegistryError when the
    registry cannot be opened.
    """
    from job.common.optional import require

    uvicorn = require("uvicorn", "server", needed_by="daggers server")
    require("fastapi", "server", needed_by="daggers server")
    from job.server.app import create_app

    if (settings.certfile is None) != (settings.keyfile is None):
        raise ControlError("TLS needs both --cert and --key")
    if settings.keyfile is not None:
        check_key_file(settings.keyfile)
    from job.control.registry import Registry

    registry = Registry(registry_url)
    logging.getLogger("job.server").info("registry %s", registry.safe_url)
    app = create_app(registry, settings)
    try:
        metrics = serve_metrics(registry, metrics_port, metrics_host) if metrics_port is not None else None
    except ControlError:
        registry.close()
        raise
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        ssl_certfile=str(settings.certfile) if settings.certfile else None,
        ssl_keyfile=str(settings.keyfile) if settings.keyfile else None,
        proxy_headers=False,
        server_header=False,
    )
    try:
        uvicorn.Server(config).run()
    finally:
        if metrics is not None:
            metrics.close()
        registry.close()
