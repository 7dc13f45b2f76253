"""``conquian audit``: recorded tables pass; each kind of tampering is caught where it is.

Tables are recorded with ``conquian selfplay --record`` into the test's Redis namespace, then
the stream entries are edited in place: a body changed under its old hash, an event dropped,
two swapped, and, with the hash chain recomputed so that only a later check can notice, a
revealed seed, a dealt card, a turned card, a move and a settlement changed.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import io
import json
import random
import struct
from collections.abc import Callable
from typing import Any, cast

import pytest
import redis
import redis.asyncio

from engine.cards import ALL_CARDS, format_card
from engine.game_events import DealStarted
from events.chain import GENESIS_HASH, canonical_json, event_hash
from events.envelope import BODY_KEYS
from events.mapping import to_engine
from events.upcast import parse_event
from services import audit, cli
from services.audit import (
    AuditSummary,
    Failure,
    TableReport,
    audit_table,
    body_hash,
    fast_payload_ok,
    load_tables,
)
from services.selfplay.cli import SelfplayConfig, record_selfplay
from services.store import KeySpace, MemoryEventStore, RedisEventStore, StoreError
from services.store.base import EventStore, Head, StoredEvent
from services.store.redis_store import decode_packed, pack_body, unpack_body
from services.tables.service import TableService

SEED = 11
T0, T1 = f"selfplay-{SEED}-0", f"selfplay-{SEED}-1"
Row = tuple[int, dict[str, Any], str]  # version, body (with table_id and version), hash


# --- helpers -------------------------------------------------------------------------------------


class Stream:
    """A table's stream and head in Redis, read and rewritten behind the store's back."""

    def __init__(self, client: redis.Redis, ns: str, table_id: str) -> None:
        self.client = client
        self.keys = KeySpace(ns)
        self.table_id = table_id
        self.key = self.keys.events(table_id)

    def entries(self, start: str = "-", end: str = "+") -> list[tuple[bytes, dict[bytes, bytes]]]:
        return cast(
            list[tuple[bytes, dict[bytes, bytes]]], self.client.xrange(self.key, start, end)
        )

    def rows(self) -> list[Row]:
        rows: list[Row] = []
        for entry_id, fields in self.entries():
            version = int(entry_id.split(b"-")[0])
            body = unpack_body(self.table_id, version, fields[b"b"])
            rows.append((version, body, fields[b"h"].hex()))
        return rows

    def replace(self, version: int, fields: dict[bytes, bytes]) -> None:
        """Put raw entry fields at ``version`` (the stream is rewritten: ids only grow)."""
        entries = self.entries()
        self.client.delete(self.key)
        for entry_id, old in entries:
            new = fields if int(entry_id.split(b"-")[0]) == version else old
            self.client.xadd(self.key, new, id=entry_id)  # type: ignore[arg-type]

    def write(self, rows: list[Row]) -> None:
        self.client.delete(self.key)
        for version, body, digest in rows:
            fields = {"b": pack_body(body), "h": bytes.fromhex(digest)}
            self.client.xadd(self.key, fields, id=f"{version}-1")  # type: ignore[arg-type]

    def rechain(self, bodies: list[dict[str, Any]]) -> list[Row]:
        """Write the bodies as versions 1, 2, … with a correct chain, and the head to match."""
        rows: list[Row] = []
        prev = GENESIS_HASH
        for version, body in enumerate(bodies, 1):
            body = {**body, "version": version}
            prev = event_hash(prev, body)
            rows.append((version, body, prev))
        self.write(rows)
        self.client.hset(
            self.keys.head(self.table_id), mapping={"version": len(rows), "hash": prev}
        )
        return rows

    def edit(self, change: Callable[[list[dict[str, Any]]], None]) -> None:
        """Change the bodies in place (``change`` gets the list), then rechain."""
        bodies = [body for _, body, _ in self.rows()]
        change(bodies)
        self.rechain(bodies)


def first_index(bodies: list[dict[str, Any]], kind: str, after: int = 0) -> int:
    return next(i for i, b in enumerate(bodies) if b["type"] == kind and i >= after)


def audit_json(
    capsys: pytest.CaptureFixture[str], url: str, ns: str, *args: str
) -> tuple[int, Any]:
    code = cli.main(["audit", *args, "--redis-url", url, "--namespace", ns, "--json"])
    return code, json.loads(capsys.readouterr().out)


def failure_of(capsys: pytest.CaptureFixture[str], url: str, ns: str, table: str = T0) -> Any:
    code, data = audit_json(capsys, url, ns, table)
    assert code == 1, data
    (report,) = data["reports"]
    assert report["ok"] is False
    return report["failure"]


@pytest.fixture
def tables(capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str) -> str:
    """Record two one-deal tables and a two-deal table; return the namespace."""
    base = ["selfplay", "--seed", str(SEED), "--record", "--redis-url", redis_url]
    assert cli.main([*base, "--deals", "2", "--namespace", redis_ns]) == 0
    capsys.readouterr()
    return redis_ns


@pytest.fixture
def stream(tables: str, redis_sync: redis.Redis) -> Stream:
    return Stream(redis_sync, tables, T0)


# --- clean tables --------------------------------------------------------------------------------


def test_recorded_tables_pass(
    capsys: pytest.CaptureFixture[str], redis_url: str, tables: str
) -> None:
    code, data = audit_json(capsys, redis_url, tables, T0, T1)
    assert code == 0
    assert data["ok"] is True and data["tables"] == 2 and data["tables_failed"] == 0
    for report in data["reports"]:
        assert report["ok"] and report["failure"] is None
        assert (report["deals"], report["revealed"], report["running"]) == (1, 1, None)
        assert report["status"] == "over" and report["notes"] == []
    assert data["events"] == sum(r["events"] for r in data["reports"])


def test_text_output_and_exit_code(
    capsys: pytest.CaptureFixture[str], redis_url: str, tables: str
) -> None:
    assert cli.main(["audit", T0, "--redis-url", redis_url, "--namespace", tables]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{T0}: ok, ") and "1 deal (1 revealed), status over" in out


def test_all_prints_a_summary(
    capsys: pytest.CaptureFixture[str], redis_url: str, tables: str, redis_sync: redis.Redis
) -> None:
    assert cli.main(["audit", "--all", "--redis-url", redis_url, "--namespace", tables]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("audited 2 tables, ")
    assert "events/s): 2 ok, 0 failed" in captured.out
    assert captured.err == ""  # no progress bar when stderr is not a terminal

    Stream(redis_sync, tables, T1).client.hset(KeySpace(tables).head(T1), "status", "open")
    assert cli.main(["audit", "--all", "--redis-url", redis_url, "--namespace", tables]) == 1
    out = capsys.readouterr().out
    assert "1 ok, 1 failed" in out
    assert f"FAILED {T1} version " in out and "audit/head_mismatch" in out

    code, data = audit_json(capsys, redis_url, tables, "--all")
    assert code == 1
    assert (data["tables"], data["tables_ok"], data["tables_failed"]) == (2, 1, 1)
    assert data["events_per_s"] > 0 and "reports" not in data
    assert [f["failure"]["code"] for f in data["failures"]] == ["audit/head_mismatch"]


def test_all_in_processes_is_the_same_audit(
    capsys: pytest.CaptureFixture[str], redis_url: str, tables: str, redis_sync: redis.Redis
) -> None:
    code, one = audit_json(capsys, redis_url, tables, "--all")
    assert code == 0
    code, two = audit_json(capsys, redis_url, tables, "--all", "--jobs", "2", "--batch", "1")
    assert code == 0
    for key in ("ok", "tables", "tables_ok", "tables_failed", "tables_running", "events"):
        assert one[key] == two[key], key

    redis_sync.hset(KeySpace(tables).head(T1), "status", "open")
    code, two = audit_json(capsys, redis_url, tables, "--all", "--jobs", "3")
    assert code == 1 and (two["tables"], two["tables_failed"]) == (2, 1)
    assert [f["table_id"] for f in two["failures"]] == [T1]
    assert two["failures"][0]["failure"]["code"] == "audit/head_mismatch"


def test_the_deployment_settings_are_the_defaults(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    redis_ns: str,
) -> None:
    monkeypatch.setenv("CONQUIAN_NAMESPACE", redis_ns)
    monkeypatch.setenv("CONQUIAN_SHARDS", "4")
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("CONQUIAN_REDIS_URL", redis_url)
    assert cli.main(["selfplay", "--deals", "2", "--seed", "3", "--record"]) == 0
    assert f"namespace {redis_ns}" in capsys.readouterr().out
    assert cli.main(["audit", "--all"]) == 0
    assert capsys.readouterr().out.startswith("audited 2 tables, ")
    assert cli.main(["audit", "--all", "--shards", "16"]) == 0  # another deployment: empty
    captured = capsys.readouterr()
    assert captured.out.startswith("audited 0 tables, ")
    assert f"no tables in namespace '{redis_ns}' with 16 shards" in captured.err
    assert cli.main(["replay", "selfplay-3-1"]) == 0
    assert "table selfplay-3-1" in capsys.readouterr().out


def test_a_missing_table_fails(
    capsys: pytest.CaptureFixture[str], redis_url: str, tables: str
) -> None:
    code, data = audit_json(capsys, redis_url, tables, "no-such-table")
    assert code == 1
    assert data["reports"][0]["failure"]["code"] == "audit/no_table"


# --- tampering without fixing the chain ----------------------------------------------------------


def test_a_changed_body_breaks_its_hash(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    rows = stream.rows()
    version = next(v for v, body, _ in rows if body["type"] == "card_turned" and v > 10)
    ((_, fields),) = stream.entries(f"{version}-1", f"{version}-1")
    card = unpack_body(T0, version, fields[b"b"])["card"]
    other = "AC" if card != "AC" else "KS"
    fields[b"b"] = fields[b"b"].replace(f'"card":"{card}"'.encode(), f'"card":"{other}"'.encode())
    stream.replace(version, fields)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/bad_hash",
        version,
        "card_turned",
    )


def test_a_dropped_event_leaves_a_gap(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    redis_sync.xdel(stream.key, "12-1")
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/version_gap", 13)
    assert failure["reason"] == "version 12 is missing"


def test_a_dropped_last_event_cuts_its_command_short(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    last = stream.rows()[-1][0]
    redis_sync.xdel(stream.key, f"{last}-1")
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/event_mismatch", last - 1)
    assert "the command's events end here, but the engine goes on with" in failure["reason"]
    assert '"type":"match_ended"' in failure["reason"]


def test_a_head_ahead_of_the_events(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    last = stream.rows()[-1][0]
    redis_sync.hset(stream.keys.head(T0), "version", last + 1)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/head_mismatch", last)
    assert f"head version {last + 1}, the last event is {last}" in failure["reason"]


def test_two_swapped_events_break_the_chain(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    rows = stream.rows()
    (v1, b1, h1), (v2, b2, h2) = rows[9], rows[10]
    rows[9], rows[10] = (v1, {**b2, "version": v1}, h2), (v2, {**b1, "version": v2}, h1)
    stream.write(rows)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/bad_hash", v1)


def test_a_corrupt_stored_body_is_undecodable(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    stream.replace(9, {b"b": b"not\x1fa body", b"h": b"\0" * 32})
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/undecodable", 9)


def test_a_head_status_that_is_not_the_last_appends(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    redis_sync.hset(stream.keys.head(T0), "status", "playing")
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert failure["code"] == "audit/head_mismatch"
    assert "status 'playing', the events give 'over'" in failure["reason"]


# --- tampering with the chain recomputed: only a later check can tell -----------------------------


def test_reordered_events_with_a_fixed_chain_are_illegal(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    # a lone card_left (one command) followed by the next command's card_refused
    i = next(
        i
        for i, b in enumerate(bodies)
        if b["type"] == "card_left"
        and not b["forceable"]
        and bodies[i + 1]["type"] == "card_refused"
    )

    def swap(bodies: list[dict[str, Any]]) -> None:
        bodies[i], bodies[i + 1] = bodies[i + 1], bodies[i]

    stream.edit(swap)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/illegal_move",
        i + 1,
        "card_refused",
    )
    assert "move/not_your_turn" in failure["reason"] or "move/wrong_phase" in failure["reason"]


def test_a_changed_revealed_seed_fails_the_commitment(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "deal_revealed")

    def change(bodies: list[dict[str, Any]]) -> None:
        seed = bodies[i]["seed"]
        bodies[i]["seed"] = ("0" if seed[0] != "0" else "1") + seed[1:]

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/commitment_mismatch",
        i + 1,
        "deal_revealed",
    )


def test_a_changed_algorithm_fails_the_commitment(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    def change(bodies: list[dict[str, Any]]) -> None:
        bodies[first_index(bodies, "deal_revealed")]["algorithm"] = "hmac-sha256-fy-v2"

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert failure["code"] == "audit/commitment_mismatch"
    assert "revealed under 'hmac-sha256-fy-v2'" in failure["reason"]


def test_a_changed_dealt_card_fails_the_deck(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "hand_dealt")
    dealt = set(bodies[i]["cards"]) | set(bodies[i + 1]["cards"])
    stranger = next(format_card(c) for c in ALL_CARDS if format_card(c) not in dealt)
    order = {format_card(c): (c % 10, c // 10) for c in ALL_CARDS}

    def change(bodies: list[dict[str, Any]]) -> None:
        cards = [stranger, *bodies[i]["cards"][1:]]
        bodies[i]["cards"] = sorted(cards, key=order.__getitem__)

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/dealt_card_mismatch",
        i + 1,
        "hand_dealt",
    )
    assert stranger in failure["reason"]


def test_a_changed_turned_card_fails_the_deck(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "card_turned")
    j = first_index(bodies, "card_turned", i + 1)  # the next stock card, seen later anyway

    def change(bodies: list[dict[str, Any]]) -> None:
        bodies[i]["card"] = bodies[j]["card"]

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/turned_card_mismatch",
        i + 1,
        "card_turned",
    )
    assert f"the table says {bodies[j]['card']}" in failure["reason"]


def test_an_illegal_discard_with_a_fixed_chain(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "card_discarded")
    seat = bodies[i]["seat"]
    dealt = next(b for b in bodies if b["type"] == "hand_dealt" and b["seat"] != seat)
    theirs = dealt["cards"][0]  # a card dealt to the other seat is never in this hand

    def change(bodies: list[dict[str, Any]]) -> None:
        bodies[i]["card"] = theirs

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/illegal_move",
        i + 1,
        "card_discarded",
    )
    assert failure["reason"].startswith("move/")


def test_a_changed_settlement_is_an_event_mismatch(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "stakes_settled")

    def change(bodies: list[dict[str, Any]]) -> None:
        bodies[i]["next_stake"] += 1

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/event_mismatch",
        i + 1,
        "stakes_settled",
    )
    assert "the engine gives {" in failure["reason"]


def test_a_missing_reveal_is_an_unrevealed_deal(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    settled = first_index(bodies, "stakes_settled")

    def drop(bodies: list[dict[str, Any]]) -> None:
        del bodies[first_index(bodies, "deal_revealed")]

    stream.edit(drop)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"], failure["event_type"]) == (
        "audit/unrevealed_deal",
        settled + 1,
        "stakes_settled",
    )


def test_an_invalid_card_is_undecodable(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "card_wasted")

    def change(bodies: list[dict[str, Any]]) -> None:
        bodies[i]["card"] = "8H"

    stream.edit(change)
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/undecodable", i + 1)
    assert "event/invalid" in failure["reason"]


def test_an_extra_event_in_a_command(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream
) -> None:
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "card_wasted")
    stream.edit(lambda bodies: bodies.insert(i + 1, copy.deepcopy(bodies[i])))
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert failure["code"] in {"audit/event_mismatch", "audit/turned_card_mismatch"}
    assert failure["version"] == i + 2


def test_the_first_problem_in_check_order_is_named(
    capsys: pytest.CaptureFixture[str], redis_url: str, stream: Stream, redis_sync: redis.Redis
) -> None:
    """A bad move early and a broken hash late: the chain is checked first."""
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "stakes_settled")
    stream.edit(lambda bodies: bodies[i].update(next_stake=9))
    last = len(bodies)
    stream.replace(last, {b"b": pack_body(bodies[-1]), b"h": b"\1" * 32})
    failure = failure_of(capsys, redis_url, stream.keys.ns)
    assert (failure["code"], failure["version"]) == ("audit/bad_hash", last)


# --- deals, running deals and other stores -------------------------------------------------------


def test_a_running_deal_is_fine_but_unchecked(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str
) -> None:
    asyncio.run(_start_a_table(redis_url, redis_ns, "live-1", moves=9))
    code, data = audit_json(capsys, redis_url, redis_ns, "live-1")
    assert code == 0, data
    (report,) = data["reports"]
    assert report["running"] == 1 and report["revealed"] == 0 and report["status"] == "playing"
    assert "seed is secret" in report["notes"][0]
    assert cli.main(["audit", "live-1", "--redis-url", redis_url, "--namespace", redis_ns]) == 0
    out = capsys.readouterr().out
    assert "(0 revealed; deal 1 still running, cards not checkable yet)" in out
    assert "  note: deal 1 is still" in out


def test_a_running_deal_still_has_its_moves_checked(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_ns: str, redis_sync: redis.Redis
) -> None:
    asyncio.run(_start_a_table(redis_url, redis_ns, "live-2", moves=12))
    stream = Stream(redis_sync, redis_ns, "live-2")
    bodies = [body for _, body, _ in stream.rows()]
    i = first_index(bodies, "card_left")  # refusing one's own turned card is not allowed
    stream.edit(lambda bodies: bodies[i].update(type="card_refused"))
    failure = failure_of(capsys, redis_url, redis_ns, "live-2")
    assert (failure["code"], failure["version"]) == ("audit/illegal_move", i + 1)
    assert "move/wrong_phase" in failure["reason"]


async def _start_a_table(url: str, ns: str, table_id: str, moves: int) -> None:
    client = redis.asyncio.Redis.from_url(url, decode_responses=False)
    try:
        await _play_a_table(RedisEventStore(client, KeySpace(ns)), table_id, moves)
    finally:
        await client.aclose()


async def _play_a_table(store: EventStore, table_id: str, moves: int) -> None:
    """Create a two-deal table with two players and play ``moves`` random moves."""
    from engine.bots import RandomBot
    from events.commands import CreateTable, Join
    from events.mapping import to_wire_command

    service = TableService(store, seed_source=lambda: bytes(range(32)), dealer_source=int)
    create = CreateTable(table_id=table_id, command_id="create-0001", deals=2)
    assert (await service.execute(create, None)).ok
    for seat in (0, 1):
        join = Join(table_id=table_id, command_id=f"join-000{seat}", name=f"player {seat}")
        assert (await service.execute(join, None)).ok
    rng = random.Random(3)
    for n in range(moves):
        table = await service.load(table_id)
        assert table.match is not None and table.match.to_act is not None
        seat = table.match.to_act
        action = RandomBot().choose(table.match, seat, rng)
        command = to_wire_command(action, table_id, f"move-{n:04d}")
        assert (await service.execute(command, seat)).ok


def test_two_deal_tables_check_each_commitment() -> None:
    store = MemoryEventStore()
    config = SelfplayConfig(2, 4, ("greedy", "greedy"))
    asyncio.run(record_selfplay(config, store, table_deals=2))
    events = asyncio.run(store.read("selfplay-4-0"))
    head = asyncio.run(store.head("selfplay-4-0"))
    report = audit_table("selfplay-4-0", events, head)
    assert report.ok and (report.deals, report.revealed) == (2, 2)

    reveals = [i for i, e in enumerate(events) if e.body["type"] == "deal_revealed"]
    seeds = [events[i].body["seed"] for i in reveals]
    bodies = [dict(e.body) for e in events]
    bodies[reveals[1]]["seed"] = seeds[0]  # deal 2 "revealed" with deal 1's seed
    failure = audit_table("selfplay-4-0", _chain("selfplay-4-0", bodies), None).failure
    assert failure is not None
    assert (failure.code, failure.version) == ("audit/commitment_mismatch", reveals[1] + 1)


def _chain(table_id: str, bodies: list[dict[str, Any]]) -> list[StoredEvent]:
    out: list[StoredEvent] = []
    prev = GENESIS_HASH
    for version, body in enumerate(bodies, 1):
        body = {**body, "version": version}
        digest = event_hash(prev, body)
        out.append(StoredEvent(table_id, version, body, digest, prev))
        prev = digest
    return out


def test_the_memory_store_and_stored_links() -> None:
    store = MemoryEventStore()
    asyncio.run(record_selfplay(SelfplayConfig(1, 6, ("random", "random")), store))
    (loaded,) = asyncio.run(load_tables(store, ["selfplay-6-0"]))
    assert loaded.audit().ok
    events = list(loaded.events)
    assert all(isinstance(e, StoredEvent) for e in events)
    fifth = events[4]
    assert isinstance(fifth, StoredEvent)
    relinked = [*events[:4], StoredEvent("selfplay-6-0", 5, fifth.body, fifth.hash, "f" * 64)]
    failure = audit_table("selfplay-6-0", relinked + events[5:], loaded.head).failure
    assert failure is not None and (failure.code, failure.version) == ("audit/broken_chain", 5)

    failure = audit_table("selfplay-6-0", events[:5] + events[6:], loaded.head).failure
    assert failure is not None and (failure.code, failure.version) == ("audit/version_gap", 7)

    moved = [*events[:5], StoredEvent("selfplay-6-0", 6, dict(events[6].body), "0", "0")]
    failure = audit_table("selfplay-6-0", moved, loaded.head).failure
    assert failure is not None and (failure.code, failure.version) == ("audit/broken_chain", 6)
    assert "written for table 'selfplay-6-0' version 7" in failure.reason


def test_the_progress_bar_draws_on_its_stream() -> None:
    stream = io.StringIO()
    bar = audit._progress(stream, 2)
    summary = AuditSummary()
    summary.add(TableReport("t", 10))
    bar(summary, 0.5)
    summary.add(TableReport("u", 10, failure=Failure("u", 1, None, "audit/bad_hash", "x")))
    bar(summary, 0.55)  # the last table is always drawn
    assert stream.getvalue().endswith("2/2 tables, 1 failed, 36 events/s")


def test_report_values() -> None:
    failure = Failure("t", 3, "card_turned", "audit/bad_hash", "why")
    report = TableReport("t", 10, 1, 1, None, "over", failure)
    assert str(failure) == "t version 3 (card_turned): audit/bad_hash: why"
    assert report.summary() == "FAILED t version 3 (card_turned): audit/bad_hash: why"
    assert report.as_dict()["failure"]["code"] == "audit/bad_hash" and not report.ok
    summary = AuditSummary()
    summary.add(report)
    summary.add(TableReport("u", 5, 1, 0, 1, "playing"))
    summary.seconds = 0.5
    assert summary.as_dict()["events_per_s"] == 30 and summary.running == 1
    assert "1 ok, 1 failed" in summary.text() and "deal still running" in summary.text()
    assert set(audit.CODES) >= {failure.code, "audit/event_mismatch", "audit/head_mismatch"}


# --- the fast paths are the slow paths -----------------------------------------------------------


def _recorded_bodies() -> list[dict[str, Any]]:
    store = MemoryEventStore()
    config = SelfplayConfig(12, 8, ("greedy", "random"))
    asyncio.run(record_selfplay(config, store, table_deals=3))

    async def read() -> list[dict[str, Any]]:
        return [dict(e.body) async for t in store.tables() for e in await store.read(t)]

    return asyncio.run(read())


@pytest.fixture(scope="module")
def bodies() -> list[dict[str, Any]]:
    return _recorded_bodies()


def test_body_hash_is_event_hash(bodies: list[dict[str, Any]]) -> None:
    prev = "ab" * 32
    for body in [
        *bodies,
        {"name": 'Zoë ♣ \u2028 \x1f "x"', "n": [1.5, -0.0, None, True], "é": {}},
    ]:
        assert body_hash(prev, body) == event_hash(prev, body)
    with pytest.raises(ValueError):
        body_hash(prev, {"x": float("nan")})
    with pytest.raises(TypeError):
        body_hash(prev, {"x": object()})


def _payload(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in BODY_KEYS}


def _mutations(payload: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in [k for k in payload if k not in ("type",)]:
        value = payload[key]
        for new in (
            None,
            True,
            1,
            "7h",
            "7♥",
            "8H",
            [],
            ["7H", "7H"],
            [["AC", "2C"]],
            str(value),
            -1,
            2,
            " x",
        ):
            out.append({**payload, key: new})
        if isinstance(value, list) and len(value) > 1:
            out.append({**payload, key: list(reversed(value))})
            if isinstance(value[0], list) and len(value[0]) > 1:
                out.append({**payload, key: [list(reversed(value[0])), *value[1:]]})
        out.append({k: v for k, v in payload.items() if k != key})
    out.append({**payload, "extra": 1})
    return out


def test_the_plain_checks_accept_only_what_pydantic_keeps(bodies: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    passed = 0
    for body in bodies:
        payload = _payload(body)
        seen.add(payload["type"])
        for candidate in [payload, *_mutations(payload)]:
            if not fast_payload_ok(candidate):
                continue
            passed += 1
            model = parse_event(candidate)  # raises if the plain check let a bad one through
            assert model.model_dump(mode="json") == candidate
    assert passed > len(bodies)
    assert seen >= {"card_turned", "meld_made", "hand_dealt", "stakes_settled", "deal_revealed"}
    for body in bodies:  # every canonical payload the service writes passes, but table_created
        assert fast_payload_ok(_payload(body)) == (body["type"] != "table_created")


def _changed(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The body with one field at a time set to another valid value."""
    out: list[dict[str, Any]] = []
    for key, value in body.items():
        if key in BODY_KEYS or key in ("type", "v"):
            continue
        if key in ("seat", "winner"):
            out.append({**body, key: 1 if value == 0 else 0})
        elif key == "card":
            out.append({**body, key: "KS" if value != "KS" else "AC"})
        elif key == "forceable":
            out.append({**body, key: not value})
        elif key in ("amount", "next_stake"):
            out.append({**body, key: value + 1})
        elif key == "scores":
            out.append({**body, key: [value[0] + 1, value[1]]})
            out.append({**body, key: [value[0], value[1] + 1]})
        elif key == "hand":
            out.append({**body, key: value[1:]} if value else {**body, key: ["KS"]})
        elif key == "table":
            out.append({**body, key: value[1:]})
    return out


