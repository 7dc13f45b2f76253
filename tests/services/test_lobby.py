"""The lobby routes through the real gateway, engine worker and projector (``docs/api.md``,
"Lobby"): the list of waiting and running tables with its paging, and its index."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from services import lobby
from services.gateway.testing import Stack
from services.settings import Settings, load_settings

SECRET = "lobby-test-secret-0123456789"


@pytest.fixture
def settings(redis_url: str, redis_ns: str) -> Settings:
    return load_settings(
        redis_url=redis_url,
        namespace=redis_ns,
        shards=2,
        lease_ms=1000,
        token_secret=SECRET,
        result_wait_ms=5000,
    )


@pytest.fixture
async def stack(settings: Settings) -> AsyncIterator[Stack]:
    async with Stack(settings) as running:
        yield running


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
        {"cursor": lobby.encode_cursor("123:t-1")},
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
    stale = lobby.LobbyRow("old-1", 1, "waiting", {"table_id": "old-1"})
    await lobby.write_rows(redis_client, keys, [stale], 0)
    assert (await listed(stack))["tables"] == []
    [row] = (await listed(stack, status="running"))["tables"]
    assert row["version"] == table.version
    await lobby.forget(redis_client, keys, ["old-1"])
    assert (await listed(stack, status="running"))["tables"] == []
    assert await redis_client.hget(keys.lobby("rows"), "old-1") is None


async def test_the_lobby_route_is_in_the_openapi_document(stack: Stack) -> None:
    paths = (await stack.http.get("/openapi.json")).json()["paths"]
    parameters = {p["name"] for p in paths["/tables"]["get"]["parameters"]}
    assert parameters == {"status", "limit", "cursor"}


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
