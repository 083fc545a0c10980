"""The server's error answers: which status a Daggers error gets, and the one-line JSON body.

Every error the server answers, from a route, a request it cannot parse or a path it does not serve, has
the body ``{"error": {"title", "message", "hint"}}`` (:data:`ERROR_RESPONSES` documents it in the OpenAPI).
No message names the registry's address, user or database: the server logs those (see
:mod:`job.control.registry`).
"""

from __future__ import annotations

from collections.abc import Iterator
from http import HTTPStatus
from typing import Any, cast

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from starlette.exceptions import HTTPException

from job.control.errors import (
    AuthError,
    ConflictError,
    ControlError,
    NotFoundError,
    PermissionDeniedError,
    RegistryError,
    VersionConflictError,
)
from job.control.registry import RegistryValueError
from job.errors import DaggerError
from job.server.plain import PLAIN_VALUE
from job.spec.wording import field_at, models_at, problem


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
    (RegistryValueError, 422),
    (AuthError, 401),
    (PermissionDeniedError, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (TooLargeError, 413),
    (TooManyError, 429),
    (RegistryError, 503),
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


def field_of(request: Request | None, loc: tuple[Any, ...]) -> FieldInfo | None:
    """Return the declared field behind an error's location (``("body", "pid")``, ``("query", "since_s")``)
    in the route that ``request`` reached, so that its message can give the field's type and range; None
    when it is not known."""
    dependant = getattr(request.scope.get("route") if request is not None else None, "dependant", None)
    if dependant is None or len(loc) < 2 or loc[0] not in ("body", "query", "path", "header"):
        return None
    params = list(_params(dependant, str(loc[0])))
    rest = tuple(loc[1:])
    model = _body_model(request) if loc[0] == "body" else None
    if model is not None:
        return field_at(rest, model)
    param = next((p for p in params if p.alias == rest[0]), None)
    if param is None:
        return None
    if len(rest) == 1:
        return cast(FieldInfo, param.field_info)
    model = param.field_info.annotation
    return field_at(rest[1:], model) if isinstance(model, type) and issubclass(model, BaseModel) else None


def _body_model(request: Request | None) -> type[BaseModel] | None:
    """The model of the route's one body parameter, if it has exactly one."""
    dependant = getattr(request.scope.get("route") if request is not None else None, "dependant", None)
    params = list(_params(dependant, "body")) if dependant is not None else []
    model = params[0].field_info.annotation if len(params) == 1 else None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _known_at(request: Request | None, loc: tuple[Any, ...]) -> set[str]:
    """The field names the body's model accepts where an unknown field ``loc`` was sent."""
    model = _body_model(request) if loc[:1] == ("body",) else None
    if model is None:
        return set()
    return {name for m in models_at(tuple(loc[1:-1]), model) for name in m.model_fields}


def _params(dependant: Any, where: str) -> Iterator[Any]:
    """Yield the parameters of one kind (``body``, ``query``…) of a route's dependant and its dependencies."""
    yield from getattr(dependant, f"{where}_params", ())
    for sub in dependant.dependencies:
        yield from _params(sub, where)


def validation_message(exc: RequestValidationError, request: Request | None = None) -> tuple[int, str]:
    """Return the status (400 for a body that is not JSON or not an object, else 422) and one line naming
    the first bad field, worded as every user input's errors are (:func:`job.spec.wording.problem`), with the
    declared field's type and range when ``request`` shows which route it reached."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == PLAIN_VALUE:  # job.server.plain names the field in the message itself
        return 422, str(first.get("msg"))
    if first.get("type") == "json_invalid":
        ctx = first.get("ctx") or {}
        return 400, f"the request body is not valid JSON: {ctx.get('error', 'malformed')}"
    if tuple(first.get("loc", ())) == ("body",) and first.get("type") in (
        "model_attributes_type",
        "dict_type",
    ):
        return 400, "the request body is not a JSON object (send Content-Type: application/json)"
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if "type" not in first:
        return 422, f"{where}: {first.get('msg', 'invalid')}{more}"
    loc = tuple(first.get("loc", ()))
    known = _known_at(request, loc) if first["type"] == "extra_forbidden" else set()
    given = first.get("input")
    written = given if loc[:1] in (("query",), ("path",), ("header",)) and isinstance(given, str) else None
    message = problem(cast(ErrorDetails, first), field_of(request, loc), written, known)
    return 422, f"{where}: {message}{more}"


class ErrorDetail(BaseModel):
    """What went wrong: a short title, a message naming the field, a hint (or null); a stale edit's 409 also
    has ``current_version``."""

    title: str
    message: str
    hint: str | None = None
    current_version: int | None = None


class ErrorOut(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


_WHAT = {
    400: "malformed request (not JSON, not an object, nested too deep)",
    401: "no or a bad credential",
    403: "the role does not allow it",
    404: "missing, or another team's",
    409: "a conflict (a name taken, a newer version)",
    413: "too large",
    422: "invalid input (the message names the field)",
    429: "too many failed sign-ins",
    503: "the registry is unreachable",
}
#: The error answers of every route, for the OpenAPI description.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": what} for code, what in _WHAT.items()
}


def _unreadable(cause: BaseException | None) -> str:
    """Return why a body could not be parsed as JSON, from the parser's exception."""
    if isinstance(cause, RecursionError):
        return "the request body is nested too deeply to read"
    if isinstance(cause, UnicodeDecodeError):
        return "the request body is not UTF-8 text"
    if isinstance(cause, ValueError) and "digits" in str(cause):
        return "a number in the request body has too many digits"
    return "the request body cannot be read as JSON"


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return "Error"


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    """Answer an HTTP error of the framework (a body it cannot parse, a path or method it does not serve) with
    the error body every other error has."""
    assert isinstance(exc, HTTPException)
    code = exc.status_code
    if code == 400:
        title, message = "Malformed request", _unreadable(exc.__cause__)
    elif code == 404:
        title, message = "Not found", f"no route {request.url.path[:200]!r}"
    elif code == 405:
        title = "Method not allowed"
        message = f"{request.method[:20]} is not allowed on {request.url.path[:200]!r}"
    else:
        title, message = _phrase(code), str(exc.detail)
    body = {"error": {"title": title, "message": message, "hint": None}}
    return JSONResponse(body, code, headers=getattr(exc, "headers", None))
