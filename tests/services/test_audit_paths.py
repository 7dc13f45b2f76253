"""The audit's two paths agree: on random tables, clean or corrupted, the fast path either gives
up or gives the full audit's report, and it certifies every clean table (``docs/audit.md``).

A table is a random game played through ``TableService`` on the memory store (random seeds and
moves, as ``tests/engine/test_properties.py`` plays them), with the lobby's events drawn in: a
seat given up and taken again, a bot's failure, a resignation, a rematch.  Its events are then
stored as Redis stores them (``pack_body``) and corrupted in one way: a payload field changed, an
event dropped, two swapped, a command forged or replayed, a hash broken, the head changed; with
the chain and head left as they were or recomputed by a forger.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.bots import RandomBot
from engine.cards import ALL_CARDS, format_card
from events.chain import GENESIS_HASH, event_hash
from events.commands import (
    Command,
    CreateTable,
    Join,
    LeaveTable,
    NextDeal,
    Rematch,
    ReportBotFailure,
    Resign,
)
from events.mapping import to_wire_command
from services.audit import TableReport
from services.store import MemoryEventStore
from services.store.base import Head
from services.store.redis_store import pack_body
from services.tables.service import TableService
from tests.services.test_audit import _fast, _full

T = "paths-1"
Body = dict[str, Any]
_CARDS = [format_card(c) for c in ALL_CARDS]
_RARE = frozenset(
    {"player_joined", "player_left", "rematch_agreed", "rematch_opened", "bot_failed"}
)
"""Few a table: a corruption picks one of them more often than its share."""
_HOW = ("field", "drop", "swap", "forge", "replay", "hash", "head")


@dataclass(frozen=True)
class Plan:
    """One random table: how it is played."""

    seed: int
    deals: int
    bot: bool  # seat 1 is a random bot
    leave: bool  # seat 0 is taken, given up and taken again before the first deal
    moves: int
    bot_fails_at: int  # the move before which the bot reports a failure (bot tables)
    resign: bool
    rematch: bool


plans = st.builds(
    Plan,
    seed=st.integers(0, 2**32 - 1),
    deals=st.integers(1, 2),
    bot=st.booleans(),
    leave=st.booleans(),
    moves=st.integers(0, 150),
    bot_fails_at=st.integers(0, 60),
    resign=st.booleans(),
    rematch=st.booleans(),
)


async def _play(plan: Plan) -> tuple[list[Body], list[str], Head]:
    rng = random.Random(plan.seed)
    store = MemoryEventStore()
    times = itertools.count(1_700_000_000_000, 7)
    service = TableService(
        store,
        clock=lambda: next(times),
        seed_source=lambda: rng.randbytes(32),
        dealer_source=lambda: rng.randrange(2),
        token_hasher=lambda t, s, c: "ab" * 32,
    )
    numbers = itertools.count()

    def cid(kind: str) -> str:
        return f"{kind}-{next(numbers):05d}"

    async def send(command: Command, seat: int | None) -> None:
        outcome = await service.execute(command, seat)
        assert outcome.ok, outcome.result

    bots = {1: "random"} if plan.bot else None
    create = CreateTable(table_id=T, command_id=cid("create"), deals=plan.deals, bots=bots)
    await send(create, None)
    if plan.leave and not plan.bot:  # before the first deal (a bot table deals on the join)
        await send(Join(table_id=T, command_id=cid("join"), seat=0, name="ana"), None)
        await send(LeaveTable(table_id=T, command_id=cid("leave")), 0)
    if not plan.bot:
        await send(Join(table_id=T, command_id=cid("join"), seat=1, name="cy"), None)
    await send(Join(table_id=T, command_id=cid("join"), seat=0, name="bo"), None)
    bot = RandomBot()
    for step in range(plan.moves):
        match = (await service.load(T)).match
        assert match is not None
        if match.over:
            break
        if plan.bot and step == plan.bot_fails_at:
            failure = ReportBotFailure(
                table_id=T, command_id=cid("fail"), code="bot/no_move", message="no move"
            )
            await send(failure, 1)
        seat = match.to_act
        if seat is None:  # between deals
            await send(NextDeal(table_id=T, command_id=cid("next")), 0)
            continue
        await send(to_wire_command(bot.choose(match, seat, rng), T, cid("move")), seat)
    match = (await service.load(T)).match
    assert match is not None
    if plan.resign and not match.over:
        await send(Resign(table_id=T, command_id=cid("resign")), rng.randrange(2))
    if plan.rematch and (await service.load(T)).match.over:  # type: ignore[union-attr]
        for seat in (0,) if plan.bot else (1, 0):
            await send(Rematch(table_id=T, command_id=cid("again"), next_table_id="t-2"), seat)
    stored = await store.read(T)
    head = await store.head(T)
    return [dict(e.body) for e in stored], [e.hash for e in stored], head


def _changed(value: Any, rng: random.Random) -> Any:
    """A value of a body changed as a forger might: another card, number, flag or list."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice((-1, 1))
    if value is None:
        return rng.choice((0, 1))
    if isinstance(value, str):
        if value in _CARDS:
            return rng.choice([c for c in _CARDS if c != value])
        return rng.choice((value[:-1], value + "x", value.upper() if value.islower() else "a"))
    if isinstance(value, list):
        if value and rng.random() < 0.5:
            return value[:-1]
        return [*value, rng.choice(_CARDS)] if rng.random() < 0.5 else value[::-1]
    return {}


