"""Which control plane a command talks to: a server (``--server``, ``$DAGGERS_SERVER`` or a stored login)
or, without one, the embedded one on a local registry as the OS user.

``daggers login`` stores the server's URL and the token in ``$DAGGERS_CREDENTIALS`` (default
``~/.config/daggers/credentials.json``), a file only its user can read (0600, in a 0700 folder).
"""

from __future__ import annotations

import getpass
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from job.control.errors import AuthError, ControlError

if TYPE_CHECKING:
    from job.control.protocol import Plane

ENV_SERVER = "DAGGERS_SERVER"
ENV_TOKEN = "DAGGERS_TOKEN"
ENV_CA = "DAGGERS_CA"
ENV_CREDENTIALS = "DAGGERS_CREDENTIALS"


def credentials_path() -> Path:
    """Return where ``daggers login`` keeps the credential."""
    if os.environ.get(ENV_CREDENTIALS):
        return Path(os.environ[ENV_CREDENTIALS])
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "daggers" / "credentials.json"


def save_login(server: str, token: str, ca: str | None = None) -> Path:
    """Store ``server``, ``token`` (and the CA bundle's path) readable by the current user only; return the
    file's path. The file is created 0600 before anything is written to it."""
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"server": server.rstrip("/"), "token": token, "ca": ca}, f)
    os.replace(tmp, path)
    return path


def load_login() -> dict[str, Any] | None:
    """Return the stored login ({server, token, ca}), or None. Raises ControlError when the file can be read
    by others (it is then not used)."""
    path = credentials_path()
    if not path.is_file():
        return None
    if path.stat().st_mode & 0o077:
        raise ControlError(
            f"{path} can be read by other users: not using it",
            hint=f"chmod 600 {path}, or sign in again: daggers login --server URL",
        )
    try:
        data = json.loads(path.read_text())
    except ValueError:
        raise ControlError(f"{path} is not a Daggers login file", hint="daggers login --server URL") from None
    return data if isinstance(data, dict) and data.get("server") and data.get("token") else None


def forget_login() -> bool:
    """Remove the stored login; return whether there was one."""
    path = credentials_path()
    if path.is_file():
        path.unlink()
        return True
    return False


def server_of(server: str | None) -> tuple[str, str | None, str | None] | None:
    """Return (URL, token, CA) of the server to use: ``server``, else ``$DAGGERS_SERVER``, else the stored
    login's; None for embedded mode. The token is ``$DAGGERS_TOKEN`` or the stored login's."""
    login = load_login()
    url = server or os.environ.get(ENV_SERVER) or (login or {}).get("server")
    if not url:
        return None
    same = login is not None and login["server"] == url.rstrip("/")
    token = os.environ.get(ENV_TOKEN) or (login["token"] if same and login else None)
    ca = os.environ.get(ENV_CA) or ((login or {}).get("ca") if same else None)
    return url.rstrip("/"), token, ca


def open_plane(user: str | None, registry_url: str, server: str | None = None) -> Plane:
    """Return the control plane to use: a :class:`RemoteControlPlane` when a server is configured (then
    ``user`` must be None: the credential says who acts), else the embedded ControlPlane on
    ``registry_url`` as ``user`` or the OS user.

    Raises ControlError for ``--user`` against a server, AuthError when there is no token for it.
    """
    target = server_of(server)
    if target is None:
        from job.control.api import ControlPlane
        from job.control.registry import Registry

        return ControlPlane(Registry(registry_url), user or getpass.getuser())
    url, token, ca = target
    if user:
        raise ControlError(
            f"--user (or $DAGGERS_USER) cannot be used with the server {url}: the server acts as "
            "the signed-in user",
            hint="drop --user; daggers login --server URL signs in as someone else",
        )
    if not token:
        raise AuthError(
            f"no credential for the server {url}", hint=f"sign in with: daggers login --server {url}"
        )
    from job.control.remote import RemoteControlPlane

    return RemoteControlPlane(url, token, verify=ca or True)
