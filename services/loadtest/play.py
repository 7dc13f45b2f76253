"""What a scripted table plays: the next command of a table from its seats' views.

Seeded choices from ``legal_actions``, deliberate out-of-turn moves with ``bad_share``, and
the wire command of a move: ``docs/loadtest.md`` ("Module notes").

>>> choose(["turn"], 7, "t-1", 3)
'turn'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from engine.views import NEXT_DEAL
from events.mapping import legal_to_wire

__all__ = ["NEXT_DEAL", "Move", "TablePlay", "choose", "command_json", "draw", "view_version"]


@dataclass(frozen=True)
class Move:
    """A command one seat of a table sends: its action text, and whether it must be refused."""

    seat: int
    action: str
    version: int
    bad: bool = False


def draw(seed: int, table_id: str, version: int) -> int:
    """Return 64 bits drawn from the seed, the table and its version: the BLAKE2b digest (8
    bytes, big-endian) of ``<seed>:<table>:<version>``, the same wherever it is drawn.

    >>> draw(1, "t-1", 3) == draw(1, "t-1", 3) != draw(2, "t-1", 3)
    True
    """
    text = f"{seed}:{table_id}:{version}".encode()
    return int.from_bytes(blake2b(text, digest_size=8).digest(), "big")


def choose(legal: Sequence[str], seed: int, table_id: str, version: int) -> str:
    """Return one of ``legal`` (engine notation), chosen from the seed, table and version.

    Raises ValueError for no legal action.
    """
    if not legal:
        raise ValueError(f"table {table_id} at version {version}: no legal action to choose")
    return legal[draw(seed, table_id, version) % len(legal)]


WIRE_CACHE = 4096
"""Actions whose wire command :func:`command_json` keeps (emptied when full)."""
_wire: dict[str, dict[str, Any]] = {}


def command_json(move: Move, table_id: str, command_id: str) -> dict[str, Any]:
    """Return the wire command of a move as JSON data, with ``expected_version``: what
    ``legal_to_wire(...).model_dump(mode="json", exclude_none=True)`` returns, built once an
    action (the ids and version put into a copy).

    Raises ``engine.errors.NotationError`` for a text that is no action.
    """
    shape = _wire.get(move.action)
    if shape is None:
        if len(_wire) >= WIRE_CACHE:
            _wire.clear()
        command = legal_to_wire(move.action, table_id, command_id, move.version)
        shape = _wire[move.action] = command.model_dump(mode="json", exclude_none=True)
    return {
        **shape,
        "command_id": command_id,
        "table_id": table_id,
        "expected_version": move.version,
    }


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
        self.versions = [-1, -1]
        """The version of each seat's view held (-1: none), read at every decision."""
        self.over = False
        self.deals_finished = 0
        self._bad_at = -1
        self._deals_seen: set[int] = set()

    def see_version(self, version: int | None) -> None:
        """Note that the table has reached ``version`` (from a command's result)."""
        if version is not None and version > self.version:
            self.version = version

    def see_view(self, seat: int, view: Mapping[str, Any]) -> bool:
        """Keep ``view`` as the seat's if it is newer; return whether it was.

        A seat's stored part (``version``, ``legal_actions``, no ``deal``) is enough to choose
        from; the match's end then comes from :meth:`see_end`.
        """
        version = view_version(view)
        if version <= self.versions[seat]:
            return False
        self.views[seat] = view
        self.versions[seat] = version
        self.see_version(version)
        deal = view.get("deal")
        if isinstance(deal, dict) and deal.get("phase") == "over":
            self._deals_seen.add(int(deal.get("number") or 0))
            self.deals_finished = len(self._deals_seen)
        if view.get("match_over") is True:
            self.over = True
        return True

    def see_end(self, deals_played: int) -> None:
        """Note that the match is over after ``deals_played`` deals (its public view says so:
        what a reader of the seats' parts alone does not see)."""
        self.over = True
        self.deals_finished = max(self.deals_finished, deals_played)

    def current(self, seat: int) -> Mapping[str, Any] | None:
        """Return the seat's view if it is at the newest known version, else None."""
        return self.views[seat] if self.versions[seat] == self.version else None

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
        if draw(self.seed + 1, self.table_id, self.version) >= self.bad_share * 2**64:
            return False
        self._bad_at = self.version
        return True
