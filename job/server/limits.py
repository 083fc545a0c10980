"""The request-size limit, before any route reads a body."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from job.server.errors import TooLargeError, error_body


class BodyLimit:
    """ASGI middleware: refuse a request body over ``limit`` bytes with 413, by its Content-Length or as it
    streams in, before the route reads it."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        too_big = TooLargeError(
            f"the request body is over the server's limit of {self.limit:,} bytes",
            hint="make the spec smaller",
        )
        if length is not None and length.isdigit() and int(length) > self.limit:
            await JSONResponse(error_body(too_big), 413)(scope, receive, send)
            return
        # read the body here (at most the limit), then hand it to the application in one piece
        chunks, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            more = message.get("more_body", False)
            if seen > self.limit:
                await JSONResponse(error_body(too_big), 413, headers={"Connection": "close"})(
                    scope, receive, send
                )
                return
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
