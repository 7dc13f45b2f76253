"""The gateway's FastAPI app: ``create_app(settings)``.

Routes: ``services.gateway.routes`` (HTTP) and ``services.gateway.ws`` (WebSocket); the parts
they share (Redis, store, admission, intake, hub, rooms) are opened by the app's lifespan
(``services.gateway.state``).  Every request body is capped at ``MAX_COMMAND_BYTES``.  OpenAPI:
``/docs`` and ``/openapi.json``, with the wire commands' JSON Schema as request bodies.
Seat tokens travel in WebSocket query strings, so uvicorn's log lines show ``token=<redacted>``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from events.commands import MAX_COMMAND_BYTES, Command
from services.gateway import docs_pages, errors, lobby_routes, metrics, routes, web_pages, ws
from services.gateway.body_limit import BodyLimit
from services.gateway.messages import CreateTableRequest, JoinRequest
from services.gateway.state import open_gateway
from services.log import configure
from services.settings import Settings, load_settings

TITLE = "Conquian gateway"
VERSION = "1"
DESCRIPTION = (
    "Tables, seats and seat tokens, commands, views and live events of Conquian tables. "
    "Every rejection is `{ok: false, code, message}` with a stable code; see docs/api.md."
)


_TOKEN = re.compile(r"(token=)[^&\s\"']+")


class RedactTokens(logging.Filter):
    """Replaces seat tokens in query strings of log records (uvicorn logs WebSocket paths)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN.sub(r"\1<redacted>", a) if isinstance(a, str) else a for a in record.args
            )
        if isinstance(record.msg, str):
            record.msg = _TOKEN.sub(r"\1<redacted>", record.msg)
        return True


def redact_server_logs() -> None:
    """Put :class:`RedactTokens` on uvicorn's loggers (once)."""
    for name in ("uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


class RequestMetrics:
    """ASGI middleware counting HTTP requests by route template and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            metrics.REQUESTS.labels(route, str(status)).inc()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Return the gateway app for ``settings``; without them (uvicorn's ``--factory``, as
    ``conquian serve`` starts it), the settings and the log level come from the environment."""
    if settings is None:
        settings = load_settings()
        configure(settings.log_level)  # before any logger is used: they keep their first level
    redact_server_logs()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        gateway = await open_gateway(settings)
        app.state.gateway = gateway
        try:
            yield
        finally:
            await gateway.close()

    app = FastAPI(
        title=TITLE,
        version=VERSION,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # docs_pages: the same pages, their assets from the package
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings
    docs_pages.install(app, "/openapi.json")
    web_pages.install(app)
    errors.install(app)
    app.include_router(routes.router)
    app.include_router(lobby_routes.router)
    app.include_router(ws.router)
    app.add_middleware(BodyLimit, limit=MAX_COMMAND_BYTES)
    app.add_middleware(RequestMetrics)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


BODY_SCHEMAS: dict[str, TypeAdapter[Any]] = {
    "Command": TypeAdapter(Command),
    "CreateTableRequest": TypeAdapter(CreateTableRequest),
    "JoinRequest": TypeAdapter(JoinRequest),
}
"""Request bodies the routes read by hand (to answer bad input with stable codes)."""


def _openapi(app: FastAPI) -> dict[str, Any]:
    schema = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    components: dict[str, Any] = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, adapter in BODY_SCHEMAS.items():
        body = adapter.json_schema(ref_template="#/components/schemas/{model}")
        for def_name, definition in body.pop("$defs", {}).items():
            components.setdefault(def_name, definition)
        components[name] = body
    return schema
