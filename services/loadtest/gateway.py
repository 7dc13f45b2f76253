"""``--via gateway``: tables played as clients play them, over HTTP and WebSocket.

What a table sends and reads, the sessions and ``--retry``: ``docs/loadtest.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from services.loadtest.links import NoService, TableGivenUp
from services.loadtest.options import Options
from services.loadtest.play import TablePlay, view_version
from services.loadtest.stats import Stats
from services.loadtest.wakeup import Wakeup
from services.tasks import cancel_and_wait

if TYPE_CHECKING:
    from services.loadtest.runner import Run

AWAY = frozenset({202, 502, 503, 504})
"""Statuses of a create or join that say the service was away or slow, not that it refused."""

_EVENT_PREFIX = '{"kind":"event"'
"""How the gateway's compact JSON of an ``event`` message starts."""


class GatewayDriver:
    """The HTTP and WebSocket sessions of a run; makes a :class:`GatewayTable` per table."""

    def __init__(self, options: Options) -> None:
        self.options = options
        self.http: aiohttp.ClientSession | None = None
        self.sockets: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        """Open the sessions (checks that the gateway answers ``/readyz``)."""
        timeout = aiohttp.ClientTimeout(total=self.options.result_timeout + 5)
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self.options.http_connections),
            timeout=timeout,
        )
        self.sockets = aiohttp.ClientSession(  # a socket lives as long as its table plays
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None, connect=self.options.result_timeout),
        )
        ready = f"{self.options.url}/readyz"
        try:
            async with self.http.get(ready) as response:
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise NoService(f"{ready}: {error}") from None
        if status != 200:
            raise NoService(f"{ready} answered {status}")

    async def close(self) -> None:
        """Close both sessions."""
        for session in (self.http, self.sockets):
            if session is not None:
                await session.close()

    def players(self, run: Run) -> list[Coroutine[Any, Any, None]]:
        """Return a slot a table at a time, each on links of this driver (``Run.slot``)."""
        return [run.slot(index, self) for index in range(self.options.tables)]

    def table(self, table_id: str, play: TablePlay) -> GatewayTable:
        """Return the link of one table."""
        assert self.http is not None and self.sockets is not None, "start the driver first"
        return GatewayTable(self, table_id, play)