def test_comparing_fields_is_comparing_the_wire_form(bodies: list[dict[str, Any]]) -> None:
    compared = 0
    for i, body in enumerate(bodies):
        if body["type"] in ("table_created", "deal_started"):
            continue
        theirs = to_engine(parse_event(_payload(body)))
        if not theirs:  # hand_dealt, player_joined, deal_revealed: no engine event of their own
            continue
        (engine_event,) = theirs
        stored = StoredEvent(body["table_id"], i + 1, body, "0", "0")
        event = audit._decode(body["table_id"], stored)
        assert event.canonical and audit.same_event(event, engine_event), body
        for other in _changed(body):
            changed = StoredEvent(body["table_id"], i + 1, other, "0", "0")
            assert not audit.same_event(audit._decode(body["table_id"], changed), engine_event)
            compared += 1
        slow = audit._Decoded(
            event.version, "0", event.type, _payload(body), len(_payload(body)), "x", False
        )
        assert audit.same_event(slow, engine_event)  # the wire dump, compared field for field
    assert compared > len(bodies)


# --- the fast path certifies only what the full audit passes -------------------------------------

Entry = tuple[bytes, bytes]  # a stored body (``pack_body``) and its raw hash


def _tables_in_memory() -> dict[str, tuple[list[Entry], Head]]:
    """Recorded tables as Redis stores them: one- and two-deal tables and a running deal."""
    store = MemoryEventStore()
    asyncio.run(record_selfplay(SelfplayConfig(4, 5, ("greedy", "random")), store, table_deals=2))
    asyncio.run(record_selfplay(SelfplayConfig(2, 9, ("random", "greedy")), store))
    asyncio.run(_play_a_table(store, "live-9", moves=14))

    async def read() -> dict[str, tuple[list[Entry], Head]]:
        out = {}
        async for t in store.tables():
            events = await store.read(t)
            entries = [(pack_body(e.body), bytes.fromhex(e.hash)) for e in events]
            out[t] = (entries, await store.head(t))
        return out

    return asyncio.run(read())


