"""Run the API with uvicorn: ``daggers server``."""

from __future__ import annotations

import ipaddress
import logging
import stat
from pathlib import Path
from urllib.parse import urlsplit

from job.control.errors import ControlError
from job.server.settings import ServerSettings


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
    return (f"the server listens on {settings.host} over plain HTTP: tokens travel in clear. Give it "
            "--cert and --key, or put it behind a TLS proxy and listen on 127.0.0.1")


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
        raise ControlError(f"the TLS key {path} can be read by other users (mode {stat.S_IMODE(mode):o}): "
                           "not using it", hint=f"chmod 600 {path}")


def serve(registry_url: str, settings: ServerSettings) -> None:
    """Serve the API on ``registry_url`` until interrupted (HTTPS when ``settings`` has a certificate and key).

    Raises ControlError when only one of the certificate and the key is given, the key can be read by other
    users, or the server extra is not installed; RegistryError when the registry cannot be opened.
    """
    try:
        import uvicorn

        from job.server.app import create_app
    except ImportError as exc:
        raise ControlError(f"daggers server needs {exc.name or 'its libraries'}",
                           hint="pip install 'daggers[server]'") from None

    if (settings.certfile is None) != (settings.keyfile is None):
        raise ControlError("TLS needs both --cert and --key")
    if settings.keyfile is not None:
        check_key_file(settings.keyfile)
    from job.control.registry import Registry

    registry = Registry(registry_url)
    logging.getLogger("job.server").info("registry %s", registry.safe_url)
    app = create_app(registry, settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info",
                            ssl_certfile=str(settings.certfile) if settings.certfile else None,
                            ssl_keyfile=str(settings.keyfile) if settings.keyfile else None,
                            proxy_headers=False, server_header=False)
    try:
        uvicorn.Server(config).run()
    finally:
        registry.close()
