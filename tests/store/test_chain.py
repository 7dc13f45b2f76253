"""The hash chain of events/chain.py: canonical JSON, hand re-derivation, verify_chain."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.chain import (
    GENESIS_HASH,
    canonical_json,
    event_body,
    event_hash,
    verify_chain,
)


@dataclass(frozen=True)
class Ev:
    version: int
    body: dict[str, Any]
    hash: str


def make_chain(n: int, table_id: str = "t1") -> list[Ev]:
    out: list[Ev] = []
    prev = GENESIS_HASH
    for version in range(1, n + 1):
        body = {
            "type": "card_turned",
            "v": 1,
            "seat": version % 2,
            "card": "7H",
            "table_id": table_id,
            "version": version,
            "command_id": f"cmd{version:019d}",
            "causation": f"cmd{version - 1:019d}",
            "time": 1764480000000 + version,
        }
        h = event_hash(prev, body)
        out.append(Ev(version, body, h))
        prev = h
    return out


def test_genesis_is_64_zeros() -> None:
    assert GENESIS_HASH == "0" * 64


def test_canonical_json_sorted_compact_utf8() -> None:
    assert canonical_json({"b": 1, "a": {"d": [1, 2], "c": "é♥"}}) == (
        '{"a":{"c":"é♥","d":[1,2]},"b":1}'.encode()
    )


def test_canonical_json_rejects_nan() -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": float("nan")})


def test_hash_rederived_by_hand() -> None:
    body = {"type": "table_opened", "v": 1, "table_id": "t1", "version": 1}
    text = b'{"table_id":"t1","type":"table_opened","v":1,"version":1}'
    by_hand = hashlib.sha256(GENESIS_HASH.encode() + b"\n" + text).hexdigest()
    assert event_hash(GENESIS_HASH, body) == by_hand


def test_hash_ignores_hash_fields() -> None:
    body = {"type": "x", "version": 1}
    with_hashes = {**body, "hash": "ab" * 32, "prev_hash": GENESIS_HASH}
    assert event_hash(GENESIS_HASH, with_hashes) == event_hash(GENESIS_HASH, body)
    assert event_body(with_hashes) == body


def test_hash_depends_on_prev() -> None:
    body = {"type": "x"}
    assert event_hash(GENESIS_HASH, body) != event_hash("1" * 64, body)


def test_bad_prev_hash_rejected() -> None:
    with pytest.raises(ValueError):
        event_hash("abc", {})


def test_verify_chain_ok() -> None:
    chain = make_chain(20)
    assert verify_chain(chain) is None
    assert verify_chain([]) is None
    # a tail of the chain verifies from the hash before it
    assert verify_chain(chain[5:], prev_hash=chain[4].hash) is None
    assert verify_chain(chain[5:], prev_hash=chain[4].hash, first_version=6) is None


def test_verify_chain_flat_dicts() -> None:
    chain = make_chain(5)
    flat = [{**e.body, "hash": e.hash} for e in chain]
    assert verify_chain(flat) is None
    flat[3] = {**flat[3], "card": "8H"}
    assert verify_chain(flat) == 4


def test_verify_chain_tampered_body() -> None:
    chain = make_chain(10)
    bad = Ev(7, {**chain[6].body, "card": "KS"}, chain[6].hash)
    assert verify_chain([*chain[:6], bad, *chain[7:]]) == 7


def test_verify_chain_tampered_hash() -> None:
    chain = make_chain(10)
    bad = Ev(3, chain[2].body, "f" * 64)
    assert verify_chain([*chain[:2], bad, *chain[3:]]) == 3


def test_verify_chain_rehashed_forgery_breaks_next_link() -> None:
    # Rewriting event 4 and recomputing its own hash still breaks event 5's link.
    chain = make_chain(8)
    forged_body = {**chain[3].body, "card": "KS"}
    forged = Ev(4, forged_body, event_hash(chain[2].hash, forged_body))
    assert verify_chain([*chain[:3], forged, *chain[4:]]) == 5


def test_verify_chain_gap_and_order() -> None:
    chain = make_chain(6)
    assert verify_chain([*chain[:2], *chain[3:]]) == 4
    assert verify_chain([chain[1], chain[0]]) == 2
    # the tail alone from genesis must start at version 1
    assert verify_chain(chain[2:]) == 3


def test_verify_chain_version_field_mismatch() -> None:
    chain = make_chain(3)
    body = {**chain[1].body, "version": 9}
    bad = Ev(2, body, event_hash(chain[0].hash, body))
    assert verify_chain([chain[0], bad, chain[2]]) == 2


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_hash_is_deterministic_and_order_free(body: dict[str, Any]) -> None:
    reordered = dict(reversed(list(body.items())))
    assert canonical_json(body) == canonical_json(reordered)
    assert event_hash(GENESIS_HASH, body) == event_hash(GENESIS_HASH, reordered)
    # canonical JSON round-trips to the same value and is a fixed point
    text = canonical_json(body)
    assert json.loads(text) == body
    assert canonical_json(json.loads(text)) == text


@given(st.integers(min_value=1, max_value=30), st.data())
def test_any_single_change_is_caught(n: int, data: st.DataObject) -> None:
    chain = make_chain(n)
    i = data.draw(st.integers(min_value=0, max_value=n - 1))
    changed = Ev(chain[i].version, {**chain[i].body, "seat": 7}, chain[i].hash)
    assert verify_chain([*chain[:i], changed, *chain[i + 1 :]]) == i + 1


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


@given(_json_values)
def test_canonical_json_is_the_documented_json_dumps(value: object) -> None:
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    assert canonical_json(value) == expected.encode("utf-8")


@pytest.mark.parametrize("bad", [float("nan"), {1: [float("inf")]}, {"a": {2, 3}}, b"bytes"])
def test_canonical_json_refuses_what_json_refuses(bad: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonical_json(bad)


def test_canonical_json_names_a_circular_reference() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        canonical_json(loop)
