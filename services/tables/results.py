"""What executing a command gives: :class:`CommandResult` (accepted or rejected, with its
versions and the new table), a batch's items and results, and :class:`Plan` (a command decided,
before its append); ``services.tables.service`` makes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from events.commands import Command
from services.store.base import AppendRequest
from services.tables.table import Table

__all__ = ["BatchItem", "BatchResult", "CommandResult", "Plan"]


@dataclass(frozen=True)
class CommandResult:
    """A command executed: accepted or rejected, its result, versions and the new table (not
    the gateway's ``intake.Answer``, what a client is sent)."""

    ok: bool
    result: dict[str, Any]
    duplicate: bool = False
    first_version: int = 0
    last_version: int = 0
    table: Table | None = None
    viewed: bool = False
    """The table's views at ``last_version`` were stored with the append (see
    :meth:`TableService.views_after`)."""

    @property
    def code(self) -> str | None:
        """Return the rejection code, None when accepted."""
        code = self.result.get("code")
        return None if self.ok or not isinstance(code, str) else code


BatchItem = tuple[Command, int | None]
"""A command and the seat that sent it (None for table-level commands)."""

BatchResult = CommandResult | BaseException | None
"""What ``execute_many`` answers for one command: its result, the exception that stopped its
table, or None when its table was not attempted (``proceed`` said no)."""


@dataclass(frozen=True)
class Plan:
    """A command decided on a table, before its append: the append to make and what it means.

    ``following`` is the table after the decision's events (its hash not known before they are
    stored), None for a rejection, whose append records ``result`` under the command id.
    """

    table: Table
    command: Command
    seat: int | None
    request: AppendRequest
    result: dict[str, Any]
    following: Table | None
