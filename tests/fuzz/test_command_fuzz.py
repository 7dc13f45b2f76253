"""Hypothesis over the seats' command payloads, with real tokens, through the served gateway.

Each example is a generated command (``fuzz_payloads``: every type, mostly well formed, some
broken) sent with the token of either seat of ``fz-play``, then one legal action of the seat to
act (from its view; the next deal between deals; a new table when the match is over), so that
the examples meet every phase of a deal.  Every answer, the legal ones' too:

* is no 5xx: an accepted command, or a documented rejection with its code's status;
* after a rejection, the table did not move (head version and hash, event stream length);
  after an acceptance, it moved to the version the answer names;
* a command id answered as a duplicate is the same seat's, else ``command/id_taken``;
* shows no card hidden from the seat, and neither do the seat's and the spectator's views
  read after it (``fuzz_truth``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fuzz_checks import body_of, check_rejection, is_rejection
from fuzz_payloads import commands, mutated
from fuzz_stack import Tables, examples
from fuzz_truth import Truth, leaks
from hypothesis import given
from hypothesis import strategies as st

from tests.services.gateway_stack import Stack, eager, refuser, wire_command

pytestmark = pytest.mark.fuzz

EXAMPLES = 200
PENDING_RETRIES = 50


def post(client: httpx.Client, table_id: str, body: str, token: str) -> httpx.Response:
    """Send a command; send it again while it is pending (202), as a client does."""
    headers = {"Authorization": f"Bearer {token}"}
    for _ in range(PENDING_RETRIES):
        response = client.post(f"/tables/{table_id}/commands", content=body, headers=headers)
        if response.status_code != 202:
            break
    return response


def auth(tables: Tables, table_id: str, seat: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {tables.tokens[table_id][seat]}"}


def fuzz_commands(stack: Stack, tables: Tables, truth: Truth) -> dict[str, int]:
    """Run the examples; return how many answers each code (or ``ok``) got."""
    seen: dict[str, int] = {}
    client = httpx.Client(base_url=f"http://127.0.0.1:{stack.port}", timeout=30)

    @examples(EXAMPLES)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        table_id = tables.play
        version = truth.marks_now([table_id])[table_id].version
        seat = data.draw(st.sampled_from([0, 1]), label="seat")
        command = data.draw(commands(table_id, version).flatmap(mutated), label="command")
        check(seat, json.dumps(command))
        advance()  # the next example finds the table in another position

    def advance() -> None:
        """Play one legal action (or the next deal), so that the examples see every phase."""
        if truth.over_now(tables.play):
            tables.renew(client)
            return
        table_id = tables.play
        version = truth.marks_now([table_id])[table_id].version
        for seat in (0, 1):
            view = body_of(
                client.get(f"/tables/{table_id}/view", headers=auth(tables, table_id, seat)).content
            )
            legal = view.get("legal_actions") or []
            if legal:
                policy = eager if version % 3 else refuser
                command: Any = wire_command(policy(legal), table_id, f"fz-move-{version}", version)
                check(seat, json.dumps(command.model_dump(mode="json")), accepted=True)
                return
        for seat in (0, 1):  # between deals nobody has a legal action: either seat deals
            command = {
                "type": "next_deal",
                "table_id": table_id,
                "command_id": f"fz-next-{version}-{seat}",
            }
            if check(seat, json.dumps(command)):
                return

    def check(seat: int, sent: str, accepted: bool = False) -> bool:
        """Send a command as ``seat`` and check its answer; return whether it was accepted."""
        table_id = tables.play
        token = tables.tokens[table_id][seat]
        before = truth.marks_now([table_id, tables.open])
        version = before[table_id].version
        response = post(client, table_id, sent, token)
        answer = body_of(response.content)
        assert response.status_code < 500, response.text
        after = truth.marks_now([table_id, tables.open])
        if is_rejection(response.status_code, response.content):
            code = check_rejection(answer, response.status_code)
            assert after == before, f"rejected with {code}, yet a table moved"
        else:
            assert response.status_code == 200 and answer["ok"] is True, response.text
            code = "ok (duplicate)" if answer.get("duplicate") else "ok"
            if not answer.get("duplicate"):
                assert after[table_id].version == answer["version"] > version, answer
                assert after[tables.open] == before[tables.open]
        assert not accepted or code == "ok", (sent, response.text)
        command_id = (body_of(sent) or {}).get("command_id")
        if isinstance(answer, dict) and isinstance(command_id, str):
            check_retry(table_id, command_id, seat, answer, code)
        label = f"driven {code}" if accepted else code
        seen[label] = seen.get(label, 0) + 1
        for viewer, headers in ((seat, auth(tables, table_id, seat)), (None, {})):
            hidden = truth.hidden_now(table_id, viewer)
            shown = leaks(response.content, hidden, sent) if viewer == seat else []
            read = client.get(f"/tables/{table_id}/view", headers=headers)
            shown += leaks(read.content, hidden)
            assert not shown, f"seat {viewer} was shown {shown}"
        return code == "ok"

    owners: dict[tuple[str, str], int] = {}

    def check_retry(table_id: str, command_id: str, seat: int, answer: Any, code: str) -> None:
        """A command id is its first sender's: another seat never gets that seat's answer
        (issue 18, 1e), it gets ``command/id_taken``."""
        owner = owners.get((table_id, command_id))
        if answer.get("duplicate"):
            assert owner == seat or code == "command/id_taken", (command_id, seat, owner, answer)
        if owner is None and "version" in answer and code != "command/id_taken":
            owners[(table_id, command_id)] = seat  # the store recorded a result under it

    try:
        run()
    finally:
        client.close()
    return seen


async def test_seat_commands_hold_the_rules(stack: Stack, tables: Tables, truth: Truth) -> None:
    seen = await asyncio.to_thread(fuzz_commands, stack, tables, truth)
    print(seen)
    assert seen.get("driven ok", 0) >= EXAMPLES // 2, seen  # the deals moved on
    rejected = {code for code in seen if "ok" not in code}
    assert {"command/invalid", "move/not_your_turn", "move/wrong_phase"} <= rejected, seen
