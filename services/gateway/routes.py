"""The HTTP routes: tables, seats, commands, views, events, health and metrics.

Create and join go through the command stream like every other command (seat ``""``), so the
engine worker stays the only writer of a table; the gateway only checks, enqueues and waits.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import BaseModel
from starlette.requests import HTTPConnection

from engine.codes import Code
from engine.secrecy import sees
from events import commands as wc
from services.gateway import checks, metrics
from services.gateway.errors import ApiError, status_of
from services.gateway.feed import seal_all
from services.gateway.intake import Answer
from services.gateway.messages import (
    CommandAnswer,
    CreateTableRequest,
    EventsPage,
    JoinAnswer,
    JoinRequest,
    Rejection,
)
from services.gateway.state import Gateway, gateway_of
from services.view_parts import viewer_of

router = APIRouter()
bearer_scheme = HTTPBearer(auto_error=False, description="The seat token a join returned")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)]

REJECTIONS: dict[int | str, dict[str, Any]] = {
    status: {"model": Rejection, "description": text}
    for status, text in (
        (400, "malformed JSON (command/malformed_json)"),
        (401, "no seat token, or not a seat's on this table (seat/bad_token)"),
        (403, "only a seat may do this (seat/required)"),
        (404, "no such table (table/not_found)"),
        (409, "refused by the table: move/*, table/exists, table/full, seat/taken, …"),
        (413, "larger than 8 KiB (command/too_large)"),
        (422, "unknown type or invalid fields (command/unknown_type, command/invalid, …)"),
        (429, "too many requests from this seat or address (rate/limited, Retry-After)"),
        (503, "Redis away (store/unavailable) or no view yet (view/not_ready): Retry-After"),
    )
}


def _body(model: type[BaseModel] | str) -> dict[str, Any]:
    """Return ``openapi_extra`` naming the JSON request body (read by hand, not by FastAPI)."""
    name = model if isinstance(model, str) else model.__name__
    schema = {"$ref": f"#/components/schemas/{name}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


# --- helpers ---------------------------------------------------------------------------------


async def _seat(
    gateway: Gateway, table_id: str, credentials: HTTPAuthorizationCredentials | None, needed: bool
) -> int | None:
    """Return the seat of the presented token, None for no token when none is needed."""
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        if needed:
            raise ApiError(
                Code.SEAT_BAD_TOKEN,
                "send the seat's token as 'Authorization: Bearer <token>'",
                headers=challenge,
            )
        return None
    seat = await gateway.auth.seat_of(table_id, credentials.credentials)
    if seat is None:
        message = "the token is no seat's on this table"
        raise ApiError(Code.SEAT_BAD_TOKEN, message, headers=challenge)
    return seat


async def submit(gateway: Gateway, command: wc.CommandModel, seat: int | None) -> Answer:
    """Enqueue a checked command, wait for its result, count and log it."""
    started = time.perf_counter()
    answer = await gateway.intake.submit(command, seat)
    kind = str(type(command).model_fields["type"].default)
    outcome = "pending" if answer.pending else "ok" if answer.ok else "rejected"
    metrics.COMMANDS.labels(kind, outcome).inc()
    metrics.COMMAND_SECONDS.observe(time.perf_counter() - started)
    gateway.log.info(
        "command",
        table=command.table_id,
        seat=seat,
        command_id=command.command_id,
        type=kind,
        outcome=outcome,
        code=answer.code,
        duplicate=answer.duplicate,
        version=answer.last_version,
    )
    return answer


def answer_response(answer: Answer, command: wc.CommandModel, ok_status: int = 200) -> JSONResponse:
    """Return the HTTP answer of a command: ok_status, 202 pending, or its code's status."""
    if answer.pending:
        status = 202
    elif answer.ok:
        status = ok_status
    else:
        status = status_of(answer.code or Code.COMMAND_FAILED)
    return JSONResponse(answer.body(command), status_code=status)


def refused(kind: str) -> None:
    """Count a command the gateway refused before enqueueing it."""
    metrics.COMMANDS.labels(kind, "refused").inc()


def client_address(connection: HTTPConnection) -> str | None:
    """The client's address as the server saw it (the proxy's, unless uvicorn trusts its
    forwarding headers)."""
    return connection.client.host if connection.client else None


def rate_limit(gateway: Gateway, connection: HTTPConnection, *, creates: bool = False) -> None:
    """Count a create, join or command of the client's address; raise ``rate/limited``."""
    if gateway.limits is not None:
        gateway.limits.request(client_address(connection), creates=creates)


def seat_rate_limit(
    gateway: Gateway, connection: HTTPConnection, table_id: str, seat: int | None
) -> None:
    """Count a command of a seat; raise ``rate/limited``."""
    if gateway.limits is not None and seat is not None:
        gateway.limits.command(table_id, seat, client_address(connection))