@pytest.fixture(scope="module")
def stored_tables() -> dict[str, tuple[list[Entry], Head]]:
    return _tables_in_memory()


def _fast(table_id: str, entries: list[Entry], head: Head) -> TableReport | None:
    """The fast path on what ``_FAST_READ_LUA`` would return for these entries."""
    hashes = b"".join(h for _, h in entries)
    return audit.audit_packed(
        table_id, head, len(entries), hashes, b"\x1e".join(b for b, _ in entries)
    )


def _full(table_id: str, entries: list[Entry], head: Head) -> TableReport:
    """The full audit of these entries as ``load_tables`` reads them from Redis."""
    frames = b"".join(
        struct.pack(">BBI", len(f"{v}-1"), len(h), len(b)) + f"{v}-1".encode() + h + b
        for v, (b, h) in enumerate(entries, 1)
    )
    events: list[StoredEvent] = []
    corrupt = None
    try:
        decode_packed(table_id, frames, 1, GENESIS_HASH, events)
    except StoreError:  # read entry by entry, as ``_read_carefully`` does
        events = []
        prev = GENESIS_HASH
        for version, (raw, digest) in enumerate(entries, 1):
            try:
                body = unpack_body(table_id, version, raw)
            except StoreError as error:
                corrupt = (version, str(error))
                break
            events.append(StoredEvent(table_id, version, body, digest.hex(), prev))
            prev = digest.hex()
    return audit.LoadedTable(table_id, events, head, corrupt).audit()


