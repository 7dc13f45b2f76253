"""The lobby routes through the real gateway, engine worker and projector (``docs/api.md``,
"Lobby"): the list of waiting and running tables with its paging, and its index."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from services import cli
from services.gateway.rematch import next_table_id
from services.lobby import listing
from services.tables.tokens import SeatTokens
from tests.services.gateway_stack import TEST_SECRET, Seat, Stack


async def listed(stack: Stack, **params: Any) -> dict[str, Any]:
    response = await stack.http.get("/tables", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def every(stack: Stack, status: str, limit: int) -> list[str]:
    """Every table id of a list, page by page."""
    ids: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"status": status, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        page = await listed(stack, **params)
        assert len(page["tables"]) <= limit
        ids += [t["table_id"] for t in page["tables"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids


async def test_waiting_then_running_then_gone(stack: Stack) -> None:
    await stack.create(table_id="lob-1", deals=2, turn_seconds=60, rules="long-runs")
    page = await listed(stack)
    assert page == {
        "tables": [
            {
                "table_id": "lob-1",
                "status": "waiting",
                "seats": [
                    {"seat": 0, "name": None, "bot": None, "taken": False},
                    {"seat": 1, "name": None, "bot": None, "taken": False},
                ],
                "rules": "long-runs",
                "deals": 2,
                "target_score": None,
                "turn_seconds": 60,
                "version": 1,
            }
        ],
        "next_cursor": None,
    }
    ana = await stack.join("lob-1", "ana", seat=0)
    [row] = (await listed(stack))["tables"]
    assert row["seats"][0] == {"seat": 0, "name": "ana", "bot": None, "taken": True}
    assert (await listed(stack, status="running"))["tables"] == []
    await stack.join("lob-1", "bo", seat=1)
    assert (await listed(stack))["tables"] == []
    [running] = (await listed(stack, status="running"))["tables"]
    assert running["status"] == "running"
    assert [s["name"] for s in running["seats"]] == ["ana", "bo"]
    response = await ana.send({"type": "resign", "command_id": "resign-0001", "table_id": "lob-1"})
    assert response.status_code == 200, response.text
    assert (await listed(stack, status="running"))["tables"] == []
    assert (await listed(stack))["tables"] == []


async def test_a_bot_table_waits_for_its_human(stack: Stack) -> None:
    await stack.create(table_id="lob-bot", deals=1, bots={"1": "greedy"})
    [row] = (await listed(stack))["tables"]
    assert row["seats"][1] == {"seat": 1, "name": "greedy bot", "bot": "greedy", "taken": True}
    assert row["version"] == 2


async def test_pages_are_newest_first_and_stable_under_inserts(stack: Stack) -> None:
    for n in range(7):
        await stack.create(table_id=f"pg-{n}", deals=1)
    first = await listed(stack, limit=3)
    assert [t["table_id"] for t in first["tables"]] == ["pg-6", "pg-5", "pg-4"]
    for n in range(7, 10):  # newer tables come before the cursor: the next page is unchanged
        await stack.create(table_id=f"pg-{n}", deals=1)
    second = await listed(stack, limit=3, cursor=first["next_cursor"])
    assert [t["table_id"] for t in second["tables"]] == ["pg-3", "pg-2", "pg-1"]
    third = await listed(stack, limit=3, cursor=second["next_cursor"])
    assert [t["table_id"] for t in third["tables"]] == ["pg-0"]
    assert third["next_cursor"] is None
    assert await every(stack, "waiting", 4) == [f"pg-{n}" for n in range(9, -1, -1)]


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 101},
        {"limit": "x"},
        {"status": "over"},
        {"cursor": "not-a-cursor"},
        {"cursor": listing.encode_cursor("123:t-1")},
        {"cursor": ""},
    ],
)
async def test_a_bad_query_is_query_invalid(stack: Stack, params: dict[str, Any]) -> None:
    response = await stack.http.get("/tables", params=params)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["ok"] is False and body["code"] == "query/invalid"


async def test_an_older_row_never_replaces_a_newer_one(stack: Stack, redis_client: Redis) -> None:
    keys = stack.settings.keys
    await stack.create(table_id="old-1", deals=1)
    await stack.join("old-1", "ana", seat=0)
    await stack.join("old-1", "bo", seat=1)
    table = await stack.worker.service.load("old-1")
    stale = listing.LobbyRow("old-1", 1, "waiting", {"table_id": "old-1"})
    await listing.write_rows(redis_client, keys, [stale], 0)
    assert (await listed(stack))["tables"] == []
    [row] = (await listed(stack, status="running"))["tables"]
    assert row["version"] == table.version
    await listing.forget(redis_client, keys, ["old-1"])
    assert (await listed(stack, status="running"))["tables"] == []
    assert await redis_client.hget(keys.lobby("rows"), "old-1") is None


async def test_a_failed_lobby_write_is_retried_until_written(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.engine_worker import loop

    calls: list[list[str]] = []

    async def flaky(redis: Any, keys: Any, rows: Any, now: int) -> None:
        rows = list(rows)
        calls.append([r.table_id for r in rows])
        if len(calls) == 1:
            raise RedisConnectionError("the lobby is away")
        await listing.write_rows(redis, keys, rows, now)

    monkeypatch.setattr(loop, "write_rows", flaky)
    await stack.create(table_id="flaky-1", deals=1)
    for _ in range(200):
        if (await listed(stack))["tables"]:
            break
        await asyncio.sleep(0.05)
    assert [t["table_id"] for t in (await listed(stack))["tables"]] == ["flaky-1"]
    assert calls[:2] == [["flaky-1"], ["flaky-1"]]  # failed, then written by the retry


async def test_the_lobby_rebuilds_from_the_tables(stack: Stack, redis_client: Redis) -> None:
    for n in range(5):
        await stack.create(table_id=f"rb-{n}", deals=1)
    await stack.join("rb-1", "ana", seat=1)
    await stack.join("rb-2", "ana", seat=0)
    await stack.join("rb-2", "bo", seat=1)
    await stack.join("rb-3", "cy", seat=0)
    cy = await stack.join("rb-3", "di", seat=1)
    assert (await stack.http.post("/tables/rb-3/resign", headers=cy.headers)).status_code == 200
    before = [await every(stack, status, 2) for status in ("waiting", "running")]
    assert before == [["rb-4", "rb-1", "rb-0"], ["rb-2"]]
    keys = stack.settings.keys
    await redis_client.delete(*(keys.lobby(p) for p in ("waiting", "running", "rows")))
    assert await every(stack, "waiting", 2) == []
    args = ["lobby", "--rebuild", "--redis-url", stack.settings.redis_url]
    args += ["--namespace", stack.settings.namespace, "--shards", "2"]
    assert await asyncio.to_thread(cli.main, args) == 0
    assert [await every(stack, status, 2) for status in ("waiting", "running")] == before


async def test_the_lobby_routes_are_in_the_openapi_document(stack: Stack) -> None:
    paths = (await stack.http.get("/openapi.json")).json()["paths"]
    parameters = {p["name"] for p in paths["/tables"]["get"]["parameters"]}
    assert parameters == {"status", "limit", "cursor"}
    for action in ("leave", "resign", "rematch"):
        route = paths[f"/tables/{{table_id}}/{action}"]["post"]
        assert route["tags"] == ["lobby"] and "requestBody" in route, action
        assert {"200", "401", "409"} <= set(route["responses"]), action


# --- resign -------------------------------------------------------------------------------------


async def test_resign_answers_as_the_resign_command(stack: Stack) -> None:
    await stack.create(table_id="rs-1", deals=3)
    ana = await stack.join("rs-1", "ana", seat=0)
    await stack.join("rs-1", "bo", seat=1)
    await stack.create(table_id="rs-2", deals=3)
    cy = await stack.join("rs-2", "cy", seat=0)
    await stack.join("rs-2", "di", seat=1)
    by_route = await stack.http.post(
        "/tables/rs-1/resign", json={"command_id": "resign-route-1"}, headers=ana.headers
    )
    by_command = await cy.send(
        {"type": "resign", "command_id": "resign-route-1", "table_id": "rs-2"}
    )
    assert by_route.status_code == by_command.status_code == 200
    assert {**by_route.json(), "table_id": "rs-2"} == by_command.json()
    public = (await stack.http.get("/tables/rs-1", params={"min_version": 0})).json()
    assert public["match_over"] is True and public["winner"] == 1
    again = await stack.http.post(
        "/tables/rs-1/resign", json={"command_id": "resign-route-1"}, headers=ana.headers
    )
    assert again.json()["duplicate"] is True
    later = await stack.http.post("/tables/rs-1/resign", headers=ana.headers)
    assert later.status_code == 409 and later.json()["code"] == "move/match_over"


async def test_resign_needs_a_seat_token(stack: Stack) -> None:
    await stack.create(table_id="rs-3", deals=1)
    response = await stack.http.post("/tables/rs-3/resign")
    assert response.status_code == 401 and response.json()["code"] == "seat/bad_token"
    bad = await stack.http.post(
        "/tables/rs-3/resign", headers={"Authorization": "Bearer nobodys"}, content=b"{"
    )
    assert bad.status_code == 401


# --- leave --------------------------------------------------------------------------------------


async def test_leave_frees_the_seat_and_ends_its_token(stack: Stack) -> None:
    await stack.create(table_id="lv-1", deals=1)
    ana = await stack.join("lv-1", "ana", seat=0)
    assert (await stack.http.get("/tables/lv-1/view", headers=ana.headers)).status_code == 200
    response = await stack.http.post("/tables/lv-1/leave", headers=ana.headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["ok"], body["table_id"], body["seat"], body["version"]) == (True, "lv-1", 0, 3)
    public = (await stack.http.get("/tables/lv-1", params={"min_version": 3})).json()
    assert public["seats"] == [None, None]
    [row] = (await listed(stack))["tables"]
    assert row["seats"][0]["taken"] is False and row["version"] == 3
    for _ in range(2):  # the token is no seat's any more, now and when asked again
        gone = await stack.http.get("/tables/lv-1/view", headers=ana.headers)
        assert gone.status_code == 401 and gone.json()["code"] == "seat/bad_token"
    bo = await stack.join("lv-1", "bo", seat=0)
    assert bo.seat == 0 and bo.token != ana.token
    assert (await stack.http.get("/tables/lv-1/view", headers=bo.headers)).status_code == 200


async def test_leave_after_the_first_deal_is_table_started(stack: Stack) -> None:
    await stack.create(table_id="lv-2", deals=1)
    ana = await stack.join("lv-2", "ana", seat=0)
    await stack.join("lv-2", "bo", seat=1)
    before = (await stack.http.get("/tables/lv-2")).json()["version"]
    response = await stack.http.post("/tables/lv-2/leave", headers=ana.headers)
    assert response.status_code == 409, response.text
    assert response.json()["code"] == "table/started"
    after = (await stack.http.get("/tables/lv-2")).json()
    assert after["version"] == before and after["seats"][0]["name"] == "ana"
    assert (await stack.http.get("/tables/lv-2/view", headers=ana.headers)).status_code == 200
    [row] = (await listed(stack, status="running"))["tables"]
    assert row["table_id"] == "lv-2"


async def test_leave_table_is_a_wire_command_too(stack: Stack) -> None:
    await stack.create(table_id="lv-3", deals=1)
    ana = await stack.join("lv-3", "ana", seat=1)
    response = await ana.send(
        {"type": "leave_table", "command_id": "leave-0001", "table_id": "lv-3"}
    )
    assert response.status_code == 200 and response.json()["seat"] == 1
    events = (await stack.http.get("/tables/lv-3/events")).json()["events"]
    assert events[-1]["payload"] == {"type": "player_left", "v": 1, "seat": 1}


# --- rematch ------------------------------------------------------------------------------------


async def rematch(stack: Stack, seat: Seat) -> dict[str, Any]:
    response = await stack.http.post(f"/tables/{seat.table_id}/rematch", headers=seat.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def finished(stack: Stack, table_id: str, **fields: Any) -> tuple[Seat, Seat]:
    await stack.create(table_id=table_id, **fields)
    ana = await stack.join(table_id, "ana", seat=0)
    bo = await stack.join(table_id, "bo", seat=1)
    response = await stack.http.post(f"/tables/{table_id}/resign", headers=bo.headers)
    assert response.status_code == 200, response.text
    return ana, bo


async def test_rematch_once_both_agree_at_a_table_like_the_first(stack: Stack) -> None:
    ana, bo = await finished(stack, "rm-1", deals=3, turn_seconds=90, rules="long-runs")
    first = await rematch(stack, ana)
    assert first["rematch"] == {"agreed": [0], "table_id": None, "token": None, "seat": None}
    public = (await stack.http.get("/tables/rm-1", params={"min_version": first["version"]})).json()
    assert public["rematch"] == {"agreed": [0], "table_id": None}
    assert (await rematch(stack, ana))["rematch"]["agreed"] == [0]  # asking again: the same
    second = await rematch(stack, bo)
    new_id = second["rematch"]["table_id"]
    assert second["rematch"]["agreed"] == [0, 1] and new_id.startswith("t-")
    assert second["rematch"]["seat"] == 1
    again = await rematch(stack, ana)
    assert again["rematch"]["table_id"] == new_id and again["rematch"]["seat"] == 0
    assert (await rematch(stack, bo))["rematch"]["token"] == second["rematch"]["token"]
    public = (
        await stack.http.get("/tables/rm-1", params={"min_version": second["version"]})
    ).json()
    assert public["rematch"] == {"agreed": [0, 1], "table_id": new_id}
    for headers in ({}, ana.headers):  # the spectator's and a seat's views show it too
        seen = (await stack.http.get("/tables/rm-1/view", headers=headers)).json()
        assert seen["rematch"] == {"agreed": [0, 1], "table_id": new_id}
    new = (await stack.http.get(f"/tables/{new_id}")).json()
    old = (await stack.http.get("/tables/rm-1")).json()
    for name in ("rules", "deals", "target_score", "turn_seconds"):
        assert new[name] == old[name], name
    assert [s["name"] for s in new["seats"]] == ["ana", "bo"]
    assert new["status"] == "playing"
    for seat, answer in ((0, again), (1, second)):
        headers = {"Authorization": f"Bearer {answer['rematch']['token']}"}
        view = await stack.http.get(f"/tables/{new_id}/view", headers=headers)
        assert view.status_code == 200 and view.json()["seat"] == seat
    running = [t["table_id"] for t in (await listed(stack, status="running"))["tables"]]
    assert running == [new_id]


async def test_a_bot_agrees_at_once(stack: Stack) -> None:
    await stack.create(table_id="rm-bot", deals=1, bots={"1": "greedy"})
    ana = await stack.join("rm-bot", "ana", seat=0)
    response = await stack.http.post("/tables/rm-bot/resign", headers=ana.headers)
    assert response.status_code == 200, response.text
    answer = await rematch(stack, ana)
    assert answer["rematch"]["agreed"] == [0, 1] and answer["rematch"]["seat"] == 0
    new = (await stack.http.get(f"/tables/{answer['rematch']['table_id']}")).json()
    assert new["seats"] == [
        {"name": "ana", "bot": None, "bot_failure": None},
        {"name": "greedy bot", "bot": "greedy", "bot_failure": None},
    ]


async def test_no_rematch_before_the_end_nor_as_a_command(stack: Stack) -> None:
    await stack.create(table_id="rm-2", deals=1)
    ana = await stack.join("rm-2", "ana", seat=0)
    early = await stack.http.post("/tables/rm-2/rematch", headers=ana.headers)
    assert early.status_code == 409 and early.json()["code"] == "table/not_over"
    sent = await ana.send(
        {"type": "rematch", "command_id": "rematch-01", "table_id": "rm-2", "next_table_id": "x-1"}
    )
    assert sent.status_code == 422 and sent.json()["code"] == "command/unsupported"
    assert (await stack.http.get("/tables/rm-2")).json()["version"] == 2


async def test_a_rematch_table_taken_by_someone_else_is_a_conflict(stack: Stack) -> None:
    ana, bo = await finished(stack, "rm-3", deals=1)
    squatted = next_table_id(SeatTokens(TEST_SECRET.encode()), "rm-3")
    await stack.create(table_id=squatted, deals=5)
    await rematch(stack, ana)
    response = await stack.http.post("/tables/rm-3/rematch", headers=bo.headers)
    assert response.status_code == 409 and response.json()["code"] == "rematch/conflict"
    assert (await stack.http.get(f"/tables/{squatted}")).json()["seats"] == [None, None]