def refuse_if_archived(gateway: Gateway, table_id: str, code: Code) -> None:
    """Refuse a command to a table that is in the archive (its match is over) with the code
    the engine worker gives it while the table is in Redis: the worker, which knows Redis
    alone, would take the archived table for a missing one (``docs/archive.md``)."""
    if not gateway.is_archived(table_id):
        return
    messages = {
        Code.TABLE_EXISTS: f"table {table_id!r} already exists (its match is over)",
        Code.TABLE_FULL: f"table {table_id} has no free seat (its match is over)",
        Code.MOVE_MATCH_OVER: f"the match of table {table_id} is over",
    }
    raise ApiError(code, messages[code])


async def _existing(gateway: Gateway, table_id: str) -> int:
    """Return the table's version; raise ``table/not_found`` when it has none."""
    checks.check_table_id(table_id)
    head = await gateway.store.head(table_id)
    if head.version == 0:
        raise ApiError(Code.TABLE_NOT_FOUND, f"no table {table_id!r}")
    return head.version


# --- tables and seats ------------------------------------------------------------------------


@router.post(
    "/tables",
    status_code=201,
    response_model=CommandAnswer,
    responses={**REJECTIONS, 202: {"model": CommandAnswer, "description": "still queued"}},
    openapi_extra=_body(CreateTableRequest),
    summary="Create a table",
    tags=["tables"],
)
async def create_table(request: Request) -> JSONResponse:
    """Open a table: rules (a preset name or options), ``deals`` and/or ``target_score``, an
    optional turn clock ``turn_seconds`` and ``bots``.  ``table_id`` (else ``t-`` + 12
    base32 characters) and ``command_id`` are generated when left out; sending the same
    ``command_id`` again returns the same answer."""
    gateway = gateway_of(request)
    try:
        rate_limit(gateway, request, creates=True)
        data = checks.json_object(await request.body())
        data["type"] = "create_table"
        if data.get("table_id") is None:
            data["table_id"] = checks.new_table_id()
        if data.get("command_id") is None:
            data["command_id"] = checks.new_command_id()
        command = checks.parse(data)
        refuse_if_archived(gateway, command.table_id, Code.TABLE_EXISTS)
    except ApiError:
        refused("create_table")
        raise
    answer = await submit(gateway, command, None)
    return answer_response(answer, command, ok_status=201)


@router.post(
    "/tables/{table_id}/join",
    response_model=JoinAnswer,
    responses={**REJECTIONS, 202: {"model": CommandAnswer, "description": "still queued"}},
    openapi_extra=_body(JoinRequest),
    summary="Take a seat and get its token",
    tags=["tables"],
)
async def join(table_id: str, request: Request) -> JSONResponse:
    """Take seat 0 or 1 (or any free one) under a name; the answer holds the seat's token,
    which every command of the seat presents.  Only the token's hash is stored; a join sent
    again with the same ``command_id`` returns the same seat and token."""
    gateway = gateway_of(request)
    try:
        rate_limit(gateway, request)
        checks.check_table_id(table_id)
        data = checks.json_object(await request.body())
        key = data.pop("command_id", None)
        key = checks.new_command_id() if key is None else checks.check_command_id(key)
        data["type"] = "join"
        data["table_id"] = table_id
        data["command_id"] = gateway.auth.join_command_id(table_id, key)
        command = checks.parse(data)
        refuse_if_archived(gateway, table_id, Code.TABLE_FULL)
    except ApiError:
        refused("join")
        raise
    answer = await submit(gateway, command, None)
    if not answer.ok:  # the client knows its own key, never the derived id
        response = answer_response(answer, command)
        return JSONResponse({**answer.body(command), "command_id": key}, response.status_code)
    seat = answer.result.get("seat")
    if not isinstance(seat, int):
        raise ApiError(Code.COMMAND_FAILED, "the join's result names no seat", status=500)
    body = {
        "ok": True,
        "table_id": table_id,
        "seat": seat,
        "token": gateway.auth.token(table_id, seat, command.command_id),
        "command_id": key,
        "version": answer.last_version,
    }
    if answer.duplicate:
        body["duplicate"] = True
    return JSONResponse(body)