def _rechain(
    table_id: str, entries: list[Entry], head: Head, fast_text: bool, start: int = 0
) -> tuple[list[Entry], Head]:
    """The entries with every hash from ``start`` on recomputed, as a forger would: from the
    decoded body, or (``fast_text``) from the stored text as the fast path splices it."""
    out: list[Entry] = entries[:start]
    prev = entries[start - 1][1].hex() if start else GENESIS_HASH
    for version, (raw, _) in enumerate(entries[start:], start + 1):
        digest = None
        parts = raw.decode("utf-8", "replace").split("\x1f")
        shape = audit._FAST_SHAPES.get(parts[0]) if len(parts) == 6 else None
        if fast_text and shape is not None and shape[1] is not None:
            _kind, _v, cid, causation, moment, text = parts
            caused = f'"causation":"{causation}",' if causation else ""
            spliced = shape[1](prev, caused, cid, table_id, moment, version, text)
            digest = hashlib.sha256(spliced.encode("utf-8")).hexdigest()
        else:
            try:
                digest = event_hash(prev, unpack_body(table_id, version, raw))
            except (StoreError, TypeError, ValueError):
                digest = prev  # cannot be hashed: any hash will do
        out.append((raw, bytes.fromhex(digest)))
        prev = digest
    return out, Head(len(out), prev, head.status)


