"""The key scheme: shards, hash tags, key names, scanning."""

from __future__ import annotations

import zlib

import pytest
from redis.crc import key_slot

from services.store import InvalidTableId, KeySpace


def test_shard_is_crc32_mod_shards() -> None:
    for shards in (1, 4, 16, 100):
        ks = KeySpace(shards=shards)
        for t in ("a", "table-1", "01JD7Q3KXW4N8ZC5T2M9PBVHRA", "x.y:z"):
            assert ks.shard_of(t) == zlib.crc32(t.encode()) % shards


def test_key_names() -> None:
    ks = KeySpace("cq", 16)
    s = ks.shard_of("t1")
    tag = f"{{s{s:02d}}}"
    assert ks.tag(s) == tag
    assert ks.events("t1") == f"cq:{tag}:t:t1:ev"
    assert ks.head("t1") == f"cq:{tag}:t:t1:head"
    assert ks.secret("t1") == f"cq:{tag}:t:t1:secret"
    assert ks.tokens("t1") == f"cq:{tag}:t:t1:tokens"
    assert ks.command_ids("t1") == f"cq:{tag}:t:t1:cmdids"
    assert ks.feed(s) == f"cq:{tag}:feed"
    assert ks.cmdids(s) == f"cq:{tag}:cmdids"
    assert ks.cmd(s) == f"cq:{tag}:cmd"
    assert ks.timers(s) == f"cq:{tag}:timers"
    assert ks.ckpt(s, "views") == f"cq:{tag}:ckpt:views"
    assert ks.view(s, "lobby") == f"cq:{tag}:view:lobby"
    assert ks.table_view("t1", "seat", "0") == f"cq:{tag}:view:t1:seat:0"
    assert ks.shard_key(s, "x", "y") == f"cq:{tag}:x:y"
    assert ks.cmdid_field("t1", "c1") == "t1|c1"
    assert ks.layout() == "cq:layout"
    assert KeySpace(shards=200).tag(150) == "{s150}"


def test_all_keys_of_a_table_share_one_slot() -> None:
    ks = KeySpace("cq", 16)
    for t in ("a", "b", "table-77", "01JD7Q3KXW4N8ZC5T2M9PBVHRA"):
        s = ks.shard_of(t)
        keys = [ks.events(t), ks.head(t), ks.secret(t), ks.tokens(t), ks.command_ids(t)]
        keys += [ks.feed(s)]
        keys += [ks.cmdids(s), ks.timers(s)]
        assert len({key_slot(k.encode()) for k in keys}) == 1


def test_table_of_head_round_trip() -> None:
    ks = KeySpace("t-abc", 8)
    for t in ("a", "c:1", "x.y-z_9"):
        assert ks.table_of_head(ks.head(t)) == t
    assert ks.table_of_head(ks.events("a")) is None
    assert ks.table_of_head("other:{s01}:t:a:head") is None
    assert ks.head_pattern() == "t-abc:{s*}:t:*:head"


def test_invalid_names() -> None:
    ks = KeySpace()
    for bad in ("", "a b", "a{b}", "x" * 129, "a|b", "a\n"):
        with pytest.raises(InvalidTableId) as info:
            ks.events(bad)
        assert info.value.code == "store/invalid_table_id"
    with pytest.raises(ValueError):
        KeySpace("a{b}")
    with pytest.raises(ValueError):
        KeySpace(shards=0)
    with pytest.raises(ValueError):
        ks.tag(16)
    with pytest.raises(ValueError):
        ks.shard_key(1)
    with pytest.raises(ValueError):
        ks.cmdid_field("t", "")
