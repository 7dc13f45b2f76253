"""Rejections as HTTP answers: one body shape, and the status of each stable code.

Every rejection, whoever makes it (the gateway checking input, the engine worker deciding a
command), is ``{"ok": false, "code": "<area>/<what>", "message": "...", ...}``.  The HTTP status
follows the code: an exact entry of :data:`STATUS_BY_CODE` first, else the code's family in
:data:`STATUS_BY_FAMILY`, else 400.  ``docs/api.md`` lists the table.
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

UNAVAILABLE: tuple[type[Exception], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    ClusterDownError,
    TryAgainError,
)
"""What Redis raises while it is away, loading its AOF or failing over: ``store/unavailable``."""

STATUS_BY_CODE: dict[str, int] = {
    "command/malformed_json": 400,
    "command/too_large": 413,
    "command/unknown_type": 422,
    "command/invalid": 422,
    "command/wrong_table": 422,
    "command/unsupported": 422,
    "command/stale_version": 409,
    "command/id_taken": 409,
    "command/failed": 500,
    "store/unavailable": 503,
    "store/refused": 500,
    "query/invalid": 422,
    "rate/limited": 429,
    "seat/bad_token": 401,
    "seat/required": 403,
    "seat/taken": 409,
    "table/invalid_id": 422,
    "table/not_found": 404,
    "table/exists": 409,
    "table/unknown_bot": 422,
    "table/full": 409,
    "table/not_full": 409,
    "table/busy": 503,
    "view/not_ready": 503,
    "notation/invalid": 422,
    "rematch/conflict": 409,
}
"""Codes whose status is not their family's."""

STATUS_BY_FAMILY: dict[str, int] = {
    "move": 409,  # the rules refuse it in this position: a conflict with the table's state
    "engine": 409,
    "command": 400,
    "seat": 403,
    "table": 409,
    "view": 503,
    "store": 422,
    "http": 400,
}
"""Status of a code by the part before the slash."""


def status_of(code: str) -> int:
    """Return the HTTP status of a rejection code."""
    if code in STATUS_BY_CODE:
        return STATUS_BY_CODE[code]
    return STATUS_BY_FAMILY.get(code.partition("/")[0], 400)


class ApiError(Exception):
    """A rejection the gateway answers at once; ``code`` is stable, ``status`` follows it."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        details: Sequence[Mapping[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else status_of(code)
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
        code = "command/invalid"
    message = getattr(error, "message", None) or str(error)
    details = getattr(error, "details", ())
    return ApiError(code, str(message), details=details)


_HTTP_CODES = {
    404: "http/not_found",
    405: "http/method_not_allowed",
    413: "command/too_large",
}


def install(app: FastAPI) -> None:
    """Answer ApiError, FastAPI's validation errors and Starlette's HTTP errors in one shape."""

    async def api_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = list(exc.errors())
        if any(e.get("type") == "json_invalid" for e in errors):
            return ApiError("command/malformed_json", "the body is not JSON text").response()
        details = [
            {"loc": ".".join(str(p) for p in e.get("loc", ())), "msg": str(e.get("msg", ""))}
            for e in errors[:5]
        ]
        text = "; ".join(f"{d['loc']}: {d['msg']}" for d in details)
        in_query = all(tuple(e.get("loc", ()))[:1] == ("query",) for e in errors)
        code = "query/invalid" if in_query else "command/invalid"  # a query holds no command
        return ApiError(code, f"invalid request: {text}", details=details).response()

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http/error")
        return ApiError(
            code, str(exc.detail), status=exc.status_code, headers=exc.headers
        ).response()

    async def store_unavailable(_: Request, exc: Exception) -> JSONResponse:
        return ApiError(
            "store/unavailable",
            f"Redis does not answer now ({type(exc).__name__}); send the request again",
            headers={"Retry-After": "1"},
        ).response()

    async def store_refused(_: Request, exc: Exception) -> JSONResponse:
        from services.log import get_logger

        get_logger("gateway").error("redis_refused", error=str(exc))
        return ApiError(
            "store/refused",
            "Redis refused the gateway this request: its Redis user lacks a permission "
            "(deploy/redis/users.acl, docs/deploy.md)",
        ).response()

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(NoPermissionError, store_refused)  # a deployment's ACL, not input
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for unavailable in UNAVAILABLE:  # an outage: 503 in the one shape, not a plain-text 500
        app.add_exception_handler(unavailable, store_unavailable)
