"""The gateway's HTTP API against a real Redis, with the engine worker and projector in process.

Tables, seats and tokens (only the token's hash is stored; a join's public command id is no
way to its token), views and per-viewer events, and bad input: each kind of bad command gets its
status and stable code and changes nothing (the table's head, its version and hash, and the
command stream stay as they were).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from events.commands import MAX_COMMAND_BYTES
from services.gateway.errors import status_of
from services.redis_server import LocalRedis
from services.settings import Settings, load_settings
from services.store import Head, RedisEventStore
from services.tables.tokens import hash_token
from tests.services.gateway_stack import (
    TEST_SECRET,
    Seat,
    Stack,
    gateway_client,
    refuser,
    wire_command,
)


@pytest.fixture
def store(redis_client: Redis, settings: Settings) -> RedisEventStore:
    return RedisEventStore(redis_client, settings.keys)


async def seated(stack: Stack, table_id: str = "tbl-1") -> tuple[Seat, Seat]:
    await stack.create(table_id=table_id, deals=1)
    return await stack.join(table_id, "Ana", seat=0), await stack.join(table_id, "Bo", seat=1)


async def acting(seats: tuple[Seat, Seat], version: int) -> tuple[Seat, dict[str, Any]] | None:
    """Return the seat to act and its view, None when nobody acts."""
    for seat in seats:
        view = await seat.view(version)
        if view["legal_actions"]:
            return seat, view
    return None


async def play_out(seats: tuple[Seat, Seat], version: int) -> int:
    """Play the deal to its end with nobody taking; return the last version."""
    while (turn := await acting(seats, version)) is not None:
        seat, view = turn
        version = (await seat.act(refuser(view["legal_actions"]), version))["version"]
    return version


async def values(redis: Redis, namespace: str) -> bytes:
    """Every value stored under the namespace, concatenated (strings, hashes, streams)."""
    out: list[bytes] = []
    async for key in redis.scan_iter(match=f"{namespace}*", count=1000):
        kind = (await redis.type(key)).decode()
        if kind == "string":
            out.append(await redis.get(key) or b"")
        elif kind == "hash":
            out += [k + v for k, v in (await redis.hgetall(key)).items()]
        elif kind == "stream":
            for _, fields in await redis.xrange(key):
                out += [k + v for k, v in fields.items()]
    return b"|".join(out)


# --- tables, seats, tokens -------------------------------------------------------------------


async def test_create_generates_ids_and_answers_201(stack: Stack) -> None:
    response = await stack.http.post("/tables", json={"rules": "classic", "deals": 3})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["ok"] is True
    assert re.fullmatch(r"t-[a-z2-7]{12}", body["table_id"])
    assert body["version"] == 1 and body["first_dealer"] == 0
    public = (await stack.http.get(f"/tables/{body['table_id']}", params={"min_version": 1})).json()
    assert public["status"] == "open" and public["deals"] == 3
    assert public["seats"] == [None, None]


async def test_create_with_turn_clock_and_options(stack: Stack) -> None:
    rules = {"name": "house", "forcing": "off", "max_run_length": None}
    body = {"table_id": "clocked", "rules": rules, "target_score": 5, "deals": None}
    created = await stack.create(**body, turn_seconds=30)
    public = (await stack.http.get("/tables/clocked", params={"min_version": 1})).json()
    assert created["version"] == 1
    assert public["turn_seconds"] == 30 and public["target_score"] == 5
    assert public["rules"]["forcing"] == "off"


async def test_create_refusals(stack: Stack, store: RedisEventStore) -> None:
    await stack.create(table_id="taken", deals=1)
    again = await stack.http.post("/tables", json={"table_id": "taken", "deals": 1})
    assert again.status_code == 409 and again.json()["code"] == "table/exists"
    for body, code in (
        ({"deals": None, "target_score": None}, "command/invalid"),
        ({"rules": "no-such-rules"}, "command/invalid"),
        ({"turn_seconds": 1}, "command/invalid"),
        ({"table_id": "bad id!"}, "command/invalid"),
        ({"colour": "red"}, "command/invalid"),
        ({"bots": {"1": "alphazero"}}, "table/unknown_bot"),  # answered 201, then waited for ever
    ):
        response = await stack.http.post("/tables", json=body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["code"] == code
    bad = await stack.http.post("/tables", content=b"{not json")
    assert bad.status_code == 400 and bad.json()["code"] == "command/malformed_json"
    deep = b"[" * 3000 + b"]" * 3000  # under 8 KiB, past Python's recursion limit: was a 500
    for url in ("/tables", "/tables/any/join"):  # commands: test_bad_commands_get_their_codes…
        response = await stack.http.post(url, content=deep)
        assert response.status_code == 400, (url, response.text)
        assert response.json()["code"] == "command/malformed_json"


async def test_create_is_idempotent_by_command_id(stack: Stack) -> None:
    body = {"table_id": "idem", "deals": 1, "command_id": "create-idem-1"}
    first = await stack.http.post("/tables", json=body)
    second = await stack.http.post("/tables", json=body)
    assert first.status_code == second.status_code == 201
    assert second.json() == {**first.json(), "duplicate": True}


async def test_a_seat_joined_on_an_older_store_keeps_its_token_after_the_upgrade(
    redis_client: Redis, settings: Settings
) -> None:
    """Stores before the tokens hash kept a seat's token digest in the secret hash, which the
    gateway no longer reads: the upgraded service's engine worker moves it as it starts, and the
    seat's token is taken again."""
    keys = settings.keys
    async with Stack(settings) as stack:
        await stack.create(table_id="older", deals=1)
        seat = await stack.join("older", "Ana")
    digest = await redis_client.hget(keys.tokens("older"), "token:0")
    assert digest == hash_token(seat.token).encode()
    await redis_client.delete(keys.tokens("older"))  # the table as an older store kept it
    await redis_client.hset(keys.secret("older"), "token:0", digest)
    await redis_client.delete(keys.layout())
    async with Stack(settings) as stack:  # the upgraded service
        response = await stack.http.get("/tables/older/view", headers=seat.headers)
        assert response.status_code == 200, response.text
        assert response.json()["seat"] == 0
        wrong = await stack.http.get("/tables/older/view", headers={"Authorization": "Bearer x"})
        assert wrong.status_code == 401
    assert await redis_client.hgetall(keys.tokens("older")) == {b"token:0": digest}
    assert await redis_client.hgetall(keys.secret("older")) == {}


