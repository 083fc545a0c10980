"""The server's error answers: which status a Daggers error gets, and the one-line JSON body."""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError

from job.control.errors import (
    AuthError,
    ConflictError,
    ControlError,
    NotFoundError,
    PermissionDeniedError,
    RegistryError,
    VersionConflictError,
)
from job.errors import DaggerError


class TooLargeError(ControlError):
    """A request or a spec over the server's size limit (413)."""

    title = "Too large"


class TooManyError(ControlError):
    """Too many failed sign-ins from one address or with one token (429); ``retry_after_s`` is when the next
    attempt is counted again (the ``Retry-After`` header)."""

    title = "Too many failed sign-ins"

    def __init__(self, message: str, *, retry_after_s: float, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s


_STATUS: list[tuple[type[DaggerError], int]] = [
    (AuthError, 401), (PermissionDeniedError, 403), (NotFoundError, 404), (ConflictError, 409),
    (TooLargeError, 413), (TooManyError, 429), (RegistryError, 503),
]


def status_of(exc: DaggerError) -> int:
    """Return the HTTP status of a Daggers error (422 for a bad argument, spec or SQL)."""
    return next((code for kind, code in _STATUS if isinstance(exc, kind)), 422)


def error_body(exc: DaggerError) -> dict[str, Any]:
    """Return the JSON body of an error response."""
    body: dict[str, Any] = {"title": exc.title, "message": exc.message, "hint": exc.hint}
    if isinstance(exc, VersionConflictError):
        body["current_version"] = exc.current_version
    return {"error": body}


def validation_message(exc: RequestValidationError) -> tuple[int, str]:
    """Return the status (400 for a body that is not JSON or not an object, else 422) and one line naming
    the first bad field."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        return 400, f"the request body is not valid JSON: {ctx.get('error', 'malformed')}"
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in ("model_attributes_type", "dict_type"):
        return 400, "the request body is not a JSON object (send Content-Type: application/json)"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return 422, f"{where}: {first.get('msg', 'invalid')}{more}"
