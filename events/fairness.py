"""Provably fair deals: a secret seed per deal, its commitment, and the shuffle it determines.

``docs/fairness.md`` specifies the commit-reveal scheme and the shuffle step by step.

>>> seed = bytes(range(32))
>>> verify(seed, commitment(seed))
True
>>> len(set(shuffle(seed, context="T-example/1")))
40
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import secrets
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypedDict

from engine.cards import ALL_CARDS, DECK_SIZE, Card, format_card
from engine.codes import Code, CodedError

SHUFFLE_ALGORITHM = "hmac-sha256-fy-v1"
SEED_BYTES = 32
HAND_SIZE = 10
WORDS_PER_BLOCK = 8

ShuffleFunction = Callable[[bytes, str], tuple[Card, ...]]


class FairnessError(CodedError, ValueError):
    """Base of the errors of this module; ``code`` is stable across versions."""

    code = Code.FAIRNESS_ERROR.value


class InvalidSeed(FairnessError):
    """A seed is not 32 bytes, or its text is not 64 hexadecimal digits."""

    code = Code.FAIRNESS_INVALID_SEED.value


class UnknownAlgorithm(FairnessError):
    """A shuffle algorithm name that this version does not know."""

    code = Code.FAIRNESS_UNKNOWN_ALGORITHM.value


# --- seeds and commitments ---------------------------------------------------------------------


def new_seed() -> bytes:
    """Return a fresh secret seed: 32 bytes from the operating system's CSPRNG (``secrets``)."""
    return secrets.token_bytes(SEED_BYTES)


def seed_hex(seed: bytes) -> str:
    """Return a seed as 64 lowercase hexadecimal digits, the form events and players use.

    Raises InvalidSeed when the seed is not 32 bytes.
    """
    return _checked_seed(seed).hex()


def parse_seed(text: str) -> bytes:
    """Parse a seed written as 64 hexadecimal digits (any case, surrounding spaces ignored).

    Raises InvalidSeed naming the text when it is not exactly 64 hexadecimal digits.

    >>> parse_seed("00" * 32) == bytes(32)
    True
    """
    raw = text.strip()
    if len(raw) != 2 * SEED_BYTES or any(ch not in "0123456789abcdefABCDEF" for ch in raw):
        raise InvalidSeed(f"a seed is 64 hexadecimal digits, not {text!r}")
    return bytes.fromhex(raw)


def commitment(seed: bytes) -> str:
    """Return the commitment to a seed: SHA-256 of its 32 raw bytes, as 64 lowercase hex digits.

    Raises InvalidSeed when the seed is not 32 bytes.
    """
    return hashlib.sha256(_checked_seed(seed)).hexdigest()


def verify(seed: bytes, commitment_hex: str) -> bool:
    """Say whether a revealed seed matches the commitment published at the start of the deal.

    A seed that is not 32 bytes, or a commitment that is not 64 hex digits, never matches.
    """
    if len(seed) != SEED_BYTES:
        return False
    expected = hashlib.sha256(seed).hexdigest()
    return hmac.compare_digest(expected, commitment_hex.strip().lower())


def deal_context(table_id: str, deal_number: int) -> str:
    """Return the context the service binds a deal's shuffle to: ``f"{table_id}/{deal_number}"``.

    The deal number is the 1-based number of the deal at its table, as in the deal-started
    event.  The table id may itself hold ``/``: the deal number is what follows the last one.

    >>> deal_context("T-example", 1)
    'T-example/1'
    """
    return f"{table_id}/{deal_number}"


def _checked_seed(seed: bytes) -> bytes:
    """Return the seed unchanged; raise InvalidSeed when it is not 32 bytes."""
    if not isinstance(seed, bytes | bytearray) or len(seed) != SEED_BYTES:
        raise InvalidSeed(f"a seed is {SEED_BYTES} bytes, not {seed!r}")
    return bytes(seed)


# --- algorithm hmac-sha256-fy-v1 ---------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """One 32-bit big-endian word of the HMAC stream: block counter, index in the block, value."""

    counter: int
    index: int
    value: int


@dataclass(frozen=True)
class Draw:
    """One word drawn by the v1 Fisher–Yates step for position ``i``, accepted or rejected.

    ``limit`` is ``floor(2**32 / (i + 1)) * (i + 1)``; the word is rejected when it is not
    below the limit (``j`` is then None), else ``j = value % (i + 1)`` and deck[i], deck[j] swap.
    """

    word: Word
    i: int
    limit: int
    j: int | None


def hmac_block(seed: bytes, context: str, counter: int) -> bytes:
    """Return block ``counter`` of the v1 stream: HMAC-SHA256(seed, context + ":" + counter).

    The message is the UTF-8 bytes of the context, one ``:`` byte and the counter as 4 bytes
    big-endian.  Raises InvalidSeed when the seed is not 32 bytes.
    """
    message = context.encode("utf-8") + b":" + counter.to_bytes(4, "big")
    return hmac.new(_checked_seed(seed), message, hashlib.sha256).digest()


