"""The server's settings (``daggers server`` options and ``DAGGERS_SERVER_*`` variables)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class OidcSettings(BaseModel):
    """The OpenID Connect provider users sign in with (device flow from a terminal)."""

    issuer: str
    """The provider's issuer URL; its ``/.well-known/openid-configuration`` names the endpoints and JWKS."""
    client_id: str
    """The client id Daggers is registered as at the provider (id tokens must have it as audience)."""
    session_ttl_s: float = Field(default=12 * 3600, gt=0, le=366 * 86400)
    """How long the Daggers token issued for a verified OIDC sign-in lasts, in seconds (at most 366 days)."""


class ServerSettings(BaseModel):
    """How ``daggers server`` listens, limits requests and signs users in."""

    host: str = "127.0.0.1"
    """The address to listen on."""
    port: int = 8470
    """The TCP port to listen on (0: any free port)."""
    certfile: Path | None = None
    """The TLS certificate chain (PEM); with ``keyfile``, the server speaks HTTPS only."""
    keyfile: Path | None = None
    """The TLS private key (PEM)."""
    max_body_bytes: int = Field(default=1 << 20, gt=0)
    """Requests with a larger body are refused with 413 before they are read."""
    max_spec_bytes: int = Field(default=256 << 10, gt=0)
    """A spec text larger than this is refused with 413."""
    max_failed_signins: int = Field(default=10, gt=0)
    """Failed sign-ins allowed per ``failed_signin_window_s`` from one source address, and as many with one
    token id; a further failed one gets 429. A valid credential is always served, whatever failed before."""
    failed_signin_window_s: float = Field(default=60.0, gt=0)
    """The window over which failed sign-ins are counted, in seconds."""
    oidc: OidcSettings | None = None
    """Single sign-on with OpenID Connect (None: personal tokens only)."""
    allow_preview: bool = True
    """Run previews (Spark, in the server's process) for users who may preview."""
    allow_carried_udfs: bool = False
    """Take a ``udf_file``'s code carried in a spec (``udf_file_base64``) from a client. It runs on the
    controllers' hosts as their user, who may read what those hosts hold: off unless every editor may."""
    failover_after_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    """A controller takes over the daggers of a cluster that fails over to its own once that cluster's
    controller heartbeat is this old, by the server's clock. A controller may ask for a longer wait (its
    ``--failover-after``), never a shorter one."""