def _variants(raw: bytes) -> list[bytes]:
    """A stored body changed in one way at a time: each part, the payload text, the framing."""
    text = raw.decode("utf-8")
    parts = text.split("\x1f")
    out = [text + "\x1f", text.replace("\x1f", "", 1), text.replace("\x1f", "\x1e", 1)]
    out.append(text + "\x1ex")
    kind, v, cid, _causation, moment, payload = parts
    swaps = {"card_refused": "card_left", "card_left": "card_refused", "went_out": "resigned"}
    changes: list[tuple[int, str]] = [
        (0, swaps.get(kind, "card_turned" if kind != "card_turned" else "card_wasted")),
        (0, kind + "x"),
        (0, ""),
        (1, "2" if v == "1" else "1"),
        (1, "0" + v),
        (1, " " + v),
        (1, ""),
        (2, "bad id!"),
        (2, cid[:-1] + ("0" if cid[-1] != "0" else "1")),
        (2, ""),
        (3, "cause-1:3"),
        (3, "bad cause!"),
        (4, "0" + moment),
        (4, "-1"),
        (4, moment + ".0"),
        (4, str(2**53)),
        (4, "1e3"),
        (4, ""),
    ]
    for old, new in [
        (":", ": "),
        ('"seat":0', '"seat":1'),
        ('"seat":1', '"seat":0'),
        ('"seat":0', '"seat":false'),
        ('"seat":1', '"seat":true'),
        ("false", "0"),
        ("true", "1"),
        ("null", "0"),
        ('"winner":0', '"winner":null'),
        ('"card":"', '"card":"K'),
        ('"card"', '"\\u0063ard"'),
        ("[[", "[ ["),
        ('"],["', '"],[]]'),
        ('","', '" ,"'),
        ("1", "2"),
        ("0", "1"),
        ("C", "c"),
    ]:
        if old in payload:
            changes.append((5, payload.replace(old, new, 1)))
    items = payload.split(',"')
    if len(items) > 1:
        changes.append((5, ',"'.join(items[1:]) + ',"' + items[0]))  # fields out of order
    changes += [
        (5, payload + ',"extra":1'),
        (5, payload + ',"seat":0'),
        (5, payload[:-1]),
        (5, ""),
        (5, payload + "}"),
        (5, payload + "},{"),
    ]
    for i, new in changes:
        changed = list(parts)
        changed[i] = new
        out.append("\x1f".join(changed))
    return [o.encode("utf-8") for o in out if o != text]


