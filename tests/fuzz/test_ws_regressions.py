"""Defects the WebSocket fuzzer found, each pinned by the frame that showed it."""

from __future__ import annotations

from fuzz_stack import Tables

from services.gateway.testing import Listener, Stack


async def test_a_lone_surrogate_in_a_command_id_gets_a_result_not_a_dropped_socket(
    stack: Stack, tables: Tables
) -> None:
    """``"command_id": "\\ud800…"`` is valid JSON whose string no UTF-8 text holds: the
    rejection echoed it, the socket's writer died encoding it, and the socket dropped without a
    close code.  Now the rejection comes without the unsendable id, and the socket stays open."""
    token = tables.token(tables.play, 0)
    url = f"{stack.ws_base}/tables/{tables.play}/ws?token={token}"
    async with Listener(url) as socket:
        await socket.wait_for(lambda m: m["kind"] == "view")
        for raw in (
            '{"kind": "command", "command": {"command_id": "\\ud800-surrogate"}}',
            '{"kind": "command", "command": {"type": "turn", "table_id": "fz-play",'
            ' "command_id": "fz-\\udfff-lone"}}',
        ):
            start = len(socket.messages)
            await socket._socket.send(raw)
            reply = await socket.wait_for(lambda m: m["kind"] == "result", start=start)
            assert reply["ok"] is False and "command_id" not in reply, reply
            assert reply["code"] == "command/malformed_json", reply  # no UTF-8 text: no JSON
        start = len(socket.messages)
        await socket._socket.send('{"kind": "command", "command": {"command_id": "fz-ok-echo"}}')
        reply = await socket.wait_for(lambda m: m["kind"] == "result", start=start)
        assert reply["command_id"] == "fz-ok-echo" and not socket.closed
