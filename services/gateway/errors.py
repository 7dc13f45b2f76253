"""Rejections as HTTP answers: one body shape, and the status of each stable code.

Every rejection, whoever makes it (the gateway checking input, the engine worker deciding a
command), is ``{"ok": false, "code": "<area>/<what>", "message": "...", ...}``.  The HTTP status
is the code's in the error catalogue (``engine.codes``), from which ``docs/api.md``'s table is
generated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import BusyLoadingError, ClusterDownError, NoPermissionError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.codes import Code, CodedError, status_of
from services.log import get_logger

__all__ = [
    "STORE_ERRORS",
    "UNAVAILABLE",
    "ApiError",
    "from_contract",
    "install",
    "status_of",
    "store_error",
]

UNAVAILABLE: tuple[type[Exception], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    ClusterDownError,
    TryAgainError,
)
"""What Redis raises while it is away, loading its AOF or failing over, or while every
connection of the pool is out: ``store/unavailable``."""
STORE_ERRORS: tuple[type[Exception], ...] = (*UNAVAILABLE, NoPermissionError)
"""The store's failures that :func:`store_error` answers."""


def store_error(exc: Exception) -> ApiError:
    """The answer to a store failure (one of :data:`STORE_ERRORS`), on HTTP and on the
    WebSocket alike: ``store/unavailable`` (``Retry-After: 1``) for an outage,
    ``store/refused`` for a permission the gateway's Redis user lacks (a deployment's mistake,
    logged as ``redis_refused``)."""
    if isinstance(exc, NoPermissionError):
        from services.log import get_logger

        get_logger("gateway").error("redis_refused", error=str(exc))
        return ApiError(
            Code.STORE_REFUSED,
            "Redis refused the gateway this request: its Redis user lacks a permission "
            "(deploy/redis/users.acl, docs/deploy.md)",
        )
    return ApiError(
        Code.STORE_UNAVAILABLE,
        f"Redis does not answer now ({type(exc).__name__}); send the request again",
        headers={"Retry-After": "1"},
        extra={"retry_after": 1},
    )


class ApiError(CodedError):
    """A rejection the gateway answers at once; ``code`` is a catalogue entry (``engine.codes``),
    ``status`` its status unless given (a code passed on from the worker is its text)."""

    def __init__(
        self,
        code: Code | str,
        message: str,
        *,
        status: int | None = None,
        details: Sequence[Mapping[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = str(code)
        self.message = message
        self.status = status if status is not None else status_of(self.code)
        self.details = [dict(d) for d in details]
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})
        """Fields the body carries beside ``ok``, ``code`` and ``message`` (``retry_after``)."""

    def body(self) -> dict[str, Any]:
        """Return the JSON body of the rejection."""
        body: dict[str, Any] = {"ok": False, "code": self.code, "message": self.message}
        body.update(self.extra)
        if self.details:
            body["details"] = self.details
        return body

    def response(self) -> JSONResponse:
        """Return the HTTP answer of the rejection."""
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers or None)


def from_contract(error: Exception) -> ApiError:
    """Return the ApiError of an ``events`` ContractError (or any error with a ``code``)."""
    code = getattr(error, "code", None)
    if not isinstance(code, str):
        code = Code.COMMAND_INVALID
    message = getattr(error, "message", None) or str(error)
    details = getattr(error, "details", ())
    return ApiError(code, str(message), details=details)


_HTTP_CODES = {
    404: Code.HTTP_NOT_FOUND,
    405: Code.HTTP_METHOD_NOT_ALLOWED,
    413: Code.COMMAND_TOO_LARGE,
}


def install(app: FastAPI) -> None:
    """Answer ApiError, FastAPI's validation errors, Starlette's HTTP errors, the store's
    failures and any other exception (``gateway/error``) in one shape."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return ApiError(Code.COMMAND_MALFORMED_JSON, "the body is not JSON text").response()
        details = [
            {"loc": ".".join(str(p) for p in e.get("loc", ())), "msg": str(e.get("msg", ""))}
            for e in errors[:5]
        ]
        text = "; ".join(f"{d['loc']}: {d['msg']}" for d in details)
        in_query = all(tuple(e.get("loc", ()))[:1] == ("query",) for e in errors)
        code = Code.QUERY_INVALID if in_query else Code.COMMAND_INVALID  # a query holds no command
        return ApiError(code, f"invalid request: {text}", details=details).response()

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, Code.HTTP_ERROR)
        return ApiError(
            code, str(exc.detail), status=exc.status_code, headers=exc.headers
        ).response()

    async def store_failed(_: Request, exc: Exception) -> JSONResponse:
        return store_error(exc).response()

    async def gateway_failed(_: Request, exc: Exception) -> JSONResponse:
        # Anything else is a fault of the gateway (or a refusal Redis gives from inside a
        # script, which comes as a plain ResponseError): logged, and answered in the one shape.
        get_logger("gateway").error("http_failed", error=repr(exc))
        return ApiError(Code.GATEWAY_ERROR, "the gateway failed this request").response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for failure in STORE_ERRORS:  # an outage, a refusal: in the one shape, not a plain-text 500
        app.add_exception_handler(failure, store_failed)
    app.add_exception_handler(Exception, gateway_failed)  # the last resort: 500, not plain text