def hmac_words(seed: bytes, context: str) -> Iterator[Word]:
    """Yield the v1 word stream: blocks 0, 1, 2 … each cut into 8 big-endian 32-bit words."""
    counter = 0
    while True:
        block = hmac_block(seed, context, counter)
        for index in range(WORDS_PER_BLOCK):
            yield Word(counter, index, int.from_bytes(block[4 * index : 4 * index + 4], "big"))
        counter += 1


def fisher_yates_draws(words: Iterable[Word]) -> Iterator[Draw]:
    """Yield each draw of the v1 Fisher–Yates shuffle for i = 39 down to 1, using words in order.

    Words are consumed as one continuous stream: a rejected word is skipped and the next one is
    tried for the same ``i``; leftover words of a block serve the next positions.
    """
    stream = iter(words)
    for i in range(DECK_SIZE - 1, 0, -1):
        n = i + 1
        limit = (2**32 // n) * n
        while True:
            word = next(stream)
            if word.value < limit:
                yield Draw(word, i, limit, word.value % n)
                break
            yield Draw(word, i, limit, None)


def apply_draws(draws: Iterable[Draw]) -> tuple[Card, ...]:
    """Return the deck that results from swapping deck[i], deck[j] for each accepted draw.

    The deck starts in canonical order ``AC 2C … KC AD … KS``, i.e. the card ints 0 to 39.
    """
    deck = list(ALL_CARDS)
    for draw in draws:
        if draw.j is not None:
            deck[draw.i], deck[draw.j] = deck[draw.j], deck[draw.i]
    return tuple(deck)


def trace(seed: bytes, context: str = "") -> tuple[Draw, ...]:
    """Return every draw of the v1 shuffle of a seed and context, rejected ones included."""
    return tuple(fisher_yates_draws(hmac_words(_checked_seed(seed), context)))


_WORDS = struct.Struct(">8I")
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))
_PAD_I = bytes([0x36]) * (64 - SEED_BYTES)  # a 32-byte key padded with zeros to SHA-256's block
_PAD_O = bytes([0x5C]) * (64 - SEED_BYTES)
_LIMITS = tuple((2**32 // (i + 1)) * (i + 1) for i in range(DECK_SIZE))


def _shuffle_v1(seed: bytes, context: str) -> tuple[Card, ...]:
    """Return the deck of algorithm ``hmac-sha256-fy-v1`` (see ``docs/fairness.md``).

    The same draws as ``apply_draws(trace(seed, context))``, the readable form that the docs
    follow (a test checks the two agree), in fewer steps: HMAC-SHA256 from copies of its inner
    and outer hash states (RFC 2104 with the 32-byte key), each block's eight words unpacked at
    once, and no record of the draws kept.
    """
    prefix = context.encode("utf-8") + b":"
    inner = hashlib.sha256(seed.translate(_IPAD) + _PAD_I)
    outer = hashlib.sha256(seed.translate(_OPAD) + _PAD_O)
    deck = list(ALL_CARDS)
    words: tuple[int, ...] = ()
    at = WORDS_PER_BLOCK
    counter = 0
    i = DECK_SIZE - 1
    while i:
        if at == WORDS_PER_BLOCK:
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


ALGORITHMS: dict[str, ShuffleFunction] = {SHUFFLE_ALGORITHM: _shuffle_v1}
"""Every shuffle algorithm by its versioned name; a new version is a new entry, never an edit."""


def shuffle(seed: bytes, algorithm: str = SHUFFLE_ALGORITHM, context: str = "") -> tuple[Card, ...]:
    """Return the deck order that a seed, an algorithm and a context determine: the 40 cards.

    ``deck[0] … deck[19]`` are dealt alternately, deck[0] to the non-dealer, deck[1] to the
    dealer and so on; ``deck[20]`` is the top of the stock.  The service passes
    ``deal_context(table_id, deal_number)`` as the context.  Raises InvalidSeed for a seed that
    is not 32 bytes and UnknownAlgorithm for a name not in ``ALGORITHMS``.
    """
    function = ALGORITHMS.get(algorithm)
    if function is None:
        known = ", ".join(sorted(ALGORITHMS))
        raise UnknownAlgorithm(f"unknown shuffle algorithm {algorithm!r}; known: {known}")
    return function(_checked_seed(seed), context)


# --- dealing -----------------------------------------------------------------------------------


def split_deck(deck: Sequence[Card]) -> tuple[tuple[Card, ...], tuple[Card, ...], tuple[Card, ...]]:
    """Return the non-dealer's hand, the dealer's hand (both in dealt order) and the stock.

    RULES.md section 3: ten cards each, one at a time, the non-dealer first; the other twenty
    cards are the stock, top first.
    """
    dealt = 2 * HAND_SIZE
    return tuple(deck[0:dealt:2]), tuple(deck[1:dealt:2]), tuple(deck[dealt:])


class DealDerivation(TypedDict):
    """What a seed determines for a deal, in card notation, for players and the audit tool."""

    algorithm: str
    context: str
    seed: str
    commitment: str
    deck: list[str]
    non_dealer: list[str]
    dealer: list[str]
    stock: list[str]


def derive_deal(seed: bytes, context: str, algorithm: str = SHUFFLE_ALGORITHM) -> DealDerivation:
    """Return the commitment, the deck, both hands (in the order dealt) and the stock (top first).

    Raises InvalidSeed and UnknownAlgorithm as ``shuffle`` does.
    """
    deck = shuffle(seed, algorithm, context)
    non_dealer, dealer, stock = split_deck(deck)
    return DealDerivation(
        algorithm=algorithm,
        context=context,
        seed=seed_hex(seed),
        commitment=commitment(seed),
        deck=[format_card(c) for c in deck],
        non_dealer=[format_card(c) for c in non_dealer],
        dealer=[format_card(c) for c in dealer],
        stock=[format_card(c) for c in stock],
    )


# --- command line ------------------------------------------------------------------------------


def format_derivation(deal: DealDerivation) -> str:
    """Return the report the command line prints: commitment, deck by rows of ten, hands, stock."""
    lines = [
        f"algorithm   {deal['algorithm']}",
        f"context     {deal['context']}",
        f"seed        {deal['seed']}",
        f"commitment  {deal['commitment']}",
    ]
    for start in range(0, DECK_SIZE, 10):
        label = f"deck[{start}..{start + 9}]"
        lines.append(f"{label:<14}{' '.join(deal['deck'][start : start + 10])}")
    lines.append(f"non-dealer    {' '.join(deal['non_dealer'])}")
    lines.append(f"dealer        {' '.join(deal['dealer'])}")
    lines.append(f"stock         {' '.join(deal['stock'])}  (top first)")
    return "\n".join(lines)


def format_trace(seed: bytes, context: str, draws: int) -> str:
    """Return the first ``draws`` draws of the v1 shuffle with each HMAC block they read."""
    deck = list(ALL_CARDS)
    lines: list[str] = []
    shown_block = -1
    for draw in trace(seed, context)[:draws]:
        word = draw.word
        if word.counter != shown_block:
            shown_block = word.counter
            lines.append(f"block {shown_block}  {hmac_block(seed, context, shown_block).hex()}")
        head = f"  i={draw.i:<2} word {word.index} = 0x{word.value:08x} = {word.value:>10}"
        if draw.j is None:
            lines.append(f"{head} >= {draw.limit}: rejected")
            continue
        n = draw.i + 1
        cards = f"{format_card(deck[draw.i])} <-> {format_card(deck[draw.j])}"
        swap = f"swap deck[{draw.i}], deck[{draw.j}]: {cards}"
        lines.append(f"{head} < {draw.limit}: j = {word.value % n:>2} = word % {n:<2}  {swap}")
        deck[draw.i], deck[draw.j] = deck[draw.j], deck[draw.i]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the commitment, deck and hands of a revealed seed; return the exit status.

    With ``--commitment`` it also checks the seed against the published commitment and returns
    1 when they differ; ``--trace N`` shows the first N draws; ``--json`` prints a JSON object.
    """
    parser = argparse.ArgumentParser(
        prog="python -m events.fairness",
        description="Recompute a Conquian deal from its revealed seed (docs/fairness.md).",
    )
    parser.add_argument("--seed", required=True, help="the revealed seed, 64 hex digits")
    parser.add_argument("--context", required=True, help="TABLE/DEAL, e.g. T-example/1")
    parser.add_argument("--algorithm", default=SHUFFLE_ALGORITHM, help="shuffle algorithm name")
    parser.add_argument("--commitment", help="the commitment published when the deal started")
    parser.add_argument("--trace", type=int, default=0, metavar="N", help="show the first N draws")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    try:
        seed = parse_seed(args.seed)
        deal = derive_deal(seed, args.context, args.algorithm)
    except FairnessError as exc:
        parser.error(str(exc))
    print(json.dumps(deal, indent=2) if args.json else format_derivation(deal))
    if args.trace > 0:
        if args.algorithm != SHUFFLE_ALGORITHM:
            parser.error(f"--trace shows {SHUFFLE_ALGORITHM} only")
        print(format_trace(seed, args.context, args.trace))
    if args.commitment is None:
        return 0
    if verify(seed, args.commitment):
        print("the seed matches the published commitment")
        return 0
    print("MISMATCH: the seed does not match the published commitment", file=sys.stderr)
    return 1


__all__ = [
    "ALGORITHMS",
    "HAND_SIZE",
    "SEED_BYTES",
    "SHUFFLE_ALGORITHM",
    "DealDerivation",
    "Draw",
    "FairnessError",
    "InvalidSeed",
    "UnknownAlgorithm",
    "Word",
    "apply_draws",
    "commitment",
    "deal_context",
    "derive_deal",
    "fisher_yates_draws",
    "hmac_block",
    "hmac_words",
    "main",
    "new_seed",
    "parse_seed",
    "seed_hex",
    "shuffle",
    "split_deck",
    "trace",
    "verify",
]

if __name__ == "__main__":
    sys.exit(main())
