"""Live tables: one room per table with open WebSockets, fed by the process's one hub.

Each connection gets every event it may see exactly once, in order, then its views;
``docs/services.md`` ("Module notes") has the rooms, the queues and how a join catches up.
"""

from __future__ import annotations

import asyncio
from typing import Any

from engine.codes import Code, close_of
from engine.secrecy import sees
from services.gateway import metrics
from services.gateway.feed import DealTracker, Outgoing, seal_all, seal_each
from services.gateway.hub import Hub
from services.gateway.view_reader import ViewReader
from services.store.base import EventStore
from services.tables.stored_parts import version_of, viewer_of
from services.tasks import cancel_and_wait

MAX_QUEUE = 2_000
CLOSE_POLICY = 1008
"""The close code of a ``close_error`` the catalogue gives none (RFC 6455: policy violation)."""
RECHECK_SECONDS = 1.0
"""How often the rooms read their tables' heads whatever the hints say: hints are at most once
(a gateway whose subscription drops, or a publisher whose call fails, loses them), so a lost
hint delays a live update by at most this and a read (docs/services.md, "Hints")."""
RECHECK_BATCH = 500
"""Tables whose heads one pipeline of the re-check reads."""


class Connection:
    """One WebSocket's place in a room: its seat, what it was sent, and its outgoing queue."""

    def __init__(self, seat: int | None) -> None:
        self.seat = seat
        self.part = viewer_of(seat)
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.cursor = 0  # the last event version handed over (sent or not visible)
        self.view_version = -1
        self.dropped: str | None = None
        self.close_error: Code = Code.VIEW_TOO_SLOW
        self.unanswered = 0  # the socket's commands whose result has not gone out
        self.given_up = False  # the seat was given up: only those commands' results go out

    def send(self, message: dict[str, Any]) -> None:
        """Queue a message; drop the connection when it has fallen too far behind."""
        if self.dropped is not None or (self.given_up and message.get("kind") != "result"):
            return
        if self.queue.qsize() >= MAX_QUEUE:
            self.dropped = f"too slow: more than {MAX_QUEUE} messages waiting"
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(message)

    def send_event(self, event: Outgoing) -> None:
        """Send an event if it is new to this connection and the seat may see it."""
        if event.version <= self.cursor:
            return
        self.cursor = event.version
        if sees(self.seat, event.owner):
            self.send({"kind": "event", "event": event.envelope})
        payload = event.envelope.get("payload") or {}
        mine = self.seat is not None and payload.get("seat") == self.seat
        if mine and payload.get("type") == "player_left":
            self.given_up = True
            self._close_if_given_up()

    def command_sent(self) -> None:
        """Count a command the socket sent, whose result it owes the client."""
        self.unanswered += 1

    def command_answered(self, result: dict[str, Any]) -> None:
        """Send a command's ``result``; once a given-up seat's socket has answered every
        command it took (its ``leave_table`` among them), close it."""
        self.unanswered -= 1
        self.send(result)
        self._close_if_given_up()

    def _close_if_given_up(self) -> None:
        if self.given_up and self.unanswered == 0 and self.dropped is None:
            self.close(Code.SEAT_BAD_TOKEN, "the seat was given up: its token is no seat's")

    @property
    def close_code(self) -> int:
        """The WebSocket close code of ``close_error``, from the catalogue."""
        return close_of(self.close_error, CLOSE_POLICY)

    def close(self, error: Code, message: str) -> None:
        """Send ``error`` and close the socket once what is queued before it has gone out
        (a seat given up: the next player of the seat must not get its views)."""
        self.dropped = message
        self.close_error = error
        self.queue.put_nowait(None)

    def send_view(self, view: dict[str, Any] | None) -> None:
        """Send a view if it is newer than the last one sent."""
        version = version_of(view)
        if view is not None and version > self.view_version:
            self.view_version = version
            self.send({"kind": "view", "view": view})


