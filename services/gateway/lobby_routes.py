"""The lobby's routes: list the tables, leave a seat, resign, rematch (``docs/api.md``, "Lobby").

Leave, resign and rematch are seat commands like those of ``POST /tables/{id}/commands``
(admitted by ``services.gateway.admission``, answered by ``services.gateway.intake``); the
rematch route then opens the rematch's table (``services.gateway.rematch``) once both seats
agreed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from engine.codes import Code
from services.gateway.errors import ApiError
from services.gateway.messages import (
    CommandAnswer,
    LobbyPage,
    Rejection,
    RematchAnswer,
    SeatActionRequest,
)
from services.gateway.rematch import next_table_id, open_rematch
from services.gateway.routes import PENDING, REJECTIONS, Credentials, json_body, token_of
from services.gateway.state import gateway_of
from services.lobby import listing

router = APIRouter()


@router.get(
    "/tables",
    response_model=LobbyPage,
    responses={422: {"model": Rejection, "description": "a bad query (query/invalid)"}},
    summary="The lobby: tables waiting for a player, or running ones to watch",
    tags=["lobby"],
)
async def list_tables(
    request: Request,
    status: Annotated[Literal["waiting", "running"], Query()] = "waiting",
    limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT)] = 20,
    cursor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> JSONResponse:
    """``waiting``: a free seat and no deal started; ``running``: both seats taken and the
    match not over.  Newest first; ``next_cursor`` (null on the last page) gives the next page,
    which tables created meanwhile do not shift."""
    gateway = gateway_of(request)
    try:
        body = await listing.page(gateway.redis, gateway.settings.keys, status, limit, cursor)
    except listing.BadCursor as exc:
        raise ApiError(Code.QUERY_INVALID, str(exc)) from None
    return JSONResponse(body)


@router.post(
    "/tables/{table_id}/leave",
    response_model=CommandAnswer,
    responses={**REJECTIONS, **PENDING},
    openapi_extra=json_body(SeatActionRequest),
    summary="Give the seat up before the first deal",
    tags=["lobby"],
)
async def leave_table(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Free the token's seat (a ``leave_table`` command): the token stops working and another
    player may join.  Only before the first deal; after it, 409 ``table/started``."""
    gateway = gateway_of(request)
    token = token_of(credentials)
    command, seat = await gateway.admission.seat_action(request, table_id, token, "leave_table")
    return (await gateway.intake.submit(command, seat)).response(command)


@router.post(
    "/tables/{table_id}/resign",
    response_model=CommandAnswer,
    responses={**REJECTIONS, **PENDING},
    openapi_extra=json_body(SeatActionRequest),
    summary="Resign the match",
    tags=["lobby"],
)
async def resign(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Concede (a ``resign`` command): the same answer as sending ``{"type": "resign"}`` to
    ``POST /tables/{id}/commands``."""
    gateway = gateway_of(request)
    token = token_of(credentials)
    command, seat = await gateway.admission.seat_action(request, table_id, token, "resign")
    return (await gateway.intake.submit(command, seat)).response(command)


@router.post(
    "/tables/{table_id}/rematch",
    response_model=RematchAnswer,
    responses={**REJECTIONS, **PENDING},
    openapi_extra=json_body(SeatActionRequest),
    summary="Agree to a rematch, and get this seat's token at its table",
    tags=["lobby"],
)
async def rematch(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Once the match is over: record this seat's agreement; when both seats agreed (a bot at
    once), the rematch's table is opened with the same rules, match length, turn clock, names
    and bots, and each seat asking (again: idempotent) gets its token there."""
    gateway = gateway_of(request)
    new_id = next_table_id(gateway.tokens, table_id)
    command, seat = await gateway.admission.seat_action(
        request, table_id, token_of(credentials), "rematch", next_table_id=new_id
    )
    answer = await gateway.intake.submit(command, seat)
    if not answer.ok:
        return answer.response(command)
    state = answer.result.get("rematch") or {}
    opened = state.get("table_id")
    body: dict[str, Any] = {
        "ok": True,
        "table_id": table_id,
        "seat": seat,
        "command_id": command.command_id,
        "version": answer.last_version,
        "rematch": {"agreed": state.get("agreed", []), "table_id": opened, "token": None},
    }
    body["rematch"]["seat"] = None
    if isinstance(opened, str):
        token = await open_rematch(gateway, table_id, opened, seat, answer.last_version or 0)
        body["rematch"].update(token=token, seat=seat)
    return JSONResponse(body)
