"""The HTTP routes: tables, seats, commands, views, events, health and metrics.

A command's route admits it (``services.gateway.admission``: token, rate limits, parse, checks)
and hands it to the intake (``services.gateway.intake``: XADD, wait, answer).  Create and join go
through the command stream like every other command (seat ``""``), so the engine worker stays
the only writer of a table; the gateway only checks, enqueues and waits.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from pydantic import BaseModel

from engine.codes import Code
from engine.secrecy import sees
from services.gateway.admission import MAX_VERSION, check_table_id, version_param
from services.gateway.errors import ApiError
from services.gateway.feed import seal_all
from services.gateway.messages import (
    CommandAnswer,
    CreateTableRequest,
    EventsPage,
    JoinAnswer,
    JoinRequest,
    Rejection,
)
from services.gateway.state import Gateway, gateway_of
from services.tables.stored_parts import viewer_of

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
PENDING: dict[int | str, dict[str, Any]] = {
    202: {"model": CommandAnswer, "description": "still queued"}
}


def json_body(model: type[BaseModel] | str) -> dict[str, Any]:
    """Return ``openapi_extra`` naming the JSON request body (read by hand, not by FastAPI)."""
    name = model if isinstance(model, str) else model.__name__
    schema = {"$ref": f"#/components/schemas/{name}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def token_of(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """Return the bearer token a request presented, None without one."""
    return None if credentials is None else credentials.credentials


async def _existing(gateway: Gateway, table_id: str) -> int:
    """Return the table's version; raise ``table/not_found`` when it has none."""
    check_table_id(table_id)
    head = await gateway.store.head(table_id)
    if head.version == 0:
        raise ApiError(Code.TABLE_NOT_FOUND, f"no table {table_id!r}")
    return head.version


# --- tables and seats ------------------------------------------------------------------------


@router.post(
    "/tables",
    status_code=201,
    response_model=CommandAnswer,
    responses={**REJECTIONS, **PENDING},
    openapi_extra=json_body(CreateTableRequest),
    summary="Create a table",
    tags=["tables"],
)
async def create_table(request: Request) -> JSONResponse:
    """Open a table: rules (a preset name or options), ``deals`` and/or ``target_score``, an
    optional turn clock ``turn_seconds`` and ``bots``.  ``table_id`` (else ``t-`` + 12
    base32 characters) and ``command_id`` are generated when left out; sending the same
    ``command_id`` again returns the same answer."""
    gateway = gateway_of(request)
    command = await gateway.admission.create(request)
    answer = await gateway.intake.submit(command, None)
    return answer.response(command, ok_status=201)


@router.post(
    "/tables/{table_id}/join",
    response_model=JoinAnswer,
    responses={**REJECTIONS, **PENDING},
    openapi_extra=json_body(JoinRequest),
    summary="Take a seat and get its token",
    tags=["tables"],
)
async def join(table_id: str, request: Request) -> JSONResponse:
    """Take seat 0 or 1 (or any free one) under a name; the answer holds the seat's token,
    which every command of the seat presents.  Only the token's hash is stored; a join sent
    again with the same ``command_id`` returns the same seat and token."""
    gateway = gateway_of(request)
    command, key = await gateway.admission.join(request, table_id)
    answer = await gateway.intake.submit(command, None)
    if not answer.ok:  # the client knows its own key, never the derived id
        response = answer.response(command)
        return JSONResponse({**answer.body(command), "command_id": key}, response.status_code)
    seat = answer.result.get("seat")
    if not isinstance(seat, int):
        raise ApiError(Code.COMMAND_FAILED, "the join's result names no seat", status=500)
    body = {
        "ok": True,
        "table_id": table_id,
        "seat": seat,
        "token": gateway.tokens.token(table_id, seat, command.command_id),
        "command_id": key,
        "version": answer.last_version,
    }
    if answer.duplicate:
        body["duplicate"] = True
    return JSONResponse(body)


@router.post(
    "/tables/{table_id}/commands",
    response_model=CommandAnswer,
    responses={**REJECTIONS, **PENDING},
    openapi_extra=json_body("Command"),
    summary="Send a seat's command",
    tags=["play"],
)
async def send_command(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Send a wire command (``events.commands``) for the seat of the bearer token and wait
    for its result.  The command's ``table_id`` must be the table of the URL."""
    gateway = gateway_of(request)
    token = token_of(credentials)
    command, seat = await gateway.admission.seat_command(request, table_id, token)
    answer = await gateway.intake.submit(command, seat)
    return answer.response(command)


# --- reading ---------------------------------------------------------------------------------


async def _view(gateway: Gateway, table_id: str, part: str, min_version: int) -> JSONResponse:
    await _existing(gateway, table_id)
    wait = gateway.settings.result_wait_ms / 1000
    view = await gateway.view_reader.wait(table_id, part, min_version, wait)
    if view is None:
        raise ApiError(
            Code.VIEW_NOT_READY,
            f"table {table_id} has no {part} view yet; try again",
            headers={"Retry-After": "1"},
        )
    return JSONResponse(view)


def same_rule_as_the_socket(request: Request) -> None:
    """Refuse an ``after`` or ``min_version`` that the WebSocket's ``?after=`` refuses
    (``admission.version_param``: digits only): FastAPI's integers also take ``+1`` or `` 1``."""
    for name in ("after", "min_version"):
        version_param(name, request.query_params.get(name))


VERSION_RULE = [Depends(same_rule_as_the_socket)]


MinVersion = Annotated[
    int,
    Query(
        ge=0,
        le=MAX_VERSION,
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
    check_table_id(table_id)
    seat = await gateway.admission.viewer_seat(table_id, token_of(credentials))
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
    after: Annotated[int, Query(ge=0, le=MAX_VERSION)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 500,
) -> JSONResponse:
    """Envelopes of the events after version ``after`` (at most ``limit`` versions), each
    ``hand_dealt`` to its own seat only; ``hash``/``prev_hash`` are null for a deal in play."""
    gateway = gateway_of(request)
    check_table_id(table_id)
    seat = await gateway.admission.viewer_seat(table_id, token_of(credentials))
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
