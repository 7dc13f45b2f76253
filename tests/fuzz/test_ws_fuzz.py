"""Hypothesis over the frames a client sends on a table's WebSocket, against the served stack.

A seat's socket on ``fz-play`` (and a spectator's beside it) gets one generated frame per example
(``fuzz_payloads.frames``): command messages (most well formed, some broken), any JSON, wrong
kinds, deep nesting, frames over the command limit and over the socket's, binary frames, text
frames that are not UTF-8.  Every frame gets

* a ``result``: an accepted command, or a documented rejection; after a rejection the table did
  not move; or
* a close with a documented code (docs/api.md): 1009 for a frame over the socket's 64 KiB, 1007
  for a text frame that is not UTF-8.  Never a close without a code, never 1011 (a server
  error); the client then connects again.

No message on either socket shows its viewer a card hidden from it (``fuzz_truth``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fuzz_checks import check_rejection
from fuzz_payloads import CORPUS, Frame, frames
from fuzz_stack import Tables, examples
from fuzz_truth import Secrets, Truth, leaks
from hypothesis import given
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from engine.codes import Code
from tests.services.gateway_stack import Stack

pytestmark = pytest.mark.fuzz

EXAMPLES = 150
ANSWER_WAIT = 20.0
"""Seconds a frame may go without its result or close (a loaded machine, never a failure)."""
CLOSES = {"large": {1009}, "not_utf8": {1007}}
"""The close codes a frame of each kind may get (docs/api.md, "Close codes"); any other frame
gets a result and the socket stays open."""


class Socket:
    """A client's socket on a table, connected again whenever the server closed it."""

    def __init__(self, url: str, seat: int | None) -> None:
        self.url = url
        self.seat = seat
        self.connection: ClientConnection | None = None
        self.received: list[str] = []

    def open(self) -> ClientConnection:
        if self.connection is None:
            self.connection = connect(self.url, max_size=2**22, open_timeout=30).__enter__()
        return self.connection

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def drain(self) -> None:
        """Keep what the server sent so far without waiting."""
        connection = self.open()
        while True:
            try:
                self.received.append(str(connection.recv(timeout=0)))
            except (TimeoutError, ConnectionClosed):
                return

    def exchange(self, frame: Frame) -> tuple[dict[str, Any] | None, int | None]:
        """Send a frame; return its result message, or the close code when the server closed
        the socket instead (None: closed without a code)."""
        connection = self.open()
        try:
            connection.send(frame.data, text=frame.text)
            while True:
                raw = str(connection.recv(timeout=ANSWER_WAIT))
                self.received.append(raw)
                message = json.loads(raw)
                if message.get("kind") == "result":
                    return message, None
        except ConnectionClosed as closed:
            self.connection = None
            return None, None if closed.rcvd is None else closed.rcvd.code

    def taken(self) -> list[str]:
        """Return and forget the messages received."""
        taken, self.received = self.received, []
        return taken


def fuzz_socket(stack: Stack, tables: Tables, truth: Truth) -> dict[str, int]:
    """Run the examples; return how many frames of each kind got each answer."""
    table_id = tables.play
    base = f"ws://127.0.0.1:{stack.port}/tables/{table_id}/ws"
    seated = Socket(f"{base}?token={tables.tokens[table_id][0]}", 0)
    spectator = Socket(base, None)
    seen: dict[str, int] = {}
    hidden = {s.seat: truth.hidden_now(table_id, s.seat) for s in (seated, spectator)}

    def check(frame: Frame) -> None:
        before = truth.marks_now([table_id, tables.open])
        result, close = seated.exchange(frame)
        after = truth.marks_now([table_id, tables.open])
        if result is None:
            assert close in CLOSES.get(frame.kind, set()), f"{frame}: closed with {close}"
            outcome = f"close {close}"
        elif result.get("ok") is True:
            outcome = "ok (duplicate)" if result.get("duplicate") else "ok"
        else:
            outcome = check_rejection(result)
            assert after == before, f"{frame} was refused ({outcome}), yet a table moved"
        key = f"{frame.kind}: {outcome}"
        seen[key] = seen.get(key, 0) + 1
        spectator.drain()
        for socket in (seated, spectator):
            now = truth.hidden_now(table_id, socket.seat)
            secrets: Secrets = hidden[socket.seat].throughout(now)
            hidden[socket.seat] = now
            sent = frame.data.decode("utf-8", "replace") if socket is seated else ""
            for message in socket.taken():
                shown = leaks(message, secrets, sent)
                assert not shown, f"seat {socket.seat} was shown {shown}: {message[:300]}"

    @examples(EXAMPLES)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        version = truth.marks_now([table_id])[table_id].version
        check(data.draw(frames(table_id, version), label="frame"))

    try:
        for frame in CORPUS:
            check(frame)
        run()
    finally:
        seated.close()
        spectator.close()
    return seen


async def test_every_frame_gets_a_result_or_a_documented_close(
    stack: Stack, tables: Tables, truth: Truth
) -> None:
    seen = await asyncio.to_thread(fuzz_socket, stack, tables, truth)
    print(seen)
    kinds = {key.partition(":")[0] for key in seen}
    assert kinds >= {"command", "json", "nested", "large", "binary", "not_utf8"}, seen
    assert "large: close 1009" in seen and "not_utf8: close 1007" in seen, seen


ODD_NUMBERS = ["", "+1", " 1", "1 ", "1e3", "0x10", "1_0", "١٢", "00", "-0", "1.0"]
AFTER = st.one_of(
    st.integers(min_value=-5, max_value=2**64).map(str),
    st.sampled_from([*ODD_NUMBERS, str(2**53 - 1), str(2**53)]),
    st.text(max_size=8),
)


def compare_after(stack: Stack, tables: Tables) -> dict[str, int]:
    """Send the same ``after`` to ``GET …/events`` and to the socket; return the outcomes."""
    table_id = tables.play
    base = f"127.0.0.1:{stack.port}/tables/{table_id}"
    client = httpx.Client(timeout=30)
    seen: dict[str, int] = {}

    @examples(60)
    @given(after=AFTER)
    def run(after: str) -> None:
        query = urlencode({"after": after})
        page = client.get(f"http://{base}/events?{query}")
        assert page.status_code in (200, 422), page.text
        with connect(f"ws://{base}/ws?{query}", open_timeout=30) as socket:
            first = json.loads(socket.recv(timeout=ANSWER_WAIT))
            if first["kind"] == "error":
                with contextlib.suppress(ConnectionClosed):
                    socket.recv(timeout=ANSWER_WAIT)
                closed = socket.close_code
            else:
                closed = None
        http = page.json()["code"] if page.status_code == 422 else "ok"
        ws = first["code"] if first["kind"] == "error" else "ok"
        assert http == ws, f"after={after!r}: HTTP {http}, WebSocket {ws}"
        assert (closed == Code.QUERY_INVALID.close) == (ws == "query/invalid"), (after, closed)
        seen[http] = seen.get(http, 0) + 1

    try:
        run()
    finally:
        client.close()
    return seen


async def test_after_follows_the_same_rule_on_http_and_the_socket(
    stack: Stack, tables: Tables
) -> None:
    seen = await asyncio.to_thread(compare_after, stack, tables)
    assert set(seen) == {"ok", "query/invalid"}, seen
