"""A whole deployment in one process, for tests: gateway, engine worker and projector.

>>> async with Stack(settings) as stack:                      # doctest: +SKIP
...     created = await stack.http.post("/tables", json={"deals": 1})

``Stack`` starts the engine worker (``services.engine_worker.EngineWorker``, with a table
service of the test's choosing: fixed seeds and dealer) and the projector
(``services.projector.run_projector``) as asyncio tasks, the gateway app with its lifespan, an
``httpx.AsyncClient`` on the app in process, and, with ``serve=True``, a real uvicorn server on
127.0.0.1 (a free port) for WebSocket clients.  Players that choose from the ``legal_actions``
of their seat's view are here too, so that tests script whole deals without knowing the deck.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from redis.asyncio import Redis

from events.commands import Command
from events.fairness import new_seed
from events.mapping import legal_to_wire
from services.gateway.app import create_app
from services.settings import Settings
from services.store.client import connect
from services.store.redis_store import RedisEventStore
from services.tables.service import TableService
from services.tables.tokens import SeatTokens, load_secret

Policy = Callable[[Sequence[str]], str]
"""Chooses one of a seat's legal actions (engine notation, ``engine.notation``)."""


TEST_SECRET = "services-test-secret-0123456789"
"""The token secret of the service tests' default settings (``tests/services/conftest.py``)."""


def eager(legal: Sequence[str]) -> str:
    """Take or meld whenever possible (the most hand cards), else the first action."""
    melds = [a for a in legal if a.startswith(("take", "meld"))]
    if melds:
        return max(melds, key=lambda a: len(a.split("=>")[0].split()))
    return legal[0]


def refuser(legal: Sequence[str]) -> str:
    """Turn, refuse, leave or waive whenever allowed: no deal is won by nobody taking."""
    for word in ("turn", "refuse", "leave", "waive"):
        if word in legal:
            return word
    return legal[0]


def wire_command(action: str, table_id: str, command_id: str, version: int | None) -> Command:
    """Return the wire command of a legal action of a view: engine notation, or ``next_deal``."""
    return legal_to_wire(action, table_id, command_id, version)


@contextlib.asynccontextmanager
async def gateway_client(
    settings: Settings, *, raise_app_exceptions: bool = True
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway app alone (no worker), its lifespan run, and an HTTP client on it in this
    process; with ``raise_app_exceptions=False`` a fault reaches the client as the app answers
    it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=raise_app_exceptions)
        async with httpx.AsyncClient(transport=transport, base_url="http://gateway") as client:
            yield client


class Stack:
    """Gateway, engine worker and projector of one namespace, running in this process."""

    def __init__(
        self,
        settings: Settings,
        *,
        seeds: Callable[[], bytes] = new_seed,
        dealer: Callable[[], int] = lambda: 0,
        serve: bool = False,
        projector: bool = True,
    ) -> None:
        self.settings = settings
        self.seeds = seeds
        self.dealer = dealer
        self.serve = serve
        self.with_projector = projector
        self.stop = asyncio.Event()
        self.app: FastAPI = create_app(settings)
        self.http: httpx.AsyncClient = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://gateway", timeout=30
        )
        self.port = 0
        self._tasks: list[asyncio.Task[Any]] = []
        self._redis: Redis | None = None
        self._lifespan: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._server: uvicorn.Server | None = None
        self.worker: Any = None

    @property
    def ws_base(self) -> str:
        """``ws://127.0.0.1:<port>`` of the served app (``serve=True``)."""
        return f"ws://127.0.0.1:{self.port}"

    async def __aenter__(self) -> Stack:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start(self) -> None:
        from services.engine_worker import EngineWorker
        from services.projector.run import run_projector

        settings = self.settings
        self._redis = connect(settings.redis_url)
        secret = await load_secret(self._redis, settings.namespace, settings.token_secret)

        def service(store: RedisEventStore) -> TableService:
            return TableService(
                store,
                seed_source=self.seeds,
                dealer_source=self.dealer,
                token_hasher=SeatTokens(secret).token_hash,
            )

        self.worker = EngineWorker(settings, service_factory=service, poll_ms=50)
        await self.worker.start()
        self._tasks.append(asyncio.create_task(self.worker.run(self.stop)))
        if self.with_projector:
            self._tasks.append(asyncio.create_task(run_projector(settings, self.stop)))
        if self.serve:
            config = uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=0,
                log_level="warning",
                ws_max_size=65536,
                timeout_graceful_shutdown=5,
            )
            self._server = uvicorn.Server(config)
            self._tasks.append(asyncio.create_task(self._server.serve()))
            while not self._server.started:
                await asyncio.sleep(0.02)
            self.port = self._server.servers[0].sockets[0].getsockname()[1]
        else:
            lifespan = self.app.router.lifespan_context(self.app)
            await lifespan.__aenter__()
            self._lifespan = lifespan
        await self.wait_for_worker()

    async def wait_for_worker(self, timeout: float = 10.0) -> None:
        """Wait until the worker owns every shard (so commands do not wait for a lease)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self.worker.owned) < self.settings.shards:
            if loop.time() > deadline:
                raise TimeoutError(f"the worker owns {sorted(self.worker.owned)} only")
            await asyncio.sleep(0.05)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._lifespan is not None:
            await self._lifespan.__aexit__(None, None, None)
        await self.http.aclose()
        _, stuck = await asyncio.wait(self._tasks, timeout=20)
        for task in stuck:  # never hang a test run on a stuck shutdown: fail it
            task.cancel()
        results = await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.worker is not None:
            with contextlib.suppress(Exception):
                await self.worker.close()
        if self._redis is not None:
            await self._redis.aclose()
        if stuck:
            names = ", ".join(sorted(t.get_name() for t in stuck))
            raise RuntimeError(f"the stack did not stop within 20 s: {names}")
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result

    # --- conveniences ---------------------------------------------------------------------------

    async def create(self, **fields: Any) -> dict[str, Any]:
        """Create a table (``POST /tables``) and return the answer; fails unless 201."""
        response = await self.http.post("/tables", json=fields)
        assert response.status_code == 201, response.text
        answer: dict[str, Any] = response.json()
        return answer

    async def join(self, table_id: str, name: str, seat: int | None = None) -> Seat:
        """Take a seat (``POST /tables/{id}/join``) and return it with its token."""
        body: dict[str, Any] = {"name": name}
        if seat is not None:
            body["seat"] = seat
        response = await self.http.post(f"/tables/{table_id}/join", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        return Seat(self, table_id, answer["seat"], answer["token"], answer["version"])


class Seat:
    """A seated player talking to the gateway over HTTP with its token."""

    def __init__(self, stack: Stack, table_id: str, seat: int, token: str, version: int) -> None:
        self.stack = stack
        self.table_id = table_id
        self.seat = seat
        self.token = token
        self.version = version
        self._sent = 0

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header of the seat."""
        return {"Authorization": f"Bearer {self.token}"}

    def next_command_id(self) -> str:
        """Return a fresh command id of this seat."""
        self._sent += 1
        return f"s{self.seat}-{self.table_id[-8:]}-{self._sent:05d}"

    async def view(self, min_version: int = 0) -> dict[str, Any]:
        """Return the seat's view, at least at ``min_version``."""
        response = await self.stack.http.get(
            f"/tables/{self.table_id}/view",
            params={"min_version": min_version},
            headers=self.headers,
        )
        assert response.status_code == 200, response.text
        view: dict[str, Any] = response.json()
        return view

    async def send(self, command: Command | dict[str, Any]) -> httpx.Response:
        """POST a command (a model or raw JSON data) for the seat."""
        data = command if isinstance(command, dict) else command.model_dump(mode="json")
        return await self.stack.http.post(
            f"/tables/{self.table_id}/commands", content=json.dumps(data), headers=self.headers
        )

    async def act(self, action: str, version: int | None = None) -> dict[str, Any]:
        """Send an action in engine notation; return the answer (fails unless accepted)."""
        command = wire_command(action, self.table_id, self.next_command_id(), version)
        response = await self.send(command)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer


