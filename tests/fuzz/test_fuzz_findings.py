"""Defects the fuzzers found, each pinned by the input that showed it."""

from __future__ import annotations

from fuzz_stack import Tables

from tests.services.gateway_stack import Listener, Stack


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


async def test_a_version_written_unlike_digits_is_refused_on_http_as_on_the_socket(
    stack: Stack, tables: Tables
) -> None:
    """``?after=+1`` (or `` 1``): HTTP's integer parameters took it, the socket refused it with
    4422 (issue 18, 1f: the same parameter, the same rule).  Now HTTP refuses it too."""
    for query in (
        "events?after=+1",
        "events?after=%201",
        "view?min_version=+1",
        "?min_version=1%20",
    ):
        path = f"/tables/{tables.play}/{query}".replace("/?", "?")
        response = await stack.http.get(path)
        assert response.status_code == 422, (query, response.text)
        assert response.json()["code"] == "query/invalid", (query, response.text)
    fine = await stack.http.get(f"/tables/{tables.play}/events", params={"after": "007"})
    assert fine.status_code == 200 and fine.json()["next_after"] >= 7