def test_the_fast_path_certifies_recorded_tables(
    stored_tables: dict[str, tuple[list[Entry], Head]],
) -> None:
    assert len(stored_tables) == 5
    for table_id, (entries, head) in stored_tables.items():
        full = _full(table_id, entries, head)
        assert full.ok
        assert _fast(table_id, entries, head) == full, table_id
    assert _full("live-9", *stored_tables["live-9"]).running == 1


def test_the_fast_path_certifies_nothing_the_full_audit_fails(
    stored_tables: dict[str, tuple[list[Entry], Head]],
) -> None:
    """Every stored body changed in every way, the chain left or recomputed: the fast path
    either gives up (None) or gives the full audit's report, a clean one."""
    tried = certified = 0
    for table_id in ("selfplay-9-0", "live-9"):
        entries, head = stored_tables[table_id]
        seen: set[str] = set()
        for i, (raw, digest) in enumerate(entries):
            kind = raw.split(b"\x1f", 1)[0].decode()
            if kind in seen and i < len(entries) - 1:  # every type, and the last event
                continue
            seen.add(kind)
            for new in _variants(raw):
                changed = [*entries[:i], (new, digest), *entries[i + 1 :]]
                for forged in (
                    (changed, head),
                    _rechain(table_id, changed, head, fast_text=False, start=i),
                    _rechain(table_id, changed, head, fast_text=True, start=i),
                ):
                    tried += 1
                    fast = _fast(table_id, *forged)
                    if fast is not None:
                        certified += 1
                        assert fast == _full(table_id, *forged), (table_id, i, new)
    assert tried > 2000 and 0 < certified < tried // 10  # certified: harmless changes only


