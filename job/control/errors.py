"""Errors of the control plane: each a :class:`~job.errors.DaggerError` with a title, message and hint."""

from __future__ import annotations

from job.errors import DaggerError


class ControlError(DaggerError):
    """A control-plane operation cannot be done (bad argument, wrong state)."""

    title = "Control plane"


class NotFoundError(ControlError):
    """The named cluster, team, user or dagger does not exist, or the user may not see it."""

    title = "Not found"


class PermissionDeniedError(ControlError):
    """The user's role in the team does not allow the operation."""

    title = "Permission denied"


class ConflictError(ControlError):
    """The registry changed under the operation (a name taken, a newer spec version)."""

    title = "Conflict"


class RegistryError(ControlError):
    """The registry database cannot be reached or used."""

    title = "Registry error"


class VersionConflictError(ConflictError):
    """Someone else made a newer spec version of the dagger than the one the edit started from.

    ``current_version`` is the dagger's version now (the server returns it with 409)."""

    def __init__(self, message: str, *, current_version: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.current_version = current_version


class AuthError(ControlError):
    """No credential, or one that is wrong, expired or revoked (the server answers 401)."""

    title = "Not signed in"