Stored = tuple[list[Body], list[str], Head]


def _rechain(bodies: list[Body], head: Head) -> Stored:
    """The bodies as versions 1, 2, … with the chain and the head recomputed (a forger)."""
    out: list[Body] = []
    hashes: list[str] = []
    prev = GENESIS_HASH
    for version, body in enumerate(bodies, 1):
        body = {**body, "version": version}
        prev = event_hash(prev, body)
        out.append(body)
        hashes.append(prev)
    return out, hashes, Head(len(out), prev, head.status)


def _corrupt(stored: Stored, how: str, rng: random.Random, rechain: bool) -> Stored:
    """The table changed in one way (``how``)."""
    bodies, hashes, head = copy.deepcopy(stored)
    n = len(bodies)
    rare = [k for k, body in enumerate(bodies) if body["type"] in _RARE]
    i = rng.choice(rare) if rare and rng.random() < 0.3 else rng.randrange(n)
    if how == "hash":
        digest = hashes[i]
        hashes[i] = ("0" if digest[0] != "0" else "1") + digest[1:]
        return bodies, hashes, head
    if how == "head":
        status = rng.choice(("open", "playing", "over"))
        version = head.version + rng.choice((-1, 0, 1))
        digest = hashes[version - 1] if 1 <= version <= len(hashes) else head.hash
        return bodies, hashes, Head(version, digest, status)
    if how == "field":
        body = bodies[i]
        key = rng.choice(sorted(k for k in body if k not in ("table_id", "version")))
        body[key] = _changed(body[key], rng)
    elif how == "drop":
        del bodies[i]
        del hashes[i]
    elif how == "swap" and n > 1:
        i = min(i, n - 2)
        bodies[i], bodies[i + 1] = bodies[i + 1], bodies[i]
        hashes[i], hashes[i + 1] = hashes[i + 1], hashes[i]
    elif how in ("forge", "replay"):  # a command's events again: under a new id, or the same
        start = i
        while start > 0 and bodies[start - 1]["command_id"] == bodies[i]["command_id"]:
            start -= 1
        end = i + 1
        while end < n and bodies[end]["command_id"] == bodies[i]["command_id"]:
            end += 1
        group = copy.deepcopy(bodies[start:end])
        if how == "forge":
            for body in group:
                body["command_id"] = f"forged-{rng.randrange(10**6):06d}"
        at = rng.randrange(start, n + 1)
        bodies[at:at] = group
        hashes[at:at] = hashes[start:end]
    if rechain:
        return _rechain(bodies, head)
    return bodies, hashes, head


def _entries(stored: Stored) -> tuple[list[tuple[bytes, bytes]], Head]:
    bodies, hashes, head = stored
    return [(pack_body(b), bytes.fromhex(h)) for b, h in zip(bodies, hashes, strict=True)], head


def _verdict(report: TableReport) -> tuple[str, int] | None:
    """Pass (None), or the first failure's code and version."""
    failure = report.failure
    return None if failure is None else (failure.code, failure.version)


_PLAYED: dict[Plan, Stored] = {}


def _played(plan: Plan) -> Stored:
    if plan not in _PLAYED:
        _PLAYED[plan] = asyncio.run(_play(plan))
    return _PLAYED[plan]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans)
def test_the_fast_path_certifies_every_clean_table(plan: Plan) -> None:
    entries, head = _entries(_played(plan))
    full = _full(T, entries, head)
    assert full.ok, full.failure
    assert _fast(T, entries, head) == full


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=plans, seed=st.integers(0, 2**32 - 1))
def test_on_corrupted_tables_the_fast_path_gives_the_full_verdict(plan: Plan, seed: int) -> None:
    """The fast path's verdict is the full re-decide's: it certifies only what the full audit
    passes (the same report), and leaves the rest to the full audit (None).  Each random table
    is corrupted in every way, three times, with the chain left and recomputed."""
    played = _played(plan)
    rng = random.Random(seed)
    for how, rechain, _ in itertools.product(_HOW, (False, True), range(3)):
        stored = _corrupt(played, how, rng, rechain)
        try:
            entries, head = _entries(stored)
        except (TypeError, ValueError):  # not even storable (a type that is no string)
            continue
        full = _full(T, entries, head)
        fast = _fast(T, entries, head)
        assert fast is None or (_verdict(fast), fast) == (_verdict(full), full), (how, rechain)
        if _verdict(full) is not None:
            assert fast is None, (how, rechain, full.failure)
