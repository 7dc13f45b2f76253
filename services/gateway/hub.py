"""One Redis pub/sub listener per gateway process, fanning hints out to whoever waits.

Hints are only hints: whoever wakes reads the store (``docs/services.md``, "Hints").
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from services.gateway import metrics
from services.store.keys import results_channel, views_channel
from services.store.outage import MAX_PAUSE_S
from services.tasks import cancel_and_wait

Watcher = Callable[[int | None], None]
"""Called with the view version of a view hint, None for a result hint (new events), or -1
after a resubscription (anything may have moved)."""


class ResultWait:
    """A waiter for one seat's command's result hint: ``event`` is set when one arrives (or may
    have been missed), ``result`` is the hint's result when it came."""

    def __init__(self, seat: int | None = None) -> None:
        self.seat = seat
        self.event = asyncio.Event()
        self.result: dict[str, Any] | None = None


class Hub:
    """The process's subscription to the result and view hint channels."""

    def __init__(self, redis: Redis, namespace: str, log: Any) -> None:
        self.redis = redis
        self.results_channel = results_channel(namespace)
        self.views_channel = views_channel(namespace)
        self.log = log
        self._waiters: dict[tuple[str, str], set[ResultWait]] = {}
        self._watchers: dict[str, set[Watcher]] = {}
        self._task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self, timeout: float = 5.0) -> None:
        """Start listening; wait (up to ``timeout``) until the subscription is in place."""
        self._task = asyncio.create_task(self._run(), name="gateway-hub")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.subscribed.wait(), timeout)

    async def stop(self) -> None:
        """Stop listening."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.results_channel, self.views_channel)
                if self.subscribed.is_set():  # a resubscription: hints may have been missed
                    self._wake_all()
                self.subscribed.set()
                backoff = 0.1
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        self._dispatch(message["channel"], message["data"])
            except asyncio.CancelledError:
                raise
            except (RedisError, OSError) as exc:
                self.log.warning("hub_disconnected", error=repr(exc), retry_in=backoff)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_PAUSE_S)

    # --- dispatching ---------------------------------------------------------------------------

    def _dispatch(self, channel: bytes | str, data: bytes | str) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        text = data.decode() if isinstance(data, bytes) else data
        if name == self.results_channel:
            kind, handle = "results", self._on_result
        elif name == self.views_channel:
            kind, handle = "views", self._on_view
        else:
            return
        lines = text.split("\n")  # one message a batch, one hint a line
        metrics.HINTS.labels(kind).inc(len(lines))
        for line in lines:
            handle(line)

    def _on_result(self, text: str) -> None:
        try:
            hint = json.loads(text)
            table_id, command_id = str(hint["table_id"]), str(hint["command_id"])
        except (ValueError, KeyError, TypeError):
            self.log.warning("bad_result_hint", hint=text[:200])
            return
        result = hint.get("result")
        for waiter in self._waiters.get((table_id, command_id), ()):
            if "seat" in hint and hint["seat"] != waiter.seat:
                continue  # the same id from the other seat: another command
            if isinstance(result, dict):
                waiter.result = result
            waiter.event.set()
        self._notify(table_id, None)

    def _on_view(self, text: str) -> None:
        table_id, _, version = text.strip().partition(" ")
        try:
            number = int(version)
        except ValueError:
            self.log.warning("bad_view_hint", hint=text[:200])
            return
        self._notify(table_id, number)

    def _notify(self, table_id: str, view_version: int | None) -> None:
        for watcher in list(self._watchers.get(table_id, ())):
            try:
                watcher(view_version)
            except Exception as exc:  # one broken watcher must not stop the others
                self.log.error("watcher_failed", table=table_id, error=repr(exc))

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.event.set()
        for table_id in list(self._watchers):
            self._notify(table_id, -1)

    # --- registering ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def result_waiter(
        self, table_id: str, command_id: str, seat: int | None = None
    ) -> Iterator[ResultWait]:
        """Yield a waiter woken when a result hint for the seat's command arrives (or may
        have); a hint that names no seat wakes every seat's waiter of the id."""
        key = (table_id, command_id)
        waiter = ResultWait(seat)
        self._waiters.setdefault(key, set()).add(waiter)
        try:
            yield waiter
        finally:
            waiting = self._waiters.get(key)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiters[key]

    def watch(self, table_id: str, watcher: Watcher) -> None:
        """Call ``watcher`` on every hint about the table until :meth:`unwatch`."""
        self._watchers.setdefault(table_id, set()).add(watcher)

    def unwatch(self, table_id: str, watcher: Watcher) -> None:
        """Stop calling ``watcher`` about the table."""
        watching = self._watchers.get(table_id)
        if watching is not None:
            watching.discard(watcher)
            if not watching:
                del self._watchers[table_id]

    @contextlib.contextmanager
    def view_waiter(self, table_id: str) -> Iterator[asyncio.Event]:
        """Yield an event set whenever a hint says the table (or its views) moved."""
        event = asyncio.Event()

        def wake(_: int | None) -> None:
            event.set()

        self.watch(table_id, wake)
        try:
            yield event
        finally:
            self.unwatch(table_id, wake)
