"""Between deals the views say what happens next (issue 18, defect c), through the gateway.

After a deal ended, both seats' views used to say ``legal_actions: []`` with ``to_act: null``,
and a client that acts on its view's legal actions waited for ever for a second deal. Now
each seated player's view offers ``next_deal``; either may send it, and the first one starts
the deal. A client that does nothing but follow its views plays a whole match.
"""

from __future__ import annotations

from typing import Any

from tests.services.gateway_stack import Seat, Stack, refuser, wire_command


async def views(seats: tuple[Seat, Seat], version: int) -> list[dict[str, Any]]:
    return [await seat.view(version) for seat in seats]


async def test_a_client_that_follows_its_views_plays_a_whole_two_human_match(
    stack: Stack,
) -> None:
    await stack.create(table_id="deals", deals=3)
    ana = await stack.join("deals", "Ana", seat=0)
    alone = await ana.view(ana.version)
    assert alone["legal_actions"] == []  # nobody starts a deal at a table waiting for a player
    seats = (ana, await stack.join("deals", "Bo", seat=1))
    version = seats[1].version
    between = 0
    while True:
        seen = await views(seats, version)
        public = (await stack.http.get("/tables/deals", params={"min_version": version})).json()
        if public["match_over"]:
            assert [v["legal_actions"] for v in seen] == [[], []]
            break
        acting = [s for s, v in zip(seats, seen, strict=True) if v["legal_actions"]]
        assert acting, f"nobody may act at version {version}: the client would wait for ever"
        if seen[0]["legal_actions"] == ["next_deal"]:  # the deal is over, the match is not
            between += 1
            assert seen[1]["legal_actions"] == ["next_deal"]
            assert public["to_act"] is None and public["deal"]["phase"] == "over"
            first, second = seats if between % 2 else seats[::-1]  # either may start it
            started = await first.act("next_deal", version)
            late = await second.send(
                wire_command("next_deal", "deals", f"late-deal-{between:02d}", None)
            )
            assert late.status_code == 409, late.text  # the deal has started: nothing changes
            assert late.json()["code"] == "move/wrong_phase"
            version = started["version"]
            continue
        assert len(acting) == 1 and public["to_act"] == acting[0].seat
        legal = seen[acting[0].seat]["legal_actions"]
        version = (await acting[0].act(refuser(legal), version))["version"]
    assert between == 2  # three deals: two starts asked for by the players
    assert public["deals_played"] == 3
