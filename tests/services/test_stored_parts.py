"""services.tables.stored_parts: what a table stores of its views, and each viewer's view put
together from it (the public part and, for a seat, that seat's own part only)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from played_tables import play_games  # tests/services on sys.path

from engine.views import seat_view, spectator_view
from services.store import KeySpace, MemoryEventStore
from services.tables.stored_parts import (
    PUBLIC_ONLY,
    SEAT_PARTS,
    STORED_PARTS,
    VIEWERS,
    TableFold,
    assemble,
    parts_for,
    spectator_of,
    version_of,
    viewer_of,
)
from services.tables.table import fold_table


async def folded_views(count: int = 2) -> list[tuple[dict[str, Any], Any]]:
    """The stored parts (parsed) and the true match at every version of a few bot games."""
    store = MemoryEventStore(KeySpace("mem", shards=4))
    games = await play_games(store, count, seed=21, deals=2)
    out = []
    for game in games:
        secrets = await store.secrets(game.table_id)
        truth = None
        fold = TableFold(game.table_id)
        for e in await store.read(game.table_id):
            truth = fold_table(game.table_id, [(e.version, e.hash, e.body)], secrets, truth)
            fold.apply_body(e.version, e.body)
            try:
                parts = fold.views()
            except ValueError:  # inside a deal's start
                continue
            out.append(({p: json.loads(t) for p, t in parts.items()}, truth.match))
    return out


async def test_every_viewer_gets_the_engines_view_from_the_parts() -> None:
    checked = 0
    for parts, match in await folded_views():
        assert tuple(parts) == STORED_PARTS
        public = parts["public"]
        assert tuple(public)[2 : 2 + len(PUBLIC_ONLY)] == PUBLIC_ONLY
        head = {"table_id": public["table_id"], "version": public["version"]}
        seated = None not in public["seats"]
        expected = {
            "seat0": {**head, **seat_view(match, 0, seated=seated)},
            "seat1": {**head, **seat_view(match, 1, seated=seated)},
            "spectator": {**head, **spectator_view(match)},
        }
        for viewer, view in expected.items():
            got = assemble(viewer, public, parts.get(viewer))
            # byte for byte, keys in order: what was stored whole before the split
            assert json.dumps(got) == json.dumps(json.loads(json.dumps(view))), viewer
        assert assemble("public", public) == public
        checked += 1
    assert checked > 50


async def test_a_seat_part_holds_only_its_own_hand() -> None:
    for parts, match in await folded_views(1):
        if match.deal is None:
            continue
        for seat, name in enumerate(SEAT_PARTS):
            part = parts[name]
            assert set(part) == {"table_id", "version", "seat", "hand", "legal_actions"}
            assert part["seat"] == seat and part["hand"] is not None
            if part["legal_actions"] == ["next_deal"]:  # either seat, between deals
                assert match.to_act is None and match.between_deals
            elif part["legal_actions"]:
                assert match.to_act == seat


def test_a_viewer_needs_the_public_part_and_only_its_own_seat_part() -> None:
    assert parts_for("public") == ("public",) and parts_for("spectator") == ("public",)
    assert parts_for("seat0") == ("public", "seat0") and parts_for("seat1") == ("public", "seat1")
    assert [viewer_of(s) for s in (0, 1, None)] == ["seat0", "seat1", "spectator"]
    assert set(VIEWERS) == {*STORED_PARTS, "spectator"}
    with pytest.raises(ValueError, match="no view 'seat2'"):
        parts_for("seat2")


async def test_missing_or_mismatched_parts_give_no_view() -> None:
    parts, _ = (await folded_views(1))[-1]
    public, seat0 = parts["public"], parts["seat0"]
    assert assemble("seat0", None, seat0) is None
    assert assemble("seat0", public, None) is None
    assert assemble("spectator", None) is None
    older = {**seat0, "version": public["version"] - 1}
    assert assemble("seat0", public, older) is None, "parts of two versions are never mixed"
    with pytest.raises(ValueError, match="seat 1's"):
        assemble("seat0", public, parts["seat1"])


def test_a_whole_seat_view_stored_before_the_split_is_served_as_it_is() -> None:
    legacy = {"table_id": "t", "version": 7, "seat": 0, "deal": None, "legal_actions": []}
    assert assemble("seat0", None, legacy) == legacy
    assert (
        version_of(legacy) == 7 and version_of(None) == -1 and version_of({"version": True}) == -1
    )


def test_the_spectator_view_is_the_public_one_without_the_tables_fields() -> None:
    public = {
        "table_id": "t",
        "version": 3,
        **dict.fromkeys(PUBLIC_ONLY),
        "rules": {},
        "deal": None,
    }
    assert spectator_of(public) == {
        "table_id": "t",
        "version": 3,
        "seat": None,
        "rules": {},
        "deal": None,
        "legal_actions": [],
    }
