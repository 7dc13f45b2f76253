"""Deck derivation for the fast path: ``events.fairness.shuffle`` of the algorithm every deal
uses today, from copied SHA-256 states."""

from __future__ import annotations

import struct

from engine.cards import ALL_CARDS, Card
from events.fairness import SHUFFLE_ALGORITHM, shuffle
from services.audit.hashing import _SHA256

_WORDS = struct.Struct(">8I")
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_PAD = bytes([0x36]) * 32  # a 32-byte key is padded with zeros to SHA-256's 64-byte block
_PAD_O = bytes([0x5C]) * 32
_LIMITS = [(2**32 // (i + 1)) * (i + 1) for i in range(len(ALL_CARDS))]


def _shuffle_v1(seed: bytes, context: str) -> tuple[Card, ...]:
    """``events.fairness.shuffle`` for ``hmac-sha256-fy-v1`` in fewer steps (a test checks
    they agree): from the cards in order, Fisher-Yates for i = 39 … 1 with the 32-bit
    big-endian words of HMAC-SHA256(seed, context ":" counter), counter 0, 1, …, a word being
    skipped unless it is below the largest multiple of i + 1."""
    prefix = context.encode("utf-8") + b":"
    inner = _SHA256.copy()  # HMAC-SHA256 with a 32-byte key, from copies of its two states
    inner.update(seed.translate(_IPAD) + _PAD)
    outer = _SHA256.copy()
    outer.update(seed.translate(_OPAD) + _PAD_O)
    deck = list(ALL_CARDS)
    words: tuple[int, ...] = ()
    at = 8
    counter = 0
    i = len(deck) - 1
    while i:
        if at == 8:
            digest = inner.copy()
            digest.update(prefix + counter.to_bytes(4, "big"))
            block = outer.copy()
            block.update(digest.digest())
            words = _WORDS.unpack(block.digest())
            counter += 1
            at = 0
        word = words[at]
        at += 1
        if word < _LIMITS[i]:
            j = word % (i + 1)
            deck[i], deck[j] = deck[j], deck[i]
            i -= 1
    return tuple(deck)


def _deck_of(seed: bytes, algorithm: str, context: str) -> tuple[Card, ...]:
    """``events.fairness.shuffle``, the fast way for the algorithm every deal uses today."""
    if algorithm == SHUFFLE_ALGORITHM and len(seed) == 32:
        return _shuffle_v1(seed, context)
    return shuffle(seed, algorithm, context)