def test_the_fast_path_gives_up_on_the_rest(
    stored_tables: dict[str, tuple[list[Entry], Head]],
) -> None:
    table_id = "selfplay-5-0"
    entries, head = stored_tables[table_id]
    assert _fast(table_id, entries[:-1], head) is None  # the head is ahead
    assert _fast(table_id, entries, Head(head.version, head.hash, "playing")) is None
    assert _fast("other-table", entries, head) is None  # the bodies name another table
    assert _fast(table_id, [], Head()) is None  # no table: the full audit says so
    hashes = b"".join(h for _, h in entries)
    bodies = b"\x1e".join(b for b, _ in entries)
    assert audit.audit_packed(table_id, head, len(entries), hashes[:-1], bodies) is None
    assert audit.audit_packed(table_id, head, len(entries), hashes, bodies + b"\xff") is None
    swapped = [entries[1], entries[0], *entries[2:]]
    assert _fast(table_id, swapped, head) is None


def _text(wire: dict[str, Any]) -> tuple[str, str]:
    """A wire event's type and the canonical JSON of its other fields but ``v``, no braces."""
    rest = {k: v for k, v in wire.items() if k not in ("type", "v")}
    return wire["type"], canonical_json(rest).decode()[1:-1]


def test_the_fast_texts_are_the_wire_texts(bodies: list[dict[str, Any]]) -> None:
    """The texts the fast path compares with are ``to_wire``'s output as canonical JSON, and
    ``_builder`` splices the envelope into a payload text as ``canonical_json`` writes it."""
    seen: set[str] = set()
    for body in bodies:
        kind = body["type"]
        wire = _payload(body)
        text = _text(wire)[1]
        seen.add(kind)
        if kind in audit._TEXT_TYPES:
            (engine_event,) = to_engine(parse_event(wire))
            assert audit._TEXT_OF[type(engine_event)](engine_event) == (kind, text)
        elif kind == "deal_started":
            deck = tuple(random.Random(body["version"]).sample(ALL_CARDS, len(ALL_CARDS)))
            started = to_engine(parse_event(wire), deck_of={body["number"]: deck}.__getitem__)[0]
            assert isinstance(started, DealStarted)
            assert audit._deal_texts(started, body) == [
                _text(w) for w in audit._wire_of(started, body)
            ]
        elif kind == "player_joined":
            assert audit._joined_seat(text) == body["seat"]
            assert audit._joined_seat(text.replace('"name":"', '"name": "')) is None
        elif kind == "deal_revealed":
            assert audit._reveal_text(wire) == text
        elif kind == "table_created":
            (started,) = to_engine(parse_event(wire))
            assert audit._fast_wire(started, wire) == audit._wire_of(started, wire) == [wire]
            continue
        build = audit._FAST_SHAPES[kind][1]
        assert build is not None
        for causation in (None, "cmd-7:12"):
            full = {**body, "causation": causation} if causation else body
            caused = f'"causation":"{causation}",' if causation else ""
            prev = "ab" * 32
            at = str(body["time"])
            spliced = build(
                prev, caused, body["command_id"], body["table_id"], at, body["version"], text
            )
            assert spliced.encode() == prev.encode() + b"\n" + canonical_json(full)
    assert seen >= audit._DICT_TYPES | {"card_turned", "meld_made", "stakes_settled"}
    assert set(audit._FAST_SHAPES) == audit._TEXT_TYPES | audit._DICT_TYPES | audit._LOBBY_TYPES
    assert all(audit._FAST_SHAPES[kind][1] is None for kind in audit._LOBBY_TYPES)


