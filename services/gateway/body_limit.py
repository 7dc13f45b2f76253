"""A cap on request bodies, checked on ``Content-Length`` and again on the bytes read.

A body larger than the cap is refused with 413 ``command/too_large`` before anything parses it:
at once when ``Content-Length`` says so, else as soon as the bytes read pass the cap (a chunked
upload that lies about nothing can still be too long).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.codes import Code
from services.gateway.errors import ApiError


class BodyTooLarge(HTTPException):
    """Raised from ``receive`` when the bytes read pass the cap (a 413 for every handler)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"a request body is at most {limit} bytes")


class BodyLimit:
    """ASGI middleware: refuse HTTP request bodies larger than ``limit`` bytes."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            error = ApiError(
                Code.COMMAND_TOO_LARGE,
                f"a request body is at most {self.limit} bytes, Content-Length is {declared}",
            )
            await error.response()(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
