"""Run the API with uvicorn: ``daggers server``."""

from __future__ import annotations

import logging

from job.control.errors import ControlError
from job.control.registry import Registry
from job.server.settings import ServerSettings


def serve(registry_url: str, settings: ServerSettings) -> None:
    """Serve the API on ``registry_url`` until interrupted (HTTPS when ``settings`` has a certificate and key).

    Raises ControlError when only one of the certificate and the key is given or the server extra is not
    installed, RegistryError when the registry cannot be opened.
    """
    try:
        import uvicorn

        from job.server.app import create_app
    except ImportError as exc:
        raise ControlError(f"daggers server needs {exc.name or 'its libraries'}",
                           hint="pip install 'daggers[server]'") from None

    if (settings.certfile is None) != (settings.keyfile is None):
        raise ControlError("TLS needs both --cert and --key")
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
