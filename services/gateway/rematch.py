"""Opening a rematch's table: the same rules, match length, turn clock, names and bots.

When both seats of a finished table agreed (``rematch_opened`` names the new table), the
rematch route sends, through the command stream like any client, a ``create_table`` for the
new table and a ``join`` for each human seat, under command ids derived from the deployment
secret: every ask sends the same commands, which the store answers as duplicates once applied,
so asking again is idempotent and a gateway that died half-way is taken over by the next ask.
The new table's id is derived from the old one with the secret too, so nobody can guess it
before the ``rematch_opened`` event shows it; a table created under that id by anyone else
makes the rematch answer 409 ``rematch/conflict`` (``docs/api.md``, "Lobby").
"""

from __future__ import annotations

from typing import Any

from engine.codes import Code
from events.commands import Command, CreateTable, Join, RuleOptions
from services.gateway.errors import ApiError
from services.gateway.state import Gateway
from services.tables.tokens import SeatTokens

_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"


def next_table_id(tokens: SeatTokens, table_id: str) -> str:
    """Return the id of the rematch's table of ``table_id``: ``t-`` and 12 base32 characters
    of an HMAC of the deployment secret."""
    digest = tokens.derive(f"rematch-table:{table_id}")
    return "t-" + "".join(_BASE32[b & 31] for b in digest[:12])


def _create_id(gateway: Gateway, new_id: str) -> str:
    return "r-" + gateway.tokens.derive(f"rematch-create:{new_id}").hex()[:22]


def _join_key(table_id: str, seat: int) -> str:
    return f"rematch:{table_id}:{seat}"


async def open_rematch(
    gateway: Gateway, table_id: str, new_id: str, seat: int, min_version: int
) -> str:
    """Create the rematch's table and seat the players (each step skipped once done);
    return ``seat``'s token there.  Raises ApiError ``rematch/conflict`` when the table or a
    seat was taken by someone else, ``view/not_ready`` or ``table/busy`` (retry)."""
    wait = gateway.settings.result_wait_ms / 1000
    view = await gateway.view_reader.wait(table_id, "public", min_version, wait)
    if view is None or view.get("version", 0) < min_version:
        raise ApiError(
            Code.VIEW_NOT_READY, f"table {table_id} has no view yet", headers={"Retry-After": "1"}
        )
    seats: list[dict[str, Any]] = view["seats"]
    bots = {s: str(h["bot"]) for s, h in enumerate(seats) if h and h.get("bot")}
    create = CreateTable(
        table_id=new_id,
        command_id=_create_id(gateway, new_id),
        rules=RuleOptions.model_validate(view["rules"]),
        deals=view["deals"],
        target_score=view["target_score"],
        turn_seconds=view["turn_seconds"],
        bots=bots or None,
    )
    await _done(gateway, create, "the rematch's table was created by someone else")
    tokens: dict[int, str] = {}
    for s, holder in enumerate(seats):
        if not holder or holder.get("bot"):
            continue
        command_id = gateway.tokens.join_command_id(new_id, _join_key(table_id, s))
        join = Join(table_id=new_id, command_id=command_id, seat=s, name=holder["name"])
        await _done(gateway, join, f"seat {s} of the rematch was taken by someone else")
        tokens[s] = gateway.tokens.token(new_id, s, command_id)
    return tokens[seat]


async def _done(gateway: Gateway, command: Command, conflict: str) -> None:
    """Send a rematch's command unless the store has its answer; raise unless it was applied."""
    answer = await gateway.intake.submit(command, None)
    if answer.pending:
        opening = "the rematch's table is being opened; ask again"
        raise ApiError(Code.TABLE_BUSY, opening, status=503)
    if not answer.ok:
        if answer.code in (Code.TABLE_EXISTS, Code.SEAT_TAKEN, Code.TABLE_FULL):
            raise ApiError(Code.REMATCH_CONFLICT, conflict)
        raise ApiError(answer.code or Code.COMMAND_FAILED, str(answer.result.get("message", "")))