@router.post(
    "/tables/{table_id}/commands",
    response_model=CommandAnswer,
    responses={**REJECTIONS, 202: {"model": CommandAnswer, "description": "still queued"}},
    openapi_extra=_body("Command"),
    summary="Send a seat's command",
    tags=["play"],
)
async def send_command(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Send a wire command (``events.commands``) for the seat of the bearer token and wait
    for its result.  The command's ``table_id`` must be the table of the URL."""
    gateway = gateway_of(request)
    try:
        rate_limit(gateway, request)
        checks.check_table_id(table_id)
        seat = await _seat(gateway, table_id, credentials, needed=True)
        seat_rate_limit(gateway, request, table_id, seat)
        command = checks.seat_command(await request.body(), table_id)
        refuse_if_archived(gateway, table_id, Code.MOVE_MATCH_OVER)
    except ApiError:
        refused("unknown")
        raise
    answer = await submit(gateway, command, seat)
    return answer_response(answer, command)


# --- reading ---------------------------------------------------------------------------------


async def _view(gateway: Gateway, table_id: str, part: str, min_version: int) -> JSONResponse:
    await _existing(gateway, table_id)
    wait = gateway.settings.result_wait_ms / 1000
    view = await gateway.views.wait(table_id, part, min_version, wait)
    if view is None:
        raise ApiError(
            Code.VIEW_NOT_READY,
            f"table {table_id} has no {part} view yet; try again",
            headers={"Retry-After": "1"},
        )
    return JSONResponse(view)


def same_rule_as_the_socket(request: Request) -> None:
    """Refuse an ``after`` or ``min_version`` that the WebSocket's ``?after=`` refuses
    (``checks.version_param``: digits only): FastAPI's integers also take ``+1`` or `` 1``."""
    for name in ("after", "min_version"):
        checks.version_param(name, request.query_params.get(name))


VERSION_RULE = [Depends(same_rule_as_the_socket)]


MinVersion = Annotated[
    int,
    Query(
        ge=0,
        le=checks.MAX_VERSION,
        description="wait (up to the result wait) for a view built to at least this version, "
        "e.g. the version a command answered with",
    ),
]


@router.get(
    "/tables/{table_id}",
    summary="The public view of a table",
    tags=["views"],
    responses=REJECTIONS,
    dependencies=VERSION_RULE,
)
async def public_view(table_id: str, request: Request, min_version: MinVersion = 0) -> JSONResponse:
    """What everyone sees: tables, centre card, counts, scores, phase, seats."""
    return await _view(gateway_of(request), table_id, "public", min_version)


@router.get(
    "/tables/{table_id}/view",
    summary="The view of a seat, or of a spectator",
    tags=["views"],
    responses=REJECTIONS,
    dependencies=VERSION_RULE,
)
async def seat_view(
    table_id: str, request: Request, credentials: Credentials, min_version: MinVersion = 0
) -> JSONResponse:
    """The seat's view (its own hand, its legal actions when it acts) with its token; the
    spectator view (public cards only) without one."""
    gateway = gateway_of(request)
    checks.check_table_id(table_id)
    seat = await _seat(gateway, table_id, credentials, needed=False)
    return await _view(gateway, table_id, viewer_of(seat), min_version)


@router.get(
    "/tables/{table_id}/events",
    response_model=EventsPage,
    responses=REJECTIONS,
    summary="The events a seat (or a spectator) may see",
    tags=["views"],
    dependencies=VERSION_RULE,
)
async def events(
    table_id: str,
    request: Request,
    credentials: Credentials,
    after: Annotated[int, Query(ge=0, le=checks.MAX_VERSION)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> JSONResponse:
    """Envelopes of the events after version ``after`` (at most ``limit`` versions), each
    ``hand_dealt`` to its own seat only; ``hash``/``prev_hash`` are null for a deal in play."""
    gateway = gateway_of(request)
    checks.check_table_id(table_id)
    seat = await _seat(gateway, table_id, credentials, needed=False)
    version = await _existing(gateway, table_id)
    upto = min(after + limit, version)
    stored = await gateway.store.read(table_id, after + 1, upto) if upto > after else []
    open_from = await gateway.tracker.open_at(table_id, version)
    visible = [e.envelope for e in seal_all(stored, open_from) if sees(seat, e.owner)]
    page = {
        "table_id": table_id,
        "seat": seat,
        "version": version,
        "next_after": stored[-1].version if stored else after,
        "events": visible,
    }
    return JSONResponse(page)


# --- operations ------------------------------------------------------------------------------


@router.get("/healthz", tags=["operations"], summary="The process is up")
async def healthz() -> dict[str, bool]:
    """Answers as long as the process serves requests."""
    return {"ok": True}


@router.get("/readyz", tags=["operations"], summary="Redis answers")
async def readyz(request: Request) -> JSONResponse:
    """200 when Redis answers PING within 2 s (and says whether the hint listener is on)."""
    gateway = gateway_of(request)
    try:
        await asyncio.wait_for(gateway.redis.ping(), 2.0)
    except Exception as exc:  # the documented 503 of an outage, as the other routes answer
        error = ApiError(
            Code.STORE_UNAVAILABLE,
            f"Redis does not answer now ({type(exc).__name__})",
            headers={"Retry-After": "1"},
        )
        return JSONResponse(
            {**error.body(), "redis": False}, status_code=503, headers=error.headers
        )
    return JSONResponse({"ok": True, "redis": True, "hints": gateway.hub.subscribed.is_set()})


@router.get(
    "/metrics",
    tags=["operations"],
    summary="Prometheus metrics",
    response_class=PlainTextResponse,  # the document says text, as the answer is
)
async def prometheus() -> Response:
    """The process's metrics (the gateway's, and any worker's or projector's beside it)."""
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