class Room:
    """The connections on one table and where the table stands for them."""

    def __init__(
        self,
        table_id: str,
        store: EventStore,
        view_reader: ViewReader,
        tracker: DealTracker,
        resume_gap: int,
        log: Any,
    ) -> None:
        self.table_id = table_id
        self.store = store
        self.view_reader = view_reader
        self.tracker = tracker
        self.resume_gap = resume_gap
        self.log = log.bind(table=table_id)
        self.connections: set[Connection] = set()
        self.users = 0  # connections joined or joining
        self.version: int | None = None
        self.open_from: int | None = None
        self.lock = asyncio.Lock()
        self._wanted = asyncio.Event()
        self._views_wanted = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start following the table."""
        self._task = asyncio.create_task(self._run(), name=f"room-{self.table_id}")

    async def stop(self) -> None:
        """Stop following the table."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    def poke(self, view_version: int | None) -> None:
        """Note a hint: new events (None) or a new view (a version)."""
        if view_version is not None:
            self._views_wanted = True
        self._wanted.set()

    def recheck(self, head: int) -> bool:
        """Poke the room when the table's ``head`` version is past the events it handed out or
        a connection's view is older than them (what a lost hint leaves); say whether it did."""
        version = self.version
        if version is None:
            return False  # not caught up once yet: its join reads the store anyway
        if head <= version and all(c.view_version >= version for c in self.connections):
            return False
        self.poke(version)  # events and views
        return True

    async def _run(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            views, self._views_wanted = self._views_wanted, False
            try:
                async with self.lock:
                    await self._catch_up()
                    if views:
                        await self._push_views()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a failed read: try again on the next hint, or soon
                self.log.warning("room_update_failed", error=repr(exc))
                self._views_wanted = self._views_wanted or views
                await asyncio.sleep(0.5)
                self._wanted.set()

    async def _start_version(self) -> int:
        if self.version is None:
            head = await self.store.head(self.table_id)
            self.open_from = await self.tracker.open_at(self.table_id, head.version)
            self.version = head.version
        return self.version

    async def _catch_up(self) -> None:
        """Read the events after the room's version and hand them out (under the lock)."""
        version = await self._start_version()
        new = await self.store.read(self.table_id, version + 1)
        if not new:
            return
        outgoing, self.open_from = seal_each(new, self.open_from)
        self.version = new[-1].version
        self.tracker.remember(self.table_id, self.version, self.open_from)
        for connection in self.connections:
            for event in outgoing:
                connection.send_event(event)

    async def _push_views(self) -> None:
        parts = sorted({c.part for c in self.connections})
        if not parts:
            return
        views = await self.view_reader.read_many(self.table_id, parts)
        if any(version_of(v) > (self.version or 0) for v in views.values()):
            await self._catch_up()  # a view never goes out before the events it holds
        for connection in self.connections:
            connection.send_view(views.get(connection.part))

    async def join(self, connection: Connection, after: int | None) -> None:
        """Bring a new connection up to date (``docs/services.md``) and add it."""
        async with self.lock:
            await self._catch_up()
            target = self.version or 0
            resumed = (
                after is not None and 0 <= after <= target and target - after <= self.resume_gap
            )
            view = await self.view_reader.read(self.table_id, connection.part)
            if resumed:
                assert after is not None
                start = after
            else:
                base = max(version_of(view), 0)
                start = base if target - base <= self.resume_gap else target
            connection.send(
                {
                    "kind": "hello",
                    "table_id": self.table_id,
                    "seat": connection.seat,
                    "version": target,
                    "after": start,
                    "resumed": resumed,
                }
            )
            if not resumed:
                connection.send_view(view)
            connection.cursor = start
            if start < target:
                missed = await self.store.read(self.table_id, start + 1, target)
                for event in seal_all(missed, self.open_from):
                    connection.send_event(event)
            if resumed:
                connection.send_view(view)
            self.connections.add(connection)


class Rooms:
    """Every room of the process, created on a table's first connection, removed on its last."""

    def __init__(
        self,
        hub: Hub,
        store: EventStore,
        view_reader: ViewReader,
        tracker: DealTracker,
        resume_gap: int,
        log: Any,
    ) -> None:
        self.hub = hub
        self.store = store
        self.view_reader = view_reader
        self.tracker = tracker
        self.resume_gap = resume_gap
        self.log = log
        self.rooms: dict[str, Room] = {}
        self.recheck_seconds = RECHECK_SECONDS
        self._rechecks: asyncio.Task[None] | None = None

    async def enter(self, table_id: str, connection: Connection, after: int | None) -> Room:
        """Put a connection in its table's room, caught up; returns the room."""
        room = self.rooms.get(table_id)
        if room is None:
            room = Room(
                table_id, self.store, self.view_reader, self.tracker, self.resume_gap, self.log
            )
            self.rooms[table_id] = room
            self.hub.watch(table_id, room.poke)
            room.start()
            if self._rechecks is None:
                self._rechecks = asyncio.create_task(self._recheck_loop(), name="rooms-recheck")
        room.users += 1
        metrics.WS_CONNECTIONS.inc()
        try:
            await room.join(connection, after)
        except BaseException:
            await self.leave(room, connection)
            raise
        return room

    async def leave(self, room: Room, connection: Connection) -> None:
        """Take a connection out of its room; the last one out closes the room."""
        room.connections.discard(connection)
        room.users -= 1
        metrics.WS_CONNECTIONS.dec()
        if room.users <= 0 and self.rooms.get(room.table_id) is room:
            del self.rooms[room.table_id]
            self.hub.unwatch(room.table_id, room.poke)
            await room.stop()

    async def recheck(self) -> int:
        """Read the head of every room's table and poke the rooms a lost hint left behind
        (:meth:`Room.recheck`); return how many were poked."""
        rooms = list(self.rooms.values())
        poked = 0
        for i in range(0, len(rooms), RECHECK_BATCH):
            chunk = rooms[i : i + RECHECK_BATCH]
            heads = await self.store.versions([room.table_id for room in chunk])
            poked += sum(room.recheck(head) for room, head in zip(chunk, heads, strict=True))
        if poked:
            metrics.RECHECKED.labels("room").inc(poked)
        return poked

    async def _recheck_loop(self) -> None:
        while True:
            await asyncio.sleep(self.recheck_seconds)
            try:
                await self.recheck()
            except Exception as exc:  # Redis away: the next round tries again
                self.log.warning("rooms_recheck_failed", error=repr(exc))

    async def close(self) -> None:
        """Stop every room and the re-checks."""
        if self._rechecks is not None:
            await cancel_and_wait(self._rechecks)
            self._rechecks = None
        for room in list(self.rooms.values()):
            self.hub.unwatch(room.table_id, room.poke)
            await room.stop()
        self.rooms.clear()
