"""What a scripted table plays: the next command of a table from its seats' views.

Seeded choices from ``legal_actions``, and deliberate out-of-turn moves with ``bad_share``:
``docs/loadtest.md`` ("Module notes").

>>> choose(["turn"], 7, "t-1", 3)
'turn'
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.views import NEXT_DEAL
from events.mapping import legal_to_wire

__all__ = ["NEXT_DEAL", "Move", "TablePlay", "choose", "command_json", "rng_for", "view_version"]


@dataclass(frozen=True)
class Move:
    """A command one seat of a table sends: its action text, and whether it must be refused."""

    seat: int
    action: str
    version: int
    bad: bool = False


def rng_for(seed: int, table_id: str, version: int) -> random.Random:
    """Return the random source of a table's choice at ``version``."""
    return random.Random(f"{seed}:{table_id}:{version}")


def choose(legal: Sequence[str], seed: int, table_id: str, version: int) -> str:
    """Return one of ``legal`` (engine notation), chosen from the seed, table and version.

    Raises ValueError for no legal action.
    """
    if not legal:
        raise ValueError(f"table {table_id} at version {version}: no legal action to choose")
    return rng_for(seed, table_id, version).choice(list(legal))


def command_json(move: Move, table_id: str, command_id: str) -> dict[str, Any]:
    """Return the wire command of a move as JSON data, with ``expected_version``."""
    command = legal_to_wire(move.action, table_id, command_id, move.version)
    return command.model_dump(mode="json", exclude_none=True)


def view_version(view: Mapping[str, Any] | None) -> int:
    """Return the version of a view, -1 for none."""
    if view is None:
        return -1
    version = view.get("version")
    return version if isinstance(version, int) else -1


class TablePlay:
    """The state of one scripted table as the tool sees it, and its next move."""

    def __init__(self, table_id: str, seed: int, bad_share: float = 0.0) -> None:
        self.table_id = table_id
        self.seed = seed
        self.bad_share = bad_share
        self.version = 0
        self.views: list[Mapping[str, Any] | None] = [None, None]
        self.over = False
        self.deals_finished = 0
        self._bad_at = -1
        self._deals_seen: set[int] = set()

    def see_version(self, version: int | None) -> None:
        """Note that the table has reached ``version`` (from a command's result)."""
        if version is not None and version > self.version:
            self.version = version

    def see_view(self, seat: int, view: Mapping[str, Any]) -> bool:
        """Keep ``view`` as the seat's if it is newer; return whether it was."""
        version = view_version(view)
        if version <= view_version(self.views[seat]):
            return False
        self.views[seat] = view
        self.see_version(version)
        deal = view.get("deal")
        if isinstance(deal, dict) and deal.get("phase") == "over":
            self._deals_seen.add(int(deal.get("number") or 0))
            self.deals_finished = len(self._deals_seen)
        if view.get("match_over") is True:
            self.over = True
        return True

    def current(self, seat: int) -> Mapping[str, Any] | None:
        """Return the seat's view if it is at the newest known version, else None."""
        view = self.views[seat]
        return view if view is not None and view_version(view) == self.version else None

    def next_move(self) -> Move | None:
        """Return the move to send now, None while waiting for a view (or when over)."""
        if self.over:
            return None
        for seat in (0, 1):
            view = self.current(seat)
            if view is None:
                continue
            legal = view.get("legal_actions") or []
            if legal:
                action = choose(legal, self.seed, self.table_id, self.version)
                if action != NEXT_DEAL and self._bad_now():
                    return Move(1 - seat, action, self.version, bad=True)
                return Move(seat, action, self.version)
        return None

    def _bad_now(self) -> bool:
        """Say whether to send a refused move first at this version (once a version)."""
        if self.bad_share <= 0 or self._bad_at == self.version:
            return False
        if rng_for(self.seed + 1, self.table_id, self.version).random() >= self.bad_share:
            return False
        self._bad_at = self.version
        return True
