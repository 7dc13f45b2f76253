"""The turn clock: when a human seat's time runs out, a documented default action is sent once.

Run with ``python -m services.followers.turn_clock``.  Arming, firing, why it acts once, and
the default actions: ``docs/turn-clock.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis

from engine.actions import Action, Discard, Force, Leave, Refuse, Take, TurnCard, Waive
from engine.bots import GreedyBot, bot_view
from engine.legal import default_take, legal_actions
from engine.state import Match, Phase
from events.commands import Command, NextDeal
from events.mapping import to_wire_command
from services import log as service_log
from services.followers.feed import (
    FeedFollower,
    between_deals,
    follow_through_outages,
    run_until_signal,
    submit_command,
    table_setups,
    time_ms,
)
from services.lru import Lru
from services.serve.gc_tuning import settle_long_lived
from services.settings import Settings, load_settings
from services.store.client import as_text
from services.store.keys import KeySpace
from services.store.outage import OUTAGE_ERRORS, Outage, connect_when_up, pause
from services.store.redis_store import RedisEventStore
from services.store.scripts import evalsha_many
from services.tables.service import TableService
from services.tables.table import Table

NEVER = 2**62
"""A deadline later than any (ms since the epoch)."""

FOLLOWER_NAME = "clock"
"""The name of the clock's feed checkpoints: ``<ns>:{sNN}:ckpt:clock``."""

ARM_LUA = """
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '-1')
if cur >= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
"""
"""KEYS timers, timers:v; ARGV table, version, deadline: arm unless a version >= is recorded."""

DISARM_LUA = """
local cur = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '-1')
if cur > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
end
return 1
"""
"""KEYS timers, timers:v; ARGV table, version, forget ('1': drop the version too)."""

