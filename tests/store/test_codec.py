"""The Redis store's entry codec: every body survives pack/unpack exactly, and the canonical JSON
it builds on the way is byte for byte ``events.chain.canonical_json`` (no Redis needed)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_helpers import typical_body

from events.chain import canonical_json
from services.store.redis_store import encode_body, encode_body_exact, pack_body, unpack_body

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.just("a\x1fb")
)
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3)
)
keys = st.sampled_from(
    ["type", "v", "command_id", "causation", "time", "seat", "card", "x\x1f", "é", "table_id"]
) | st.text(max_size=5)


@pytest.mark.parametrize(
    "body",
    [
        {},
        typical_body(3),
        {"type": "", "v": True, "time": 1.5, "causation": None, "command_id": 7},
        {"type": "a\x1fb", "command_id": "\x1f", "causation": "é♥"},
        {"v": -3, "time": 2**70, "payload": {"nested": ["\x1f", {"b": 1, "a": 2}]}},
        {"seat": 2**70, "cards": [-(2**65), 1.5e300], "nan_free": "NaN"},
        {"a": -(2**63) - 1, "b": 2**64, "c": [2**62, -0.0, 1e-320], "d": "12345678901234567890"},
    ],
)
def test_codec_round_trip_examples(body: dict[str, Any]) -> None:
    packed = pack_body(body)
    assert packed.count(b"\x1f") == 5
    assert unpack_body("t", 4, packed) == {**body, "table_id": "t", "version": 4}


@given(st.dictionaries(keys, values, max_size=8))
def test_codec_round_trip_any_body(body: dict[str, Any]) -> None:
    packed = pack_body(body)
    assert packed.count(b"\x1f") == 5
    assert unpack_body("t", 1, packed) == {**body, "table_id": "t", "version": 1}


@given(st.dictionaries(keys, values, max_size=8))
def test_encoded_canonical_json_is_canonical_json(body: dict[str, Any]) -> None:
    canonical, stored = encode_body(body)
    assert canonical == canonical_json(body)
    assert stored == pack_body(body)
    assert (canonical, stored) == encode_body_exact(body)


@pytest.mark.parametrize(
    "body",
    [
        typical_body(5),
        {"type": "meld_made", "v": 1, "hand": ["AC", "2C"], "table": [["5S", "6S", "7S"]]},
        {"scores": (3, -1), "winner": None, "ok": True, "name": 'Zoë \u2028 🃏 \x1f "'},
        {"x": [1.5, 1e16], "y": {"b": 1e-7, "a": [2**70]}},
        {"big": 2**64, "neg": -(2**63) - 1},
        {"deep": [[[1]]], "set": ["a"]},
    ],
)
def test_quick_and_exact_encodings_agree(body: dict[str, Any]) -> None:
    assert encode_body(body) == encode_body_exact(body)
    assert encode_body(body)[0] == canonical_json(body)


def test_encode_rejects_what_json_rejects() -> None:
    with pytest.raises(ValueError):
        encode_body({"x": float("nan")})
    with pytest.raises(TypeError):
        encode_body({"x": {1, 2}})
    with pytest.raises(TypeError):
        encode_body({1: "a"})  # type: ignore[dict-item]
