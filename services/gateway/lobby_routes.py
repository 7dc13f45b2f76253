"""The lobby's routes: list the tables, leave a seat, resign, rematch (``docs/api.md``, "Lobby").

Leave, resign and rematch are seat commands like those of ``POST /tables/{id}/commands``
(token, checks, the command stream, the recorded result); the rematch route then opens the
rematch's table (``services.gateway.rematch``) once both seats agreed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from events import commands as wc
from services import lobby
from services.gateway import checks
from services.gateway.errors import ApiError
from services.gateway.messages import (
    CommandAnswer,
    LobbyPage,
    Rejection,
    RematchAnswer,
    SeatActionRequest,
)
from services.gateway.rematch import next_table_id, open_rematch
from services.gateway.routes import (
    REJECTIONS,
    Credentials,
    _body,
    _seat,
    answer_response,
    rate_limit,
    refuse_if_archived,
    refused,
    seat_rate_limit,
    submit,
)
from services.gateway.state import Gateway, gateway_of

router = APIRouter()

_PENDING: dict[int | str, dict[str, Any]] = {
    202: {"model": CommandAnswer, "description": "still queued"}
}


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
    limit: Annotated[int, Query(ge=1, le=lobby.MAX_LIMIT)] = 20,
    cursor: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
) -> JSONResponse:
    """``waiting``: a free seat and no deal started; ``running``: both seats taken and the
    match not over.  Newest first; ``next_cursor`` (null on the last page) gives the next page,
    which tables created meanwhile do not shift."""
    gateway = gateway_of(request)
    try:
        body = await lobby.page(gateway.redis, gateway.settings.keys, status, limit, cursor)
    except lobby.BadCursor as exc:
        raise ApiError("query/invalid", str(exc)) from None
    return JSONResponse(body)


async def _seat_command(
    request: Request,
    table_id: str,
    credentials: Any,
    kind: str,
    **fields: Any,
) -> tuple[Gateway, wc.Command, int]:
    """Check a seat's request to a route of one command ``kind`` and return the command.

    The body is optional: ``command_id`` (generated when left out) and ``expected_version``.
    """
    gateway = gateway_of(request)
    try:
        checks.check_table_id(table_id)
        rate_limit(gateway, request)  # counted as POST /commands counts a seat's command
        seat = await _seat(gateway, table_id, credentials, needed=True)
        seat_rate_limit(gateway, request, table_id, seat)
        data = checks.json_object(await request.body())
        data.update(type=kind, **fields)
        data.setdefault("table_id", table_id)
        if data.get("command_id") is None:
            data["command_id"] = checks.new_command_id()
        command = checks.parse(data)
        if command.table_id != table_id:
            raise ApiError(
                "command/wrong_table",
                f"the command is for table {command.table_id!r}, sent to table {table_id!r}",
            )
        if kind == "rematch" and gateway.is_archived(table_id):
            raise ApiError(
                "table/archived",
                f"table {table_id} has left Redis for the archive: too late for a rematch",
            )
        refuse_if_archived(gateway, table_id, "move/match_over")
    except ApiError:
        refused(kind)
        raise
    assert seat is not None  # needed=True
    return gateway, command, seat


@router.post(
    "/tables/{table_id}/leave",
    response_model=CommandAnswer,
    responses={**REJECTIONS, **_PENDING},
    openapi_extra=_body(SeatActionRequest),
    summary="Give the seat up before the first deal",
    tags=["lobby"],
)
async def leave_table(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Free the token's seat (a ``leave_table`` command): the token stops working and another
    player may join.  Only before the first deal; after it, 409 ``table/started``."""
    gateway, command, seat = await _seat_command(request, table_id, credentials, "leave_table")
    return answer_response(await submit(gateway, command, seat), command)


@router.post(
    "/tables/{table_id}/resign",
    response_model=CommandAnswer,
    responses={**REJECTIONS, **_PENDING},
    openapi_extra=_body(SeatActionRequest),
    summary="Resign the match",
    tags=["lobby"],
)
async def resign(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Concede (a ``resign`` command): the same answer as sending ``{"type": "resign"}`` to
    ``POST /tables/{id}/commands``."""
    gateway, command, seat = await _seat_command(request, table_id, credentials, "resign")
    return answer_response(await submit(gateway, command, seat), command)


@router.post(
    "/tables/{table_id}/rematch",
    response_model=RematchAnswer,
    responses={**REJECTIONS, **_PENDING},
    openapi_extra=_body(SeatActionRequest),
    summary="Agree to a rematch, and get this seat's token at its table",
    tags=["lobby"],
)
async def rematch(table_id: str, request: Request, credentials: Credentials) -> JSONResponse:
    """Once the match is over: record this seat's agreement; when both seats agreed (a bot at
    once), the rematch's table is opened with the same rules, match length, turn clock, names
    and bots, and each seat asking (again: idempotent) gets its token there."""
    gateway = gateway_of(request)
    new_id = next_table_id(gateway, table_id)
    gateway, command, seat = await _seat_command(
        request, table_id, credentials, "rematch", next_table_id=new_id
    )
    answer = await submit(gateway, command, seat)
    if not answer.ok:
        return answer_response(answer, command)
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