class Listener:
    """A WebSocket client of the served stack that keeps every message it receives."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.messages: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self._changed = asyncio.Condition()
        self._socket: Any = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Listener:
        from websockets.asyncio.client import connect

        self._socket = await connect(self.url, max_size=2**20)
        self._task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the socket and stop reading."""
        if self._socket is not None:
            await self._socket.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for raw in self._socket:
                async with self._changed:
                    self.messages.append(json.loads(raw))
                    self._changed.notify_all()
        except ConnectionClosed:
            pass
        finally:
            self.close_code = self._socket.close_code
            async with self._changed:
                self._changed.notify_all()

    @property
    def closed(self) -> bool:
        """Say whether the socket has closed."""
        return self._task is not None and self._task.done()

    async def send(self, message: dict[str, Any]) -> None:
        """Send one JSON message."""
        await self._socket.send(json.dumps(message))

    async def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0, start: int = 0
    ) -> dict[str, Any]:
        """Return the first message from index ``start`` on (received or still to come) that
        ``predicate`` accepts."""

        async def found() -> dict[str, Any]:
            async with self._changed:
                while True:
                    for message in self.messages[start:]:
                        if predicate(message):
                            return message
                    if self.closed:
                        raise ConnectionError(f"closed ({self.close_code}) before the message")
                    await self._changed.wait()

        return await asyncio.wait_for(found(), timeout)

    async def wait_closed(self, timeout: float = 10.0) -> int | None:
        """Wait until the server closes the socket; return the close code."""
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        return self.close_code

    def events(self) -> list[dict[str, Any]]:
        """Return the envelopes of the event messages received, in order."""
        return [m["event"] for m in self.messages if m.get("kind") == "event"]

    def views(self) -> list[dict[str, Any]]:
        """Return the views received, in order."""
        return [m["view"] for m in self.messages if m.get("kind") == "view"]

    async def command(self, command: Command, timeout: float = 10.0) -> dict[str, Any]:
        """Send a command over the socket and return its result message."""
        start = len(self.messages)
        await self.send({"kind": "command", "command": command.model_dump(mode="json")})
        return await self.wait_for(
            lambda m: m.get("kind") == "result" and m.get("command_id") == command.command_id,
            timeout,
            start,
        )

    async def wait_version(self, version: int, timeout: float = 10.0) -> None:
        """Wait until an event or a view at ``version`` (or later) has arrived."""

        def reached(message: dict[str, Any]) -> bool:
            if message.get("kind") == "event":
                return int(message["event"]["version"]) >= version
            if message.get("kind") == "view":
                return int(message["view"].get("version", -1)) >= version
            return False

        await self.wait_for(reached, timeout)