def test_clean_tables_on_redis_take_the_fast_path(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    redis_url: str,
    tables: str,
    redis_sync: redis.Redis,
) -> None:
    async def no_full_read(*args: object) -> None:
        raise AssertionError("a clean table was read again for the full audit")

    monkeypatch.setattr("services.audit.store_audit.load_tables", no_full_read)
    code, data = audit_json(capsys, redis_url, tables, "--all")
    assert code == 0 and data["tables"] == 2, data

    async def replies() -> list[list[Any]]:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=False)
        try:
            return await audit.read_packed(RedisEventStore(client, KeySpace(tables)), [T0, "none"])
        finally:
            await client.aclose()

    (version, digest, status, count, hashes, packed), missing = asyncio.run(replies())
    entries = Stream(redis_sync, tables, T0).entries()
    assert count == len(entries) == int(version) and status == b"over"
    assert hashes == b"".join(f[b"h"] for _, f in entries) and digest == hashes[-32:].hex().encode()
    assert packed == b"\x1e".join(f[b"b"] for _, f in entries)
    assert missing == [None, None, None, 0, b"", b""]


def test_the_fast_reads_survive_a_flushed_script_and_an_early_stop(
    redis_url: str, tables: str, redis_sync: redis.Redis
) -> None:
    async def run() -> tuple[list[TableReport], TableReport, int]:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=False)
        try:
            store = RedisEventStore(client, KeySpace(tables))
            reports = []
            async for report in audit.audit_store(store, [T0, T1, T0], batch=1):
                reports.append(report)
                redis_sync.script_flush()  # the next batch's script is gone when it runs
            stopped = audit.audit_store(store, [T1, T0, T1], batch=1)
            first = await stopped.__anext__()
            await stopped.aclose()  # the batch sent ahead is never read: its connection closes
            return reports, first, len(client.connection_pool._in_use_connections)
        finally:
            await client.aclose()

    reports, first, in_use = asyncio.run(run())
    assert [r.table_id for r in reports] == [T0, T1, T0] and all(r.ok for r in reports)
    assert first.ok and first.table_id == T1 and in_use == 0


# --- usage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "name the tables to audit, or give --all (not both)"),
        (["t1", "--all"], "name the tables to audit, or give --all (not both)"),
        (["bad id!"], "invalid table id"),
        (["t1", "--batch", "0"], "--batch must be at least 1"),
        (["--all", "--jobs", "0"], "--jobs must be at least 1"),
        (["t1", "--jobs", "2"], "--jobs needs --all"),
        (["t1", "--namespace", "a b"], "invalid key namespace"),
        (["t1", "--redis-url", ""], "give --redis-url or set REDIS_URL"),
        (["t1", "--shards", "x"], "--shards must be a whole number, not 'x'"),
        (["t1", "--shards", "0"], "shards"),
    ],
)
def test_usage_errors_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["audit", *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_an_unreachable_redis_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit", "t1", "--redis-url", "redis://127.0.0.1:1/0"]) == 2
    assert "cannot read the store" in capsys.readouterr().err


def test_heads_come_back_as_the_store_gives_them(redis_url: str, redis_ns: str) -> None:
    async def run() -> tuple[dict[str, Head], dict[str, Head]]:
        client = redis.asyncio.Redis.from_url(redis_url, decode_responses=False)
        try:
            store = RedisEventStore(client, KeySpace(redis_ns))
            await record_selfplay(SelfplayConfig(2, 1, ("random", "random")), store)
            ids = ["selfplay-1-0", "selfplay-1-1", "nothing"]
            return await audit.read_heads(store, ids), {t: await store.head(t) for t in ids}
        finally:
            await client.aclose()

    piped, one_by_one = asyncio.run(run())
    assert piped == one_by_one and piped["nothing"] == Head()