class GatewayTable:
    """One table through the gateway (``docs/loadtest.md``)."""

    def __init__(self, driver: GatewayDriver, table_id: str, play: TablePlay) -> None:
        self.driver = driver
        self.options = driver.options
        self.table_id = table_id
        self.play = play
        self.sockets: list[aiohttp.ClientWebSocketResponse] = []
        self.readers: list[asyncio.Task[None]] = []
        self.waiting: dict[str, asyncio.Future[tuple[Mapping[str, Any], float]]] = {}
        self.arrivals: list[deque[tuple[int, float]]] = [deque(maxlen=8), deque(maxlen=8)]
        self.news = Wakeup()
        self.closed: TableGivenUp | None = None
        self.watch_stats: Stats | None = None
        self.last_command: object = None
        self.match_ended = False
        self.deals = 0
        self.viewers: list[tuple[int | None, str | None]] = []
        """Whom the sockets are opened for: (seat, token), or (None, None) for a spectator."""

    # --- setting up ------------------------------------------------------------------------

    async def _post(self, kind: str, path: str, body: dict[str, Any], stats: Stats) -> Any:
        started = time.perf_counter()
        attempt = 0
        while True:
            try:
                return await self._post_once(kind, path, body, stats, started)
            except TableGivenUp as error:
                gone = time.perf_counter() - started > self.options.timeout
                if not self.options.retry or gone or not error.code.startswith("http/"):
                    raise
                attempt += 1
                stats.retried(error.code)
                await asyncio.sleep(min(1.0, 0.1 * 2 ** (attempt - 1)))

    async def _post_once(
        self, kind: str, path: str, body: dict[str, Any], stats: Stats, started: float
    ) -> Any:
        assert self.driver.http is not None
        try:
            async with self.driver.http.post(f"{self.options.url}{path}", json=body) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TableGivenUp(f"http/{kind}_failed", repr(error)) from None
        try:
            answer = orjson.loads(raw)
        except orjson.JSONDecodeError:
            answer = None  # e.g. a server error's plain text
        if status not in (200, 201) or not isinstance(answer, dict):
            if self.options.retry and status in AWAY:  # still queued, or the service is away
                raise TableGivenUp(f"http/{kind}_{status}", f"{path} answered {status}")
            code = answer.get("code") if isinstance(answer, dict) else None
            raise TableGivenUp(f"{kind}/{code or status}", f"{path} answered {status}")
        stats.setup_done(kind, time.perf_counter() - started)
        return answer

    async def open(self, stats: Stats) -> None:
        """Create the table and connect: two seats, or one spectator for a bot table."""
        body: dict[str, Any] = {
            "table_id": self.table_id,
            "command_id": f"{self.table_id}-create",
            "deals": self.options.deals,
            "rules": self.options.rules,
        }
        bots = self.options.players == "bots"
        if bots:
            body["bots"] = {"0": self.options.bots[0], "1": self.options.bots[1]}
        await self._post("create", "/tables", body, stats)
        if bots:
            self.watch_stats = stats
            self.viewers = [(None, None)]
            await self._connect_all(stats)
            return
        tokens = []
        for seat in (0, 1):
            join = {
                "name": f"load {seat}",
                "seat": seat,
                "command_id": f"{self.table_id}-join{seat}",
            }
            answer = await self._post("join", f"/tables/{self.table_id}/join", join, stats)
            tokens.append(str(answer["token"]))
        self.viewers = [(0, tokens[0]), (1, tokens[1])]
        await self._connect_all(stats)

    async def _connect_all(self, stats: Stats) -> None:
        """Open the sockets of ``viewers``; with ``--retry``, until the gateway takes them."""
        started = time.perf_counter()
        attempt = 0
        while True:
            try:
                return await (self.reconnect() if attempt else self._open_sockets())
            except TableGivenUp as error:
                gone = time.perf_counter() - started > self.options.timeout
                if not self.options.retry or gone or not error.code.startswith("ws/"):
                    raise
                attempt += 1
                stats.retried(error.code)
                await asyncio.sleep(min(1.0, 0.1 * 2 ** (attempt - 1)))

    async def _open_sockets(self) -> None:
        for viewer, token in self.viewers:
            await self._connect(viewer, token)

    async def _connect(self, seat: int | None, token: str | None) -> None:
        assert self.driver.sockets is not None
        base = self.options.url.replace("http", "ws", 1)
        url = f"{base}/tables/{self.table_id}/ws"
        # a spectator of bot tables asks for every event since the start: the bots may have
        # moved, or even finished, before the socket is up
        params = {"after": "0"} if token is None else {"token": token}
        try:
            socket = await self.driver.sockets.ws_connect(
                url,
                params=params,
                max_msg_size=1 << 20,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
            )
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TableGivenUp("ws/connect_failed", repr(error)) from None
        self.sockets.append(socket)
        self.readers.append(asyncio.create_task(self._read(socket, seat)))

    # --- reading ---------------------------------------------------------------------------

    async def _read(self, socket: aiohttp.ClientWebSocketResponse, seat: int | None) -> None:
        """Take the socket's messages until it closes."""
        try:
            async for message in socket:
                if message.type is not aiohttp.WSMsgType.TEXT:
                    continue
                at = time.perf_counter()
                raw: str = message.data
                if seat is not None and raw.startswith(_EVENT_PREFIX):
                    continue
                self._take(orjson.loads(raw), seat, at)
        except (aiohttp.ClientError, ValueError) as error:
            self.closed = TableGivenUp("ws/read_failed", repr(error))
        finally:
            if self.closed is None:
                self.closed = TableGivenUp("ws/closed", f"close code {socket.close_code}")
            self.news.set()
            for future in self.waiting.values():
                if not future.done():
                    future.set_exception(self.closed)

    def _take(self, message: dict[str, Any], seat: int | None, at: float) -> None:
        kind = message.get("kind")
        if kind == "result":
            future = self.waiting.pop(str(message.get("command_id")), None)
            if future is not None and not future.done():
                future.set_result((message, at))
        elif kind == "view" and seat is not None:
            view = message["view"]
            if self.play.see_view(seat, view):
                self.arrivals[seat].append((view_version(view), at))
                self.news.set()
        elif kind == "event" and seat is None:
            self._watched(message["event"])
        elif kind == "view" and message["view"].get("match_over") is True:
            self.deals = max(self.deals, int(message["view"].get("deals_played") or 0))
            self.match_ended = True  # (a bot table older than the resume gap: no events)
            self.news.set()
        elif kind == "error":
            self.closed = TableGivenUp(f"ws/{message.get('code')}", str(message.get("message")))

    def _watched(self, envelope: Mapping[str, Any]) -> None:
        """Count a bot table's event: a new command's first event is a move."""
        payload = envelope.get("payload") or {}
        kind = payload.get("type")
        if self.watch_stats is not None and kind not in ("table_created", "player_joined"):
            command_id = envelope.get("command_id")
            if command_id != self.last_command:
                self.last_command = command_id
                self.watch_stats.moves(1)
        if kind == "deal_revealed":
            self.deals += 1
        if kind == "match_ended":
            self.match_ended = True
        self.news.set()

    # --- the TableLink protocol -------------------------------------------------------------

    async def send(self, seat: int, command: Mapping[str, Any]) -> float:
        """Send the command over the seat's socket; return when it went out."""
        future: asyncio.Future[tuple[Mapping[str, Any], float]] = (
            asyncio.get_running_loop().create_future()
        )
        if self.closed is not None:
            raise self.closed
        if len(self.sockets) != len(self.viewers):
            raise TableGivenUp("ws/closed", "the table's sockets are not all open")
        self.waiting[str(command["command_id"])] = future
        payload = orjson.dumps({"kind": "command", "command": command}).decode()
        started = time.perf_counter()
        try:
            await self.sockets[seat].send_str(payload)
        except (aiohttp.ClientError, ConnectionError) as error:
            raise TableGivenUp("ws/send_failed", repr(error)) from None
        return started

    async def result(self, command_id: str, deadline: float) -> tuple[Mapping[str, Any], float]:
        """Return the result message of the command and when it arrived."""
        future = self.waiting.get(command_id)
        if future is None:
            raise TableGivenUp("result/not_awaited", command_id)
        delay = max(0.0, deadline - time.perf_counter())
        timer = asyncio.get_running_loop().call_later(delay, _time_out, future, command_id)
        try:
            return await future
        finally:
            timer.cancel()
            self.waiting.pop(command_id, None)

    async def view_at(self, seat: int, version: int, deadline: float) -> float:
        """Return when the seat's first view at ``version`` or later arrived."""
        while True:
            for seen, at in self.arrivals[seat]:
                if seen >= version:
                    return at
            await self._news(deadline, "view/timeout")

    async def changed(self, deadline: float) -> None:
        """Wait for the next view or event."""
        await self._news(deadline, "view/timeout")

    async def _news(self, deadline: float, code: str) -> None:
        if self.closed is not None:
            raise self.closed
        self.news.clear()
        if not await self.news.wait(deadline - time.perf_counter()):
            raise TableGivenUp(code, f"table {self.table_id}")

    async def watch(self, deadline: float, stats: Stats) -> int:
        """Wait for the bot table's ``match_ended``; return its deals."""
        while not self.match_ended:
            await self._news(deadline, "watch/timeout")
        return self.deals

    async def reconnect(self) -> None:
        """Close the table's sockets and open them again (``--retry``).

        Raises TableGivenUp (``ws/connect_failed``) while the gateway does not take them.
        """
        await self.close()
        self.sockets, self.readers = [], []
        self.closed = None
        await self._open_sockets()  # all or none: a failure here closes them next time

    async def close(self) -> None:
        """Close the sockets and stop their readers."""
        for socket in self.sockets:
            await socket.close()
        for reader in self.readers:
            reader.cancel()
        for reader in self.readers:
            with contextlib.suppress(Exception):  # a reader's own failure: the socket is gone
                await cancel_and_wait(reader)


def _time_out(future: asyncio.Future[tuple[Mapping[str, Any], float]], command_id: str) -> None:
    """End the wait for a result that did not come in time."""
    if not future.done():
        future.set_exception(TableGivenUp("result/timeout", command_id))
