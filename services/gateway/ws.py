"""The WebSocket of a table: a seat's (or a spectator's) events and views, live, with resume.

``GET /tables/{table_id}/ws?token=<seat token>&after=<last version seen>``; the messages and
close codes are in ``docs/api.md``.  A command sent on the socket takes the path of
``POST /tables/{id}/commands``: ``services.gateway.admission``, then ``services.gateway.intake``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from engine.codes import Code, close_of
from services.gateway import metrics
from services.gateway.admission import bearer, check_table_id, client_address, version_param
from services.gateway.errors import STORE_ERRORS, ApiError, store_error
from services.gateway.live import Connection
from services.gateway.state import Gateway, gateway_of
from services.tasks import cancel_and_wait

router = APIRouter()

CLOSE_NOT_FOUND = close_of(Code.TABLE_NOT_FOUND, 4404)
"""The close code of a refusal to open the socket whose code has no close code of its own."""
CLOSE_INTERNAL = close_of(Code.GATEWAY_ERROR, 4500)
"""The close code of a socket the gateway cannot serve (a store refusal, a fault of its own)."""


@router.websocket("/tables/{table_id}/ws")
async def table_socket(
    websocket: WebSocket, table_id: str, token: str | None = None, after: str | None = None
) -> None:
    """Stream a seat's (or a spectator's) events and views; take the seat's commands."""
    gateway = gateway_of(websocket)
    await websocket.accept()
    token = token or bearer(websocket.headers.get("authorization"))
    try:
        resume = version_param("after", after)  # the rule of HTTP's ?after=
    except ApiError as error:
        await _refuse(websocket, error, close_of(error.code, CLOSE_NOT_FOUND))
        return
    try:
        check_table_id(table_id)
        head = await gateway.store.head(table_id)
        if head.version == 0:
            raise ApiError(Code.TABLE_NOT_FOUND, f"no table {table_id!r}")
        seat = await gateway.admission.viewer_seat(table_id, token)
        connection = Connection(seat)
        room = await gateway.rooms.enter(table_id, connection, resume)
    except ApiError as error:
        await _refuse(websocket, error, close_of(error.code, CLOSE_NOT_FOUND))
        return
    except STORE_ERRORS as failure:  # Redis away, or every connection out: try again later
        refusal = store_error(failure)
        await _refuse(websocket, refusal, close_of(refusal.code, CLOSE_INTERNAL))
        return
    log = gateway.log.bind(table=table_id, seat=seat)
    log.info("ws_open", after=resume)
    writer = asyncio.create_task(_write(websocket, connection))
    reader = asyncio.create_task(_read(websocket, gateway, table_id, token, seat, connection))
    try:
        done, _ = await asyncio.wait({writer, reader}, return_when=asyncio.FIRST_COMPLETED)
        failed = [t.exception() for t in done if not t.cancelled() and t.exception() is not None]
        if failed and not isinstance(failed[0], WebSocketDisconnect):
            # a fault of this gateway: said and logged, not a connection dropped unannounced
            log.error("ws_failed", error=repr(failed[0]))
            fault = ApiError(Code.GATEWAY_ERROR, "the gateway failed this socket: reconnect")
            await _refuse(websocket, fault, CLOSE_INTERNAL)
    finally:
        for task in (writer, reader):
            with contextlib.suppress(Exception):
                await cancel_and_wait(task)
        await gateway.rooms.leave(room, connection)
        log.info("ws_close", dropped=connection.dropped, cursor=connection.cursor)


async def _refuse(websocket: WebSocket, error: ApiError, code: int) -> None:
    with contextlib.suppress(Exception):
        await websocket.send_json({"kind": "error", "code": error.code, "message": error.message})
        await websocket.close(code=code, reason=error.code)


async def _write(websocket: WebSocket, connection: Connection) -> None:
    """Send the connection's queued messages; close when it fell too far behind."""
    while True:
        message = await connection.queue.get()
        if message is None:
            await websocket.send_json(
                {"kind": "error", "code": connection.close_error, "message": connection.dropped}
            )
            await websocket.close(code=connection.close_code, reason=connection.close_error)
            return
        await websocket.send_text(json.dumps(message, separators=(",", ":"), ensure_ascii=False))
        metrics.WS_MESSAGES.labels(str(message.get("kind"))).inc()


async def _read(
    websocket: WebSocket,
    gateway: Gateway,
    table_id: str,
    token: str | None,
    seat: int | None,
    connection: Connection,
) -> None:
    """Take the client's messages until it goes away; answer each command with its result."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                text = (message.get("bytes") or b"").decode("utf-8", "replace")
            address = client_address(websocket)
            connection.command_sent()
            connection.command_answered(
                await _answer(gateway, table_id, token, seat, text, address)
            )


def _is_text(value: str) -> bool:
    """Say whether a string can go out in a text frame: JSON's ``\\ud800`` escape decodes to a
    lone surrogate, which no UTF-8 text holds (echoed, it killed the socket's writer)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def _answer(
    gateway: Gateway,
    table_id: str,
    token: str | None,
    seat: int | None,
    raw: str,
    address: str | None,
) -> dict[str, Any]:
    """Admit and submit one client message; return the ``result`` message answering it."""
    command_id: Any = None
    try:
        data = gateway.admission.socket_message(raw)
        command_id = data.get("command_id")
        command = await gateway.admission.socket_command(table_id, token, seat, data, address)
        answer = await gateway.intake.submit(command, seat)
    except ApiError as error:
        return _refused(error, table_id, command_id)
    except STORE_ERRORS as failure:  # as HTTP answers it: store/unavailable, and the socket stays
        return _refused(store_error(failure), table_id, command_id)
    return {"kind": "result", **answer.body(command)}


def _refused(error: ApiError, table_id: str, command_id: Any) -> dict[str, Any]:
    reply = {"kind": "result", **error.body(), "table_id": table_id}
    if isinstance(command_id, str) and _is_text(command_id):
        reply["command_id"] = command_id
    return reply
