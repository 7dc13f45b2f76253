"""The scripted play loop through a TableLink, here one on an in-memory table service:
commands, results, views and rejections counted as the drivers count them."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from engine.views import seat_view
from events import parse_command
from events.commands import CreateTable, Join
from services.chaos.checks import applied_twice, command_runs
from services.loadtest import links
from services.loadtest.ledger import Ledger, read_ledger
from services.loadtest.links import Context, TableGivenUp, play_scripted
from services.loadtest.pacing import Pacer
from services.loadtest.play import TablePlay
from services.loadtest.stats import Stats
from services.store import MemoryEventStore
from services.tables.service import TableService


class MemoryLink:
    """A table played on a TableService in this process; ``answer`` may replace a result."""

    def __init__(self, play: TablePlay, answer: dict[str, Any] | None = None) -> None:
        self.play = play
        self.service = TableService(
            MemoryEventStore(), seed_source=lambda: b"s" * 32, dealer_source=lambda: 0
        )
        self.answer = answer
        self.results: dict[str, dict[str, Any]] = {}

    async def open(self, stats: Stats) -> None:
        table_id = self.play.table_id
        await self.service.execute(
            CreateTable(table_id=table_id, command_id="create-0001", deals=2), None
        )
        for seat in (0, 1):
            join = Join(table_id=table_id, command_id=f"join-000{seat}", seat=seat, name="p")
            await self.service.execute(join, None)
        await self._views()

    async def _views(self) -> None:
        table = await self.service.load(self.play.table_id, fresh=True)
        assert table.match is not None
        for seat in (0, 1):
            self.play.see_view(seat, {**seat_view(table.match, seat), "version": table.version})

    async def send(self, seat: int, command: Mapping[str, Any]) -> float:
        started = time.perf_counter()
        outcome = await self.service.execute(parse_command(dict(command)), seat)
        result = {**outcome.result, "ok": outcome.ok, "version": outcome.last_version}
        self.results[str(command["command_id"])] = self.answer or result
        return started

    async def result(self, command_id: str, deadline: float) -> tuple[Mapping[str, Any], float]:
        return self.results.pop(command_id), time.perf_counter()

    async def view_at(self, seat: int, version: int, deadline: float) -> float:
        await self._views()
        return time.perf_counter()

    async def changed(self, deadline: float) -> None:
        await self._views()

    async def watch(self, deadline: float, stats: Stats) -> int:
        raise AssertionError("no bot tables here")

    async def reconnect(self) -> None:
        pass

    async def close(self) -> None:
        pass


class LostAnswers(MemoryLink):
    """Applies every command, but the first answer of each is lost (a socket that dropped),
    and the first view wait of each version times out: every call must be made again."""

    def __init__(self, play: TablePlay) -> None:
        super().__init__(play)
        self.lost: set[str] = set()
        self.late: set[int] = set()
        self.reconnects = 0
        self.sent: list[str] = []

    async def send(self, seat: int, command: Mapping[str, Any]) -> float:
        self.sent.append(str(command["command_id"]))
        return await super().send(seat, command)

    async def result(self, command_id: str, deadline: float) -> tuple[Mapping[str, Any], float]:
        if command_id not in self.lost:
            self.lost.add(command_id)
            self.results.pop(command_id)
            raise TableGivenUp("ws/closed", "close code 1006")
        return await super().result(command_id, deadline)

    async def view_at(self, seat: int, version: int, deadline: float) -> float:
        if version not in self.late:
            self.late.add(version)
            raise TableGivenUp("view/timeout", f"table {self.play.table_id}")
        return await super().view_at(seat, version, deadline)

    async def reconnect(self) -> None:
        self.reconnects += 1


async def test_a_match_is_played_with_a_result_and_a_view_for_every_command() -> None:
    stats = Stats()
    link = MemoryLink(TablePlay("lt-link-1", 2, bad_share=0.25))
    await link.open(stats)
    assert await play_scripted(link, Context(stats, Pacer(None), 5.0))
    totals = stats.totals()
    commands = totals["commands"]
    assert link.play.over and link.play.deals_finished == 2
    assert commands["sent"] == commands["results"] > 0
    assert commands["rejected"] == commands["refused_on_purpose"] > 0
    assert totals["rejections"] == {"move/not_your_turn": commands["rejected"]}
    assert totals["latency_ms"]["view"]["count"] == commands["accepted"]
    assert totals["errors"] == {}


async def test_a_pending_answer_gives_the_table_up_and_is_no_rejection() -> None:
    stats = Stats()
    link = MemoryLink(TablePlay("lt-link-2", 2), answer={"ok": None, "pending": True})
    await link.open(stats)
    with pytest.raises(TableGivenUp) as given_up:
        await play_scripted(link, Context(stats, Pacer(None), 5.0))
    assert given_up.value.code == "result/pending"
    assert stats.counts()["commands"] == {
        "sent": 1,
        "results": 0,
        "unanswered": 1,
        "accepted": 0,
        "rejected": 0,
        "refused_on_purpose": 0,
    }


async def test_a_legal_move_refused_gives_the_table_up() -> None:
    stats = Stats()
    refused = {"ok": False, "code": "command/stale_version", "version": 6}
    link = MemoryLink(TablePlay("lt-link-3", 2), answer=refused)
    await link.open(stats)
    with pytest.raises(TableGivenUp) as given_up:
        await play_scripted(link, Context(stats, Pacer(None), 5.0))
    assert given_up.value.code == "result/unexpected_rejection"
    assert stats.totals()["rejections"] == {"command/stale_version": 1}


async def test_a_stopped_run_sends_nothing_more() -> None:
    stats = Stats()
    link = MemoryLink(TablePlay("lt-link-4", 2))
    await link.open(stats)
    context = Context(stats, Pacer(None), 5.0)
    context.stop.set()
    assert await play_scripted(link, context) is False
    assert stats.sent == 0


async def test_with_retry_a_lost_answer_is_asked_again_and_applied_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(links, "RETRY_PAUSE", 0.0)  # a retry a command: no need to wait here
    stats = Stats()
    link = LostAnswers(TablePlay("lt-link-5", 2))
    await link.open(stats)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    context = Context(stats, Pacer(None), 5.0, retry=True, ledger=ledger)
    assert await play_scripted(link, context)
    ledger.close()
    entries = read_ledger(tmp_path / "ledger.jsonl")
    commands = stats.counts()["commands"]
    assert link.play.over and commands["sent"] == commands["accepted"] == len(entries) > 0
    assert sorted(link.sent) == sorted(2 * [e.command_id for e in entries])  # each sent twice
    assert len({e.command_id for e in entries}) == len(entries)
    assert stats.retries == {"ws/closed": len(entries), "view/timeout": len(entries)}
    assert link.reconnects == 2 * len(entries)
    events = await link.service.store.read("lt-link-5")
    runs = command_runs(events)
    assert applied_twice(runs) == []
    last = {e.body["command_id"]: e.version for e in events}
    assert all(last[e.command_id] == e.version for e in entries)


async def test_without_retry_a_lost_answer_gives_the_table_up() -> None:
    stats = Stats()
    link = LostAnswers(TablePlay("lt-link-6", 2))
    await link.open(stats)
    with pytest.raises(TableGivenUp) as given_up:
        await play_scripted(link, Context(stats, Pacer(None), 5.0))
    assert given_up.value.code == "ws/closed" and link.reconnects == 0


async def test_with_retry_store_unavailable_is_sent_again_but_a_refusal_is_not() -> None:
    stats = Stats()
    away = {"ok": False, "code": "store/unavailable", "message": "Redis is away"}
    link = MemoryLink(TablePlay("lt-link-7", 2), answer=away)
    await link.open(stats)
    context = Context(stats, Pacer(None), 5.0, retry=True, retry_for=0.5)
    with pytest.raises(TableGivenUp) as given_up:  # away for longer than retry_for
        await play_scripted(link, context)
    assert given_up.value.code == "store/unavailable" and stats.retries["store/unavailable"] > 1
    assert stats.counts()["commands"]["results"] == 0  # an outage is no answer
    refused = {"ok": False, "code": "command/stale_version", "version": 6}
    link = MemoryLink(TablePlay("lt-link-8", 2), answer=refused)
    await link.open(stats)
    with pytest.raises(TableGivenUp) as given_up:
        await play_scripted(link, Context(Stats(), Pacer(None), 5.0, retry=True))
    assert given_up.value.code == "result/unexpected_rejection"
