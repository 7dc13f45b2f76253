"""What the projector reports (round and rebuild counts, a busy shard) and the work items of a
round: one shard's pending write, one table's range of events to read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


class ProjectorBusy(RuntimeError):
    """Another projector holds the lease of some shards (``shards``); ``code`` is stable."""

    code = "projector/busy"

    def __init__(self, shards: Sequence[int]) -> None:
        super().__init__(
            f"shards {', '.join(map(str, shards))} are held by another projector: stop it first"
        )
        self.shards = tuple(shards)


@dataclass
class RoundStats:
    """What a round did: feed entries read, events folded, tables whose views were written."""

    entries: int = 0
    events: int = 0
    tables: int = 0
    failed: int = 0

    def add(self, other: RoundStats) -> None:
        """Add another round's counts to these."""
        self.entries += other.entries
        self.events += other.events
        self.tables += other.tables
        self.failed += other.failed


@dataclass
class RebuildStats:
    """What a rebuild did: tables rebuilt, events folded, orphan view keys deleted, positions."""

    tables: int = 0
    events: int = 0
    deleted: int = 0
    failed: int = 0
    positions: dict[int, str] = field(default_factory=dict)


@dataclass
class ShardWrite:
    """One shard's pending write: views by key, hints, the checkpoint before and after."""

    shard: int
    expected: str
    position: str
    views: dict[str, str] = field(default_factory=dict)
    hints: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)


@dataclass
class TableRead:
    """A table's events to read this round: ``first``..``last`` (``None``: to the end)."""

    table_id: str
    first: int
    last: int | None
    stored: int = 0  # version of the stored public view (a round reads it first; 0: none)
