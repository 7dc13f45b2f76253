"""The intake of an admitted command: into its shard's command stream, and its answer back.

The gateway ``XADD``s the command, waits for its result hint (or polls the store), and answers
with the result the store recorded under the seat's command id, as an HTTP or WebSocket body;
each command is counted and logged here.  ``docs/services.md`` ("Module notes") has the fields
and the polling.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse
from redis.asyncio import Redis

from engine.codes import Code
from events.commands import CommandModel
from services.gateway import metrics
from services.gateway.errors import status_of
from services.gateway.hub import Hub, ResultWait
from services.store.keys import KeySpace, command_key
from services.store.redis_store import command_record

FIRST_POLL = 0.05
"""Seconds after the XADD when a command's waiter first reads the store without a hint."""
MAX_POLL = 0.5
"""The longest a command's waiter goes without reading the store: the most a lost hint delays
its answer."""


@dataclass(frozen=True)
class Answer:
    """A command's result as the store recorded it, or pending when there is none yet."""

    result: dict[str, Any] = field(default_factory=dict)
    first_version: int | None = None
    last_version: int | None = None
    duplicate: bool = False

    @property
    def pending(self) -> bool:
        """Say whether the command is queued without a result yet."""
        return not self.result

    @property
    def ok(self) -> bool:
        """Say whether the command was accepted."""
        return bool(self.result.get("ok"))

    @property
    def code(self) -> str | None:
        """Return the rejection code, None when accepted or pending."""
        code = self.result.get("code")
        return code if isinstance(code, str) and not self.ok else None

    def body(self, command: CommandModel) -> dict[str, Any]:
        """Return the JSON answer: the result, the command, and the table version after it."""
        if self.pending:
            return {
                "ok": None,
                "pending": True,
                "table_id": command.table_id,
                "command_id": command.command_id,
                "message": "the command is queued; send it again with the same command_id "
                "to get its result",
            }
        body: dict[str, Any] = dict(self.result)
        body.setdefault("table_id", command.table_id)
        body.setdefault("command_id", command.command_id)
        body["version"] = self.last_version
        if self.ok and self.first_version is not None and self.last_version is not None:
            body["first_version"] = self.first_version
        if self.duplicate:
            body["duplicate"] = True
        return body

    def response(self, command: CommandModel, ok_status: int = 200) -> JSONResponse:
        """Return the HTTP answer: ``ok_status``, 202 pending, or the status of its code."""
        if self.pending:
            status = 202
        elif self.ok:
            status = ok_status
        else:
            status = status_of(self.code or Code.COMMAND_FAILED)
        return JSONResponse(self.body(command), status_code=status)


def wire_json(command: CommandModel) -> str:
    """Return the JSON put in the stream: the fields the client set, normalised, with ``type``."""
    data = command.model_dump(mode="json", exclude_unset=True)
    data["type"] = type(command).model_fields["type"].default
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


class Intake:
    """Enqueues commands on their shard's stream and waits for their recorded results."""

    def __init__(
        self,
        redis: Redis,
        keys: KeySpace,
        hub: Hub,
        wait_ms: int,
        log: Any,
        *,
        first_poll: float = FIRST_POLL,
        max_poll: float = MAX_POLL,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.hub = hub
        self.wait_ms = wait_ms
        self.log = log
        self.first_poll = first_poll
        self.max_poll = max_poll

    async def submit(self, command: CommandModel, seat: int | None) -> Answer:
        """Enqueue an admitted command for ``seat`` (None: table-level), wait for its result,
        count and log it."""
        started = time.perf_counter()
        answer = await self._enqueue_and_wait(command, seat)
        kind = str(type(command).model_fields["type"].default)
        outcome = "pending" if answer.pending else "ok" if answer.ok else "rejected"
        metrics.COMMANDS.labels(kind, outcome).inc()
        metrics.COMMAND_SECONDS.observe(time.perf_counter() - started)
        self.log.info(
            "command",
            table=command.table_id,
            seat=seat,
            command_id=command.command_id,
            type=kind,
            outcome=outcome,
            code=answer.code,
            duplicate=answer.duplicate,
            version=answer.last_version,
        )
        return answer

    async def recorded(self, table_id: str, command_id: str, seat: int | None) -> Answer | None:
        """Return the store's record of the seat's command, None if it has none."""
        raw = await command_record(self.redis, self.keys, table_id, command_key(command_id, seat))
        if raw is None:
            return None
        first, last, result = raw.split(b" ", 2)
        parsed = json.loads(result) if result else {}
        if not isinstance(parsed, dict):
            parsed = {"ok": False, "code": Code.COMMAND_FAILED, "message": "unreadable result"}
        return Answer(parsed, int(first), int(last))

    async def _enqueue_and_wait(self, command: CommandModel, seat: int | None) -> Answer:
        """Return the store's answer to a command it knows, else ``XADD`` it and wait for one
        (pending after the wait)."""
        known = await self.recorded(command.table_id, command.command_id, seat)
        if known is not None:
            return Answer(known.result, known.first_version, known.last_version, True)
        with self.hub.result_waiter(command.table_id, command.command_id, seat) as hinted:
            stream = self.keys.cmd(self.keys.shard_of(command.table_id))
            fields: dict[Any, Any] = {
                "c": wire_json(command),
                "s": "" if seat is None else str(seat),
                "r": str(int(time.time() * 1000)),
            }
            await self.redis.xadd(stream, fields)
            return await self._result(command, seat, hinted)

    async def _result(self, command: CommandModel, seat: int | None, hinted: ResultWait) -> Answer:
        """Read the command's record on each hint, or at growing intervals without one, until
        there is one or the wait is over (pending)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_ms / 1000
        poll = self.first_poll
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return Answer()
            try:
                await asyncio.wait_for(hinted.event.wait(), min(poll, remaining))
            except TimeoutError:
                poll = min(poll * 2, self.max_poll)
            woken = hinted.event.is_set()
            hinted.event.clear()
            answer = await self.recorded(command.table_id, command.command_id, seat)
            if answer is not None:
                if not woken:
                    metrics.RECHECKED.labels("result").inc()
                return answer
            if hinted.result is not None and not hinted.result.get("ok"):
                return Answer(hinted.result)  # refused without a record (unparseable)
