"""``daggers server``: the control plane as a versioned HTTP JSON API, the only way into a shared registry.

:func:`job.server.app.create_app` builds the FastAPI application from the routers of
:mod:`job.server.routes` (one per resource); :func:`job.server.run.serve` runs it with
uvicorn (TLS when given a certificate and key). Clients: :class:`job.control.remote.RemoteControlPlane`.
"""