LEASE_LUA = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local out = {}
for _, member in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], member)
  out[#out + 1] = member
  out[#out + 1] = redis.call('HGET', KEYS[2], member) or '-1'
end
local first = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
out[#out + 1] = first[2] or ''
return out
"""
"""KEYS timers, timers:v; ARGV now, limit, lease until: take due timers, push them to later.
Returns table, version pairs, then the earliest score left ('' when none)."""

DONE_LUA = """
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 1
end
return 0
"""
"""KEYS timers, timers:v; ARGV table, version: remove the timer if still at that version."""


SWEEP_MS = 1_000
"""How often the clock looks for due timers on every shard even when it knows of none due
(see :meth:`TurnClock.tick_if_due`)."""

LINGER_MS = 100
"""The clock's pause after a feed batch: a deadline of seconds is armed at most 0.1 s later,
and a busy deployment's entries come a tenth of a second's worth a read."""


@dataclass(frozen=True)
class Timeout:
    """A default action sent for a seat whose time ran out at ``version`` of a table."""

    table_id: str
    version: int
    seat: int
    command: Command


def clock_command_id(version: int) -> str:
    """Return the deterministic command id of the clock's action at ``version``: ``clock-0012``."""
    return f"clock-{version:04d}"


def human_seats(table: Table) -> list[int]:
    """Return the seats held by people (not bots), lowest first."""
    return [s for s, holder in enumerate(table.seats) if holder is not None and not holder.bot]


def timed_seat(table: Table) -> int | None:
    """Return the human seat the clock runs for at the table's version, or None.

    The seat to act if a person holds it; between deals, the lowest human seat.
    """
    match = table.match
    if table.turn_seconds is None or match is None or match.over:
        return None
    humans = human_seats(table)
    seat = match.to_act
    if seat is not None:
        return seat if seat in humans else None
    if humans and between_deals(table):
        return humans[0]
    return None


_GREEDY = GreedyBot()


def default_action(match: Match) -> Action:
    """Return the default action of the seat to act (``docs/turn-clock.md``)."""
    deal = match.deal
    seat = match.to_act
    if deal is None or seat is None:
        raise ValueError("nobody is to act")
    legal = legal_actions(match)
    if not legal:  # pragma: no cover - a seat to act always has an action
        raise ValueError("no legal action")
    phase = deal.phase
    preferred: Action | None = None
    if phase is Phase.TURN:
        preferred = TurnCard()
    elif phase is Phase.OFFERED:
        preferred = Refuse()
    elif phase is Phase.TURNED:
        preferred = Leave()
    elif phase is Phase.DISCARD:
        discards = [a for a in legal if isinstance(a, Discard)]
        preferred = _GREEDY.choose_from_view(bot_view(match, seat), discards)
    elif phase is Phase.FORCE_WINDOW:
        preferred = Waive()
    if preferred is not None and preferred in legal:
        return preferred
    take = default_take(match, 0)
    if take is not None and take in legal:
        return take
    takes = [a for a in legal if isinstance(a, Take)]
    if takes:
        return takes[0]
    others = [a for a in legal if not isinstance(a, Force)]
    return (others or legal)[0]


def timeout_command(table: Table) -> Timeout | None:
    """Return the command the clock sends when the table's due human seat times out, or None."""
    seat = timed_seat(table)
    match = table.match
    if seat is None or match is None:
        return None
    command_id = clock_command_id(table.version)
    command: Command
    if match.to_act is None:
        command = NextDeal(
            command_id=command_id, table_id=table.table_id, expected_version=table.version
        )
    else:
        command = to_wire_command(default_action(match), table.table_id, command_id, table.version)
    return Timeout(table.table_id, table.version, seat, command)


class TurnClock:
    """Arms timers from feed batches and fires the due ones (``docs/turn-clock.md``)."""

    def __init__(
        self,
        client: Redis,
        keys: KeySpace,
        *,
        service: TableService | None = None,
        clock: Callable[[], int] = time_ms,
        lease_ms: int = 5_000,
        limit: int = 100,
    ) -> None:
        self.client = client
        self.keys = keys
        self.store = RedisEventStore(client, keys)
        self.service = service or TableService(self.store)
        self.clock = clock
        self.lease_ms = lease_ms
        self.limit = limit
        self.log: Any = service_log.get_logger("turn_clock")
        self._arm = client.register_script(ARM_LUA)
        self._disarm = client.register_script(DISARM_LUA)
        self._lease = client.register_script(LEASE_LUA)
        self._done = client.register_script(DONE_LUA)
        self._timed: Lru[str, bool] = Lru(100_000)
        """Tables looked at: whether each has a turn clock (set at creation); the feed entries
        of one without load nothing."""
        self.next_due = 0
        """The earliest deadline known to this clock (ms since the epoch): from the timers
        it armed and the earliest left on each shard at its last look (:meth:`due`)."""
        self.swept_at: int | None = None
        """When :meth:`due` last looked at every shard (by ``clock``)."""

    def timer_keys(self, shard: int) -> list[str]:
        """Return the shard's timer keys: the sorted set and the hash of versions."""
        timers = self.keys.timers(shard)
        return [timers, f"{timers}:v"]

    # --- arming ---------------------------------------------------------------------------------

    async def handle(self, tables: Iterable[str]) -> None:
        """Arm or remove the timer of each of ``tables`` (those of a feed batch) at its latest
        version."""
        batch = list(tables)
        new = [t for t in batch if t not in self._timed]
        if new:  # their creation, not their whole history: most tables have no clock
            setups = await table_setups(self.service.store, new)
            for table_id in new:
                setup = setups.get(table_id)
                self._timed.remember(table_id, setup is None or setup.turn_seconds is not None)
        for table_id in batch:
            if self._timed.get(table_id):
                await self.track(table_id)

    async def track(self, table_id: str) -> int | None:
        """Arm the timer of a table at its latest version; return the deadline (None: none)."""
        table = await self.service.load(table_id)
        if table.turn_seconds is None:
            if table.version > 0:
                self._timed.remember(table_id, False)
            return None
        keys = self.timer_keys(self.keys.shard_of(table_id))
        seat = timed_seat(table)
        if seat is None:
            over = table.match is not None and table.match.over
            await self._disarm(keys=keys, args=[table_id, table.version, "1" if over else "0"])
            return None
        last = await self.store.read(table_id, table.version, table.version)
        started = last[0].body.get("time") if last else None
        if not isinstance(started, int):
            started = self.clock()
        deadline = started + table.turn_seconds * 1000
        self.next_due = min(self.next_due, deadline)
        armed = await self._arm(keys=keys, args=[table_id, table.version, deadline])
        if armed:
            self.log.debug(
                "timer_armed", table=table_id, seat=seat, version=table.version, deadline=deadline
            )
        return deadline

    # --- firing ---------------------------------------------------------------------------------

    async def due(self, shards: Sequence[int] | None = None) -> list[tuple[str, int]]:
        """Lease the timers due now on ``shards`` (default: all): ``(table id, version)`` pairs.

        One write for all shards (a lease script a shard: each shard is its own slot).
        Sets :attr:`next_due` from what the shards have left.
        """
        now = self.clock()
        args = (now, self.limit, now + self.lease_ms)
        todo = list(range(self.keys.shards) if shards is None else shards)
        if shards is None:
            self.next_due, self.swept_at = NEVER, now  # a timer armed meanwhile lowers it
        try:
            replies = await evalsha_many(
                self._lease, [(self.timer_keys(shard), args) for shard in todo]
            )
        except Exception:
            self.next_due = 0  # look again at the next tick
            raise
        taken: list[tuple[str, int]] = []
        for reply in replies:
            taken += self._leased(cast(list[Any], reply))
        return taken

    def _leased(self, reply: list[Any]) -> list[tuple[str, int]]:
        """The ``(table id, version)`` pairs of a lease script's reply; lowers
        :attr:`next_due` to the earliest timer left on its shard."""
        *pairs, first = reply
        if first:
            self.next_due = min(self.next_due, int(float(as_text(first))))
        return [(as_text(pairs[i]), int(pairs[i + 1])) for i in range(0, len(pairs), 2)]

    async def fire(self, table_id: str, version: int) -> Timeout | None:
        """Send the default action of a timer taken at ``version`` if the table is still there."""
        keys = self.timer_keys(self.keys.shard_of(table_id))
        table = await self.service.load(table_id)
        timeout = timeout_command(table) if table.version == version else None
        if timeout is not None:
            entry_id = await submit_command(
                self.client, self.keys, timeout.command, timeout.seat, self.clock()
            )
            self.log.info(
                "turn_timed_out",
                table=table_id,
                seat=timeout.seat,
                command_id=timeout.command.command_id,
                version=version,
                type=timeout.command.type,
                entry=entry_id,
            )
        else:
            self.log.debug("timer_stale", table=table_id, version=version, now=table.version)
        await self._done(keys=keys, args=[table_id, version])
        return timeout

    async def tick(self, shards: Sequence[int] | None = None) -> list[Timeout]:
        """Fire every timer due now; return the default actions sent."""
        sent: list[Timeout] = []
        for table_id, version in await self.due(shards):
            timeout = await self.fire(table_id, version)
            if timeout is not None:
                sent.append(timeout)
        return sent

    async def tick_if_due(self, sweep_ms: int = SWEEP_MS) -> list[Timeout]:
        """:meth:`tick` when a timer known to this clock is due, or ``sweep_ms`` after its last
        look at every shard; else nothing, without a call to Redis."""
        now = self.clock()
        if now < self.next_due and self.swept_at is not None and now - self.swept_at < sweep_ms:
            return []
        return await self.tick()


async def run_clock(
    settings: Settings,
    stop: asyncio.Event | None = None,
    clock: Callable[[], int] = time_ms,
    *,
    tick_ms: int = 200,
    block_ms: int = 500,
) -> None:
    """Arm timers from the feeds and fire the due ones every ``tick_ms`` until ``stop`` is set.

    ``clock`` (ms since the epoch) decides what is due; inject one in tests.
    """
    stop = stop or asyncio.Event()
    log: Any = service_log.get_logger("turn_clock")
    client = await connect_when_up(settings.redis_url, log, stop)
    if client is None:
        return
    turn_clock = TurnClock(client, settings.keys, clock=clock, lease_ms=settings.claim_idle_ms)
    follower = FeedFollower(
        client,
        settings.keys,
        FOLLOWER_NAME,
        count=settings.batch_size,
        block_ms=block_ms,
        linger_ms=LINGER_MS,
    )

    async def arm() -> None:
        await follow_through_outages(follower, turn_clock.handle, stop, log)

    async def fire() -> None:
        outage = Outage(log, "fire")
        while not stop.is_set():
            try:
                await turn_clock.tick_if_due()
            except OUTAGE_ERRORS as error:
                await outage.wait(error, stop)
                continue
            outage.ok()
            await pause(stop, tick_ms / 1000)

    log.info("turn_clock_started", shards=settings.shards, namespace=settings.namespace)
    try:
        async with asyncio.TaskGroup() as group:
            group.create_task(arm())
            group.create_task(fire())
    finally:
        await client.aclose()
        log.info("turn_clock_stopped")


def main() -> None:
    """``python -m services.followers.turn_clock``: run until SIGINT or SIGTERM."""
    settings = load_settings()
    service_log.configure(settings.log_level)
    settle_long_lived()
    run_until_signal(lambda stop: run_clock(settings, stop))


if __name__ == "__main__":
    main()