async def test_join_returns_a_token_whose_hash_alone_is_stored(
    stack: Stack, redis_client: Redis, settings: Settings
) -> None:
    await stack.create(table_id="tok", deals=1)
    response = await stack.http.post(
        "/tables/tok/join", json={"name": "Ana", "command_id": "my-join-key-1"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["seat"] == 0 and body["command_id"] == "my-join-key-1"
    token = body["token"]
    digests = await redis_client.hgetall(settings.keys.tokens("tok"))
    stored = {k.decode(): v.decode() for k, v in digests.items()}
    assert stored == {"token:0": hash_token(token)}
    assert await redis_client.hgetall(settings.keys.secret("tok")) == {}  # no seed yet
    assert token.encode() not in await values(redis_client, settings.namespace)

    again = await stack.http.post(
        "/tables/tok/join", json={"name": "Ana", "command_id": "my-join-key-1"}
    )
    assert again.status_code == 200
    assert again.json()["token"] == token and again.json()["duplicate"] is True
    assert again.json()["version"] == body["version"]


async def test_a_joins_public_command_id_does_not_give_its_token(stack: Stack) -> None:
    await stack.create(table_id="replay", deals=1)
    ana = await stack.join("replay", "Ana")
    events = (await stack.http.get("/tables/replay/events")).json()["events"]
    public_id = next(e["command_id"] for e in events if e["payload"]["type"] == "player_joined")
    stolen = await stack.http.post(
        "/tables/replay/join", json={"name": "Eve", "command_id": public_id}
    )
    assert stolen.status_code == 200  # a new join of its own: seat 1, another token
    assert stolen.json()["seat"] == 1 and stolen.json()["token"] != ana.token


async def test_join_refusals(stack: Stack) -> None:
    missing = await stack.http.post("/tables/nowhere/join", json={"name": "Ana"})
    assert missing.status_code == 404 and missing.json()["code"] == "table/not_found"
    await stack.create(table_id="full", deals=1)
    await stack.join("full", "Ana", seat=0)
    body = {"name": "Bo", "seat": 0, "command_id": "bo-join-key"}
    taken = await stack.http.post("/tables/full/join", json=body)
    assert taken.status_code == 409 and taken.json()["code"] == "seat/taken"
    assert taken.json()["command_id"] == "bo-join-key"
    await stack.join("full", "Bo")
    full = await stack.http.post("/tables/full/join", json={"name": "Cy"})
    assert full.status_code == 409 and full.json()["code"] == "table/full"
    for body in ({}, {"name": ""}, {"name": "x", "seat": 2}, {"name": "x", "command_id": "short"}):
        bad = await stack.http.post("/tables/full/join", json=body)
        assert bad.status_code == 422 and bad.json()["code"] == "command/invalid", body


# --- views and events ------------------------------------------------------------------------


async def test_views_show_a_seat_its_own_hand_only(stack: Stack) -> None:
    ana, bo = await seated(stack, "views")
    version = bo.version
    mine = await ana.view(version)
    theirs = await bo.view(version)
    spectator = (await stack.http.get("/tables/views/view", params={"min_version": version})).json()
    public = (await stack.http.get("/tables/views", params={"min_version": version})).json()
    assert mine["seat"] == 0 and theirs["seat"] == 1 and spectator["seat"] is None
    players = mine["deal"]["players"]
    assert len(players[0]["hand"]) == 10 and players[1]["hand"] is None
    assert theirs["deal"]["players"][0]["hand"] is None
    assert set(players[0]["hand"]).isdisjoint(json.dumps(theirs))
    for view in (spectator, public):
        assert all(p["hand"] is None for p in view["deal"]["players"])
        assert view["deal"]["stock_count"] == 20
    bad = await stack.http.get("/tables/views/view", headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and bad.json()["code"] == "seat/bad_token"
    none = await stack.http.get("/tables/nowhere")
    assert none.status_code == 404 and none.json()["code"] == "table/not_found"


async def test_events_are_redacted_per_viewer_and_hashes_wait_for_the_reveal(
    stack: Stack, store: RedisEventStore
) -> None:
    ana, bo = await seated(stack, "events")

    async def events(seat: Seat | None, after: int = 0) -> list[dict[str, Any]]:
        headers = seat.headers if seat else {}
        response = await stack.http.get(
            "/tables/events/events", params={"after": after}, headers=headers
        )
        assert response.status_code == 200, response.text
        page: list[dict[str, Any]] = response.json()["events"]
        return page

    def dealt(page: list[dict[str, Any]]) -> list[int]:
        return [e["payload"]["seat"] for e in page if e["payload"]["type"] == "hand_dealt"]

    assert dealt(await events(ana)) == [0]
    assert dealt(await events(bo)) == [1]
    assert dealt(await events(None)) == []
    page = await events(None)
    started = next(e["version"] for e in page if e["payload"]["type"] == "deal_started")
    for event in page:
        withheld = event["version"] > started
        assert (event["hash"] is None) == withheld
        assert (event["prev_hash"] is None) == withheld
    hands = {e["version"] for e in await events(bo) if e["payload"]["type"] == "hand_dealt"}
    after = [e["version"] for e in await events(ana, after=started)]
    assert after == [v for v in range(started + 1, bo.version + 1) if v not in hands]

    await play_out((ana, bo), bo.version)  # the deal is revealed: every hash is there
    stored = {e.version: e for e in await store.read("events")}
    for event in await events(ana):
        assert event["hash"] == stored[event["version"]].hash
        assert event["prev_hash"] == stored[event["version"]].prev_hash
    limited = await stack.http.get("/tables/events/events", params={"after": 2, "limit": 3})
    assert limited.json()["next_after"] == 5
    assert [e["version"] for e in limited.json()["events"]] == [3, 4]


# --- bad input changes nothing ---------------------------------------------------------------


class Unchanged:
    """Asserts that a table's head and the command streams stay as they were."""

    def __init__(self, store: RedisEventStore, redis: Redis, settings: Settings, table_id: str):
        self.store = store
        self.redis = redis
        self.stream = settings.keys.cmd(settings.keys.shard_of(table_id))
        self.table_id = table_id
        self.head = Head()
        self.queued = 0

    async def __aenter__(self) -> Unchanged:
        self.head = await self.store.head(self.table_id)
        self.queued = await self.redis.xlen(self.stream)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert await self.store.head(self.table_id) == self.head

    async def queued_now(self) -> int:
        """Return the length of the table's command stream now."""
        return int(await self.redis.xlen(self.stream))


async def test_bad_commands_get_their_codes_and_change_nothing(
    stack: Stack, store: RedisEventStore, redis_client: Redis, settings: Settings
) -> None:
    ana, bo = await seated(stack, "bad")
    other = await seated(stack, "other")
    version = bo.version
    turn_of = await acting((ana, bo), version)
    assert turn_of is not None
    seat, view = turn_of
    assert view["legal_actions"] == ["turn"]
    idle = bo if seat is ana else ana
    url = "/tables/bad/commands"
    turn = wire_command("turn", "bad", "turn-cmd-0001", version).model_dump(mode="json")

    async def post(content: str) -> httpx.Response:
        return await stack.http.post(url, content=content, headers=seat.headers)

    def body(**changes: Any) -> str:
        return json.dumps({**turn, **changes})

    no_token: dict[str, str] = {}
    wrong = {"Authorization": "Bearer not-a-token"}
    chunked = _chunks(MAX_COMMAND_BYTES + 10)
    other_seat = body(command_id="wrong-seat-1")
    stale = body(command_id="stale-cmd-1", expected_version=version - 1)
    illegal = body(command_id="illegal-cmd-1", type="discard", card="7H")
    cases: list[tuple[str, int, str, bytes | str | Any, dict[str, str]]] = [
        ("malformed JSON", 400, "command/malformed_json", b'{"type": "turn",', seat.headers),
        ("not an object", 400, "command/malformed_json", b"[1, 2]", seat.headers),
        ("nested deeply", 400, "command/malformed_json", b"[" * 3000 + b"]" * 3000, seat.headers),
        ("unknown type", 422, "command/unknown_type", body(type="fly"), seat.headers),
        ("invalid fields", 422, "command/invalid", body(card=7), seat.headers),
        ("another table", 422, "command/wrong_table", body(table_id="other"), seat.headers),
        ("a join", 422, "command/unsupported", body(type="join", name="x"), seat.headers),
        ("too large", 413, "command/too_large", body(pad="x" * MAX_COMMAND_BYTES), seat.headers),
        ("too large, chunked", 413, "command/too_large", chunked, seat.headers),
        ("no token", 401, "seat/bad_token", body(), no_token),
        ("a wrong token", 401, "seat/bad_token", body(), wrong),
        ("another table's token", 401, "seat/bad_token", body(), other[0].headers),
        ("the other seat's token", 409, "move/not_your_turn", other_seat, idle.headers),
        ("a stale version", 409, "command/stale_version", stale, seat.headers),
        ("an illegal move", 409, "move/wrong_phase", illegal, seat.headers),
    ]  # fmt: skip
    for name, status, code, content, headers in cases:
        async with Unchanged(store, redis_client, settings, "bad") as unchanged:
            response = await stack.http.post(url, content=content, headers=headers)
            if not code.startswith(("move/", "command/stale")):  # refused before the stream
                assert await unchanged.queued_now() == unchanged.queued, name
            assert response.status_code == status, (name, response.text)
            answer = response.json()
            assert answer["ok"] is False and answer["code"] == code, (name, answer)
            assert status_of(code) == status

    # the same command twice: applied once, the second gets the first answer
    first = await post(json.dumps(turn))
    assert first.status_code == 200 and first.json()["ok"] is True
    async with Unchanged(store, redis_client, settings, "bad") as unchanged:
        second = await post(json.dumps(turn))
        assert await unchanged.queued_now() == unchanged.queued  # answered from the store
    assert second.status_code == 200
    assert second.json() == {**first.json(), "duplicate": True}


def _chunks(size: int) -> Any:
    async def body() -> Any:
        sent = 0
        while sent < size:
            yield b" " * 1024
            sent += 1024

    return body()


async def test_a_command_for_a_finished_deal_changes_nothing(
    stack: Stack, store: RedisEventStore, redis_client: Redis, settings: Settings
) -> None:
    ana, bo = await seated(stack, "done")
    version = await play_out((ana, bo), bo.version)
    public = (await stack.http.get("/tables/done", params={"min_version": version})).json()
    assert public["status"] == "over" and public["deal"]["outcome"]["termination"] == "draw"
    for seat in (ana, bo):
        for action in ("turn", "refuse"):
            command = wire_command(action, "done", seat.next_command_id(), None)
            async with Unchanged(store, redis_client, settings, "done"):
                response = await seat.send(command)
            assert response.status_code == 409, response.text
            assert response.json()["code"] == "move/match_over"
    next_deal = {"type": "next_deal", "table_id": "done", "command_id": "next-deal-1"}
    async with Unchanged(store, redis_client, settings, "done"):
        response = await ana.send(next_deal)
    assert response.status_code == 409 and response.json()["code"] == "move/match_over"


# --- waiting, health, documents --------------------------------------------------------------


async def test_a_command_without_a_worker_is_pending_then_answered(settings: Settings) -> None:
    quick = settings.model_copy(update={"result_wait_ms": 200})
    body = {"table_id": "later", "deals": 1, "command_id": "create-later"}
    async with gateway_client(quick) as client:
        pending = await client.post("/tables", json=body)
        assert pending.status_code == 202
        assert pending.json()["ok"] is None and pending.json()["pending"] is True
    async with Stack(settings) as stack:
        answered = await stack.http.post("/tables", json=body)  # queued twice, applied once
        assert answered.status_code == 201 and answered.json()["version"] == 1
        assert (await stack.http.get("/tables/later/events")).json()["version"] == 1


async def test_health_readiness_metrics_and_docs(stack: Stack) -> None:
    assert (await stack.http.get("/healthz")).json() == {"ok": True}
    ready = await stack.http.get("/readyz")
    assert ready.status_code == 200 and ready.json()["redis"] is True
    await stack.create(deals=1)
    metrics = (await stack.http.get("/metrics")).text
    assert 'conquian_gateway_commands_total{outcome="ok",type="create_table"}' in metrics
    assert "conquian_projector_lag_seconds" in metrics
    assert (await stack.http.get("/docs")).status_code == 200
    spec = (await stack.http.get("/openapi.json")).json()
    schemas = spec["components"]["schemas"]
    assert {"Command", "CreateTableRequest", "JoinRequest", "Rejection"} <= set(schemas)
    body = spec["paths"]["/tables/{table_id}/commands"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Command"}
    assert "bearer" in json.dumps(spec["components"]["securitySchemes"]).lower()
    unknown = await stack.http.get("/no/such/route")
    assert unknown.status_code == 404 and unknown.json()["code"] == "http/not_found"


def test_the_committed_asyncapi_document_is_current() -> None:
    from pathlib import Path

    from services.gateway import asyncapi

    path = Path(__file__).parents[2] / "docs" / "asyncapi.json"
    assert path.read_text("utf-8") == asyncapi.render(), (
        "docs/asyncapi.json is stale: run python -m services.gateway.asyncapi docs/asyncapi.json"
    )
    document = json.loads(path.read_text("utf-8"))
    assert document["asyncapi"].startswith("3.")
    assert set(document["channels"]) == {"commands", "results", "views", "tableSocket"}
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', path.read_text("utf-8")))
    assert refs <= set(document["components"]["schemas"])


async def test_a_fault_of_the_gateway_answers_500_in_the_one_shape(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis refusal from inside a script is a plain ResponseError (the lobby's page under a
    Redis user without ZRANGE answered a plain-text 500): now ``gateway/error`` in JSON."""
    from redis.exceptions import ResponseError

    async def refused(*args: object, **kwargs: object) -> object:
        raise ResponseError("The user executing the script can't run this command")

    monkeypatch.setattr("services.lobby.listing.page", refused)
    async with gateway_client(settings, raise_app_exceptions=False) as client:
        response = await client.get("/tables")
    assert response.status_code == 500, response.text
    assert response.json()["ok"] is False and response.json()["code"] == "gateway/error"


async def test_reads_during_a_redis_outage_answer_503_with_retry_after(tmp_path: Path) -> None:
    """Issue 18 (1d): with Redis stopped, GET /tables/{id} and /view answered a plain-text 500;
    now the documented JSON error, 503 and Retry-After, as /readyz says too."""
    server = LocalRedis(tmp_path / "redis", stop_timeout=10)
    server.start()
    settings = load_settings(redis_url=server.url, namespace="outage", shards=2, lease_ms=1000,
                             token_secret=TEST_SECRET)  # fmt: skip
    try:
        async with Stack(settings) as stack:
            created = await stack.http.post("/tables", json={"deals": 1})
            assert created.status_code == 201, created.text
            table = created.json()["table_id"]
            assert server.pid is not None
            os.kill(server.pid, signal.SIGKILL)
            for url in (f"/tables/{table}", f"/tables/{table}/view", "/readyz"):
                response = await stack.http.get(url)
                assert response.status_code == 503, (url, response.text)
                assert response.json()["code"] == "store/unavailable"
                assert response.headers["retry-after"] == "1"
            server.restart()  # same port and data folder: the gateway answers again
            assert (await stack.http.get("/readyz")).status_code == 200
            events = await stack.http.get(f"/tables/{table}/events")  # views are not in the AOF
            assert events.status_code == 200 and events.json()["version"] >= 1, events.text
    finally:
        server.stop()


async def test_bad_query_parameters_get_query_invalid(stack: Stack) -> None:
    """Issue 18 (1f): a version past any table was echoed as next_after with a 200, and a bad
    query parameter was answered as command/invalid, though it is no command."""
    table = (await stack.http.post("/tables", json={"deals": 1})).json()["table_id"]
    for query in (
        "events?after=-1",
        "events?after=99999999999999999999999",
        "events?after=abc",
        "events?limit=0",
        "?min_version=-1",
        "view?min_version=99999999999999999999999",
    ):
        path = f"/tables/{table}/{query}".replace("/?", "?")
        response = await stack.http.get(path)
        assert response.status_code == 422, (query, response.text)
        assert response.json()["code"] == "query/invalid", (query, response.text)
    fine = await stack.http.get(f"/tables/{table}/events", params={"after": 2**53 - 1})
    assert fine.status_code == 200 and fine.json()["next_after"] == 2**53 - 1


async def test_the_api_documents_load_nothing_from_the_internet(stack: Stack) -> None:
    """Issue 18 (1g): /docs and /redoc loaded their scripts and styles from a CDN, so they were
    blank offline. Every address in the pages is now the gateway's own, and answers."""
    for page in ("/docs", "/redoc"):
        response = await stack.http.get(page)
        assert response.status_code == 200 and "text/html" in response.headers["content-type"]
        addresses = re.findall(r'(?:src|href)="([^"]+)"|url: \'([^\']+)\'', response.text)
        found = [a or b for a, b in addresses]
        assert found and not [a for a in found if "://" in a or a.startswith("//")], found
        for address in found:
            asset = await stack.http.get(address)
            assert asset.status_code == 200 and asset.content, (page, address)


async def test_a_gateway_started_while_redis_is_away_waits_for_it(tmp_path: Path) -> None:
    """Issue 18 (section 2): a gateway (re)started during an outage exited at once, and its
    supervisor's pause grew; it now waits for Redis and opens as soon as it answers."""
    from services.gateway.state import open_gateway

    server = LocalRedis(tmp_path / "redis", stop_timeout=10)
    server.start()
    settings = load_settings(redis_url=server.url, namespace="late", shards=2,
                             token_secret=TEST_SECRET)  # fmt: skip
    try:
        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        opening = asyncio.create_task(open_gateway(settings))
        await asyncio.sleep(1.5)
        assert not opening.done()  # waiting, not failed
        server.restart()
        gateway = await asyncio.wait_for(opening, 10)
        try:
            assert await gateway.redis.ping()
        finally:
            await gateway.close()
    finally:
        server.stop()
