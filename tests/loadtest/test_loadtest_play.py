"""The load tool's scripted play: whole tables to their end, deterministic, refused on purpose."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from engine.views import seat_view
from events import parse_command
from events.commands import CreateTable, Join, NextDeal, Refuse
from events.mapping import legal_to_wire
from services.loadtest.play import NEXT_DEAL, Move, TablePlay, choose, command_json
from services.store import MemoryEventStore
from services.tables.service import TableService


async def seated(service: TableService, table_id: str, deals: int) -> None:
    create = CreateTable(table_id=table_id, command_id="create-0001", deals=deals)
    await service.execute(create, None)
    for seat in (0, 1):
        join = Join(table_id=table_id, command_id=f"join-000{seat}", seat=seat, name=f"p{seat}")
        await service.execute(join, None)


async def play_out(
    table_id: str, deals: int, seed: int, bad_share: float, dealer_seed: bytes = b"d" * 32
) -> tuple[TablePlay, list[Move], dict[str, int]]:
    """Play a table with TablePlay against a memory store; return it, its moves and the
    rejection codes."""
    service = TableService(
        MemoryEventStore(), seed_source=lambda: dealer_seed, dealer_source=lambda: 0
    )
    await seated(service, table_id, deals)
    play = TablePlay(table_id, seed, bad_share)
    moves: list[Move] = []
    codes: dict[str, int] = {}
    for n in range(1, 5000):
        table = await service.load(table_id, fresh=True)
        assert table.match is not None
        for seat in (0, 1):
            play.see_view(seat, {**seat_view(table.match, seat), "version": table.version})
        move = play.next_move()
        if move is None:
            break
        moves.append(move)
        command = parse_command(command_json(move, table_id, f"cmd-{n:05d}"))
        outcome = await service.execute(command, move.seat)
        if not outcome.ok:
            code = str(outcome.result.get("code"))
            codes[code] = codes.get(code, 0) + 1
        assert outcome.ok is not move.bad, (move, outcome.result)
    return play, moves, codes


async def test_a_scripted_table_plays_its_match_to_the_end() -> None:
    play, moves, codes = await play_out("lt-unit-1", deals=3, seed=7, bad_share=0.0)
    assert play.over
    assert play.deals_finished == 3
    assert codes == {}
    assert sum(m.action == NEXT_DEAL for m in moves) == 2  # between the three deals
    assert all(m.seat == 0 for m in moves if m.action == NEXT_DEAL)


async def test_the_same_seed_and_deck_play_the_same_moves() -> None:
    first = (await play_out("lt-unit-2", 1, seed=3, bad_share=0.0))[1]
    again = (await play_out("lt-unit-2", 1, seed=3, bad_share=0.0))[1]
    other = (await play_out("lt-unit-2", 1, seed=4, bad_share=0.0))[1]
    assert first == again
    assert first != other


async def test_moves_sent_out_of_turn_are_refused_as_not_your_turn() -> None:
    play, moves, codes = await play_out("lt-unit-3", 1, seed=5, bad_share=0.5)
    bad = sum(m.bad for m in moves)
    assert play.over
    assert bad > 0
    assert codes == {"move/not_your_turn": bad}


def test_a_seat_acts_only_on_a_view_at_the_newest_version() -> None:
    play = TablePlay("t-1", 1)
    view = {"version": 5, "match_over": False, "deal": {"phase": "turn"}}
    play.see_view(0, {**view, "legal_actions": []})
    play.see_view(1, {**view, "legal_actions": ["turn"]})
    assert play.next_move() == Move(1, "turn", 5)
    play.see_version(6)  # a result moved the table on: both views are old now
    assert play.next_move() is None
    assert not play.see_view(1, {**view, "version": 4, "legal_actions": ["turn"]})


def test_choose_needs_a_legal_action() -> None:
    assert choose(["refuse", "turn"], 1, "t-1", 2) == choose(["refuse", "turn"], 1, "t-1", 2)
    with pytest.raises(ValueError, match="no legal action"):
        choose([], 1, "t-1", 2)


def test_command_json_parses_as_the_wire_command() -> None:
    data: dict[str, Any] = command_json(Move(0, NEXT_DEAL, 9), "t-1", "cmd-00001")
    command = parse_command(data)
    assert isinstance(command, NextDeal) and command.expected_version == 9
    take = parse_command(command_json(Move(1, "refuse", 4), "t-1", "cmd-00002"))
    assert isinstance(take, Refuse) and take.expected_version == 4


def test_choices_spread_over_the_legal_actions_and_bad_moves_keep_their_share() -> None:
    legal = ["refuse", "turn", "take 5D 6D => 4D5D6D"]
    counts = Counter(choose(legal, 1, "lt-spread", version) for version in range(3000))
    assert set(counts) == set(legal)
    assert all(800 < n < 1200 for n in counts.values()), counts
    play = TablePlay("lt-spread", 1, bad_share=0.25)
    view = {"match_over": False, "legal_actions": ["turn"]}
    bad = 0
    for version in range(2000):
        play.see_view(0, {**view, "version": version})
        bad += play.next_move() == Move(1, "turn", version, bad=True)
    assert 400 < bad < 600  # a quarter of the positions


async def test_the_wire_command_of_every_move_is_pydantics() -> None:
    """``command_json`` builds a command once an action; each one equals the model's dump."""
    _, moves, _ = await play_out("lt-unit-4", deals=2, seed=9, bad_share=0.2)
    for n, move in enumerate(moves, start=1):
        command_id = f"cmd-{n:05d}"
        wire = legal_to_wire(move.action, "lt-unit-4", command_id, move.version)
        expected = wire.model_dump(mode="json", exclude_none=True)
        made = command_json(move, "lt-unit-4", command_id)
        assert made == expected and list(made) == list(expected)
