"""Command ids are one seat's idempotency keys (issue 18, defect e), through the real gateway.

The ids are public (every envelope carries one), so a seat may send an id the other seat has
used. That is no retry: it must not get the other seat's result (``duplicate: true``) while its
own command is silently dropped. It is refused with ``command/id_taken``, changes nothing, and
the seat's retry gets the same refusal; a retry from the seat that used the id first still gets
that seat's first answer.
"""

from __future__ import annotations

from typing import Any

from tests.services.gateway_stack import Seat, Stack, refuser, wire_command

SHARED = "shared-cmd-0001"


async def to_act(seats: tuple[Seat, Seat], version: int) -> tuple[Seat, list[str]]:
    """Return the seat to act at ``version`` and its legal actions."""
    for seat in seats:
        view = await seat.view(version)
        if view["legal_actions"]:
            return seat, view["legal_actions"]
    raise AssertionError(f"nobody acts at version {version}")


async def send(seat: Seat, action: str, command_id: str, version: int | None) -> Any:
    return await seat.send(wire_command(action, seat.table_id, command_id, version))


async def test_a_seat_reusing_the_other_seats_command_id_is_refused_not_answered_as_a_duplicate(
    stack: Stack,
) -> None:
    await stack.create(table_id="ids", deals=1)
    seats = (await stack.join("ids", "Ana", seat=0), await stack.join("ids", "Bo", seat=1))
    version = seats[1].version
    first, legal = await to_act(seats, version)
    first_answer = (await send(first, refuser(legal), SHARED, version)).json()
    assert first_answer["ok"] is True and "duplicate" not in first_answer
    version = first_answer["version"]
    while (turn := await to_act(seats, version))[0] is first:  # until the other seat acts
        version = (await first.act(refuser(turn[1]), version))["version"]
    other, legal = turn
    action = refuser(legal)

    for attempt in range(2):  # the refusal is recorded: a retry gets it again
        response = await send(other, action, SHARED, version)
        assert response.status_code == 409, response.text
        refused = response.json()
        assert refused["ok"] is False and refused["code"] == "command/id_taken", refused
        assert refused["version"] == version  # nothing applied
        assert refused.get("duplicate", False) is bool(attempt)
    public = (await stack.http.get("/tables/ids")).json()
    assert public["version"] == version

    # The same seat's retry still gets its first answer; the other seat, with an id of its own,
    # plays the move it could not send under the taken id.
    again = (await send(first, "turn", SHARED, None)).json()
    assert again["duplicate"] is True and again["ok"] is True
    assert (again["first_version"], again["version"]) == (
        first_answer["first_version"],
        first_answer["version"],
    )
    own = (await send(other, action, "own-cmd-0001", version)).json()
    assert own["ok"] is True and own["first_version"] == version + 1

    events = (await stack.http.get("/tables/ids/events", params={"after": 0})).json()["events"]
    shared = [e["version"] for e in events if e["command_id"] == SHARED]
    assert shared == list(range(first_answer["first_version"], first_answer["version"] + 1))
