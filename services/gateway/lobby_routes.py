"""The lobby's routes: list the tables, resign (``docs/api.md``, "Lobby").

Resign is a seat command like those of ``POST /tables/{id}/commands`` (token, checks, the
command stream, the recorded result), under a route of its own.
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
    SeatActionRequest,
)
from services.gateway.routes import (
    REJECTIONS,
    Credentials,
    _body,
    _seat,
    answer_response,
    refuse_if_archived,
    refused,
    submit,
)
from services.gateway.state import Gateway, gateway_of

router = APIRouter()

_PENDING = {202: {"model": CommandAnswer, "description": "still queued"}}


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
        seat = await _seat(gateway, table_id, credentials, needed=True)
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
        refuse_if_archived(gateway, table_id, "move/match_over")
    except ApiError:
        refused(kind)
        raise
    assert seat is not None  # needed=True
    return gateway, command, seat


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
