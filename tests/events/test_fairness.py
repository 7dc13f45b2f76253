"""Tests of provably fair deals: seeds, commitments, the v1 shuffle and docs/fairness.md."""

from __future__ import annotations

import contextlib
import doctest
import hashlib
import hmac
import io
import json
import random
import re
import shlex
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.cards import ALL_CARDS, DECK_SIZE, format_card, format_cards
from events import fairness
from events.fairness import (
    ALGORITHMS,
    SHUFFLE_ALGORITHM,
    Draw,
    InvalidSeed,
    UnknownAlgorithm,
    Word,
    apply_draws,
    commitment,
    deal_context,
    derive_deal,
    fisher_yates_draws,
    hmac_block,
    hmac_words,
    main,
    new_seed,
    parse_seed,
    seed_hex,
    shuffle,
    split_deck,
    trace,
    verify,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "fairness.md"
EXAMPLE_SEED = bytes(range(32))
EXAMPLE_CONTEXT = "T-example/1"
EXAMPLE_ARGS = ["--seed", EXAMPLE_SEED.hex(), "--context", EXAMPLE_CONTEXT]
seeds = st.binary(min_size=32, max_size=32)
contexts = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


def doc_text() -> str:
    """Return the text of docs/fairness.md."""
    return DOC.read_text(encoding="utf-8")


def fenced_blocks(language: str) -> list[str]:
    """Return the bodies of the doc's fenced code blocks tagged with a language."""
    return re.findall(rf"^```{language}\n(.*?)^```$", doc_text(), flags=re.M | re.S)


def run_cli(args: list[str]) -> tuple[int, str]:
    """Run the command line with arguments; return its exit status and standard output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(args)
    return status, out.getvalue()


def worked_example() -> tuple[list[str], str]:
    """Return the worked example's command arguments and the output the doc shows for it."""
    (block,) = [b for b in fenced_blocks("text") if b.startswith("$ python -m events.fairness")]
    command, _, shown = block.partition("\n")
    return shlex.split(command)[4:], shown


# --- the doc cannot go stale -------------------------------------------------------------------


def test_worked_example_is_what_the_tool_prints() -> None:
    args, shown = worked_example()
    assert parse_seed(args[args.index("--seed") + 1]) == EXAMPLE_SEED
    assert args[args.index("--context") + 1] == EXAMPLE_CONTEXT
    status, printed = run_cli(args)
    assert status == 0
    assert printed == shown


def test_worked_example_numbers_agree_with_the_code() -> None:
    _, shown = worked_example()
    deal = derive_deal(EXAMPLE_SEED, EXAMPLE_CONTEXT)
    fields = dict(line.split(None, 1) for line in shown.splitlines()[:4])
    assert fields["commitment"] == commitment(EXAMPLE_SEED) == deal["commitment"]
    assert fields["algorithm"] == SHUFFLE_ALGORITHM
    rows = re.findall(r"^deck\[(\d+)\.\.(\d+)\]\s+(.+)$", shown, flags=re.M)
    assert [c for _, _, row in rows for c in row.split()] == deal["deck"]
    hands = dict(re.findall(r"^(non-dealer|dealer)\s+(.+)$", shown, flags=re.M))
    assert hands["non-dealer"].split() == deal["non_dealer"]
    assert hands["dealer"].split() == deal["dealer"]
    blocks = re.findall(r"^block (\d+)\s+([0-9a-f]{64})$", shown, flags=re.M)
    for counter, hex_block in blocks:
        assert hmac_block(EXAMPLE_SEED, EXAMPLE_CONTEXT, int(counter)).hex() == hex_block
    draws = re.findall(r"i=(\d+)\s+word \d = 0x([0-9a-f]{8}) =\s+(\d+) < (\d+): j = +(\d+)", shown)
    assert len(draws) == 10
    for draw, (i, hex_word, word, limit, j) in zip(
        trace(EXAMPLE_SEED, EXAMPLE_CONTEXT)[:10], draws, strict=True
    ):
        assert (draw.i, draw.limit, draw.j) == (int(i), int(limit), int(j))
        assert draw.word.value == int(hex_word, 16) == int(word)


def test_every_number_in_the_doc_comes_from_the_worked_example() -> None:
    _, shown = run_cli([*EXAMPLE_ARGS, "--trace", "39"])
    text = doc_text()
    for hex_number in re.findall(r"\b(?:0x)?([0-9a-f]{8}|[0-9a-f]{64})\b", text):
        assert hex_number in shown, hex_number
    for big in re.findall(r"\b\d{7,}\b", text):
        assert big in shown, big


def test_reading_of_the_worked_example_agrees_with_the_code() -> None:
    text = " ".join(doc_text().split())
    deal = derive_deal(EXAMPLE_SEED, EXAMPLE_CONTEXT)
    first = trace(EXAMPLE_SEED, EXAMPLE_CONTEXT)[0]
    found = re.search(r"first word is 0x([0-9a-f]{8}) = (\d+)", text)
    assert found is not None
    assert (int(found[1], 16), int(found[2])) == (first.word.value, first.word.value)
    assert f"`j = {first.word.value} mod 40 = {first.j}`" in text
    swapped = re.search(r"positions 39 \((\w\w)\) and (\d+) \((\w\w)\) swap", text)
    assert swapped is not None
    assert (swapped[1], int(swapped[2]), swapped[3]) == ("KS", first.j, format_card(first.j or 0))
    found = re.search(r"the non-dealer holds ((?:\w\w )+)…, the dealer ((?:\w\w )+)…", text)
    assert found is not None
    assert deal["non_dealer"][:3] == found[1].split()
    assert deal["dealer"][:3] == found[2].split()
    assert f"first turn shows {deal['stock'][0]}, the top of the stock" in text


def test_doc_starting_deck_is_the_canonical_order() -> None:
    rows = re.findall(r"^\s+position\s+(\d+)\.\.(\d+)\s+(.+)$", doc_text(), flags=re.M)
    assert [(int(a), int(b)) for a, b, _ in rows] == [(0, 9), (10, 19), (20, 29), (30, 39)]
    assert " ".join(row for _, _, row in rows) == format_cards(ALL_CARDS)


def test_doc_python_snippet_recomputes_the_deal() -> None:
    (snippet,) = fenced_blocks("python")
    namespace: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet, str(DOC), "exec"), namespace)
    deal = derive_deal(EXAMPLE_SEED, EXAMPLE_CONTEXT)
    assert out.getvalue().splitlines() == [
        f"commitment {deal['commitment']}",
        f"non-dealer {' '.join(deal['non_dealer'])}",
        f"dealer {' '.join(deal['dealer'])}",
        f"stock {' '.join(deal['stock'])}",
    ]
    deck_order = namespace["deck_order"]
    assert callable(deck_order)
    for k in range(20):
        seed = hashlib.sha256(b"snippet %d" % k).digest()
        context = deal_context(f"table-{k}", k + 1)
        assert deck_order(seed.hex(), context) == [
            format_card(c) for c in shuffle(seed, context=context)
        ]


def test_doc_shell_commands_give_the_commitment_and_the_blocks() -> None:
    if not all(shutil.which(tool) for tool in ("sh", "xxd", "sha256sum", "openssl")):
        pytest.skip("needs sh, xxd, sha256sum and openssl")
    (script,) = fenced_blocks("sh")
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    printed = re.findall(r"\b[0-9a-f]{64}\b", done.stdout)
    assert printed == [
        commitment(EXAMPLE_SEED),
        hmac_block(EXAMPLE_SEED, EXAMPLE_CONTEXT, 0).hex(),
        hmac_block(EXAMPLE_SEED, EXAMPLE_CONTEXT, 1).hex(),
    ]


def test_doc_names_the_algorithm_and_the_context_the_service_passes() -> None:
    text = doc_text()
    assert f"`{SHUFFLE_ALGORITHM}`" in text
    assert 'context = f"{table_id}/{deal_number}"' in text
    assert deal_context("T-example", 1) == EXAMPLE_CONTEXT


def test_module_doctests_pass() -> None:
    assert doctest.testmod(fairness).failed == 0


# --- the shuffle -------------------------------------------------------------------------------


@given(seeds, contexts)
def test_shuffle_is_a_permutation_of_the_40_cards(seed: bytes, context: str) -> None:
    deck = shuffle(seed, context=context)
    assert len(deck) == DECK_SIZE
    assert sorted(deck) == list(ALL_CARDS)


@given(seeds, contexts)
def test_shuffle_is_deterministic(seed: bytes, context: str) -> None:
    assert shuffle(seed, SHUFFLE_ALGORITHM, context) == shuffle(bytes(seed), context=context)


def test_context_and_seed_change_the_deck() -> None:
    decks = {shuffle(EXAMPLE_SEED, context=deal_context("T-example", n)) for n in range(1, 21)}
    decks |= {shuffle(EXAMPLE_SEED, context=deal_context(f"T-{n}", 1)) for n in range(20)}
    decks.add(shuffle(EXAMPLE_SEED))
    decks.add(shuffle(bytes(32), context=EXAMPLE_CONTEXT))
    assert len(decks) == 42


def test_hmac_words_are_the_blocks_cut_into_big_endian_words() -> None:
    words = hmac_words(EXAMPLE_SEED, EXAMPLE_CONTEXT)
    for counter in range(3):
        message = b"T-example/1:" + bytes([0, 0, 0, counter])
        block = hmac.new(EXAMPLE_SEED, message, hashlib.sha256).digest()
        for index in range(8):
            value = int.from_bytes(block[4 * index : 4 * index + 4], "big")
            assert next(words) == Word(counter, index, value)


def test_a_word_at_the_limit_is_rejected_and_the_next_one_used() -> None:
    limit_40 = (2**32 // 40) * 40
    assert limit_40 == 2**32 - 16
    values = [limit_40, 2**32 - 1, 65, *range(38, 0, -1)]
    draws = list(fisher_yates_draws(Word(0, k, v) for k, v in enumerate(values)))
    assert [(d.i, d.j) for d in draws[:4]] == [(39, None), (39, None), (39, 25), (38, 38)]
    assert len(draws) == 41
    deck = apply_draws(draws)
    expected = list(ALL_CARDS)
    expected[39], expected[25] = expected[25], expected[39]
    assert deck == tuple(expected)


def test_the_shuffle_draws_what_the_readable_trace_draws() -> None:
    """``shuffle`` takes a quicker way (copied HMAC states) to the deck that ``trace``, the
    step-by-step form ``docs/fairness.md`` follows, gives."""
    rng = random.Random(5)
    for n in range(300):
        seed = rng.randbytes(32)
        context = deal_context(f"table-{n}", 1 + n % 3) if n % 7 else "é ♥ " * n
        assert shuffle(seed, SHUFFLE_ALGORITHM, context) == apply_draws(trace(seed, context))


def test_trace_accepts_one_word_per_position_without_rejections() -> None:
    draws = trace(EXAMPLE_SEED, EXAMPLE_CONTEXT)
    assert [d.i for d in draws] == list(range(39, 0, -1))
    assert all(isinstance(d, Draw) and d.j is not None and 0 <= d.j <= d.i for d in draws)
    assert apply_draws(draws) == shuffle(EXAMPLE_SEED, context=EXAMPLE_CONTEXT)


def test_every_card_reaches_every_watched_position_about_equally() -> None:
    watched = (0, 1, 19, 20, 39)
    counts = {position: Counter[int]() for position in watched}
    for k in range(4000):  # fixed seeds: the check is deterministic, never flaky
        deck = shuffle(hashlib.sha256(b"uniformity %d" % k).digest(), context="T-uniform/1")
        for position in watched:
            counts[position][deck[position]] += 1
    for position in watched:
        # expected 100 per card, standard deviation about 10: 50..150 is five deviations
        assert set(counts[position]) == set(ALL_CARDS)
        assert all(50 <= n <= 150 for n in counts[position].values()), (position, counts[position])


# --- algorithms, seeds and commitments ---------------------------------------------------------


def test_unknown_algorithm_is_a_clear_error() -> None:
    with pytest.raises(UnknownAlgorithm, match=r"'hmac-sha256-fy-v9'.*hmac-sha256-fy-v1") as err:
        shuffle(EXAMPLE_SEED, "hmac-sha256-fy-v9")
    assert err.value.code == "fairness/unknown_algorithm"
    with pytest.raises(UnknownAlgorithm):
        derive_deal(EXAMPLE_SEED, EXAMPLE_CONTEXT, algorithm="")


def test_a_new_version_is_a_new_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    def reversed_v2(seed: bytes, context: str) -> tuple[int, ...]:
        return tuple(reversed(shuffle(seed, context=context)))

    monkeypatch.setitem(ALGORITHMS, "test-reversed-v2", reversed_v2)
    v1 = shuffle(EXAMPLE_SEED, context=EXAMPLE_CONTEXT)
    assert shuffle(EXAMPLE_SEED, "test-reversed-v2", EXAMPLE_CONTEXT) == v1[::-1]
    assert (
        derive_deal(EXAMPLE_SEED, EXAMPLE_CONTEXT, "test-reversed-v2")["algorithm"]
        == "test-reversed-v2"
    )


def test_new_seeds_are_32_fresh_bytes() -> None:
    drawn = {new_seed() for _ in range(100)}
    assert len(drawn) == 100
    assert all(len(seed) == 32 for seed in drawn)


@given(seeds)
def test_seed_hex_and_parse_seed_round_trip(seed: bytes) -> None:
    text = seed_hex(seed)
    assert re.fullmatch(r"[0-9a-f]{64}", text)
    assert parse_seed(text) == parse_seed(f"  {text.upper()}\n") == seed


@pytest.mark.parametrize(
    "text", ["", "00" * 31, "00" * 33, "0x" + "00" * 31, "zz" * 32, "00 " * 32]
)
def test_parse_seed_rejects_what_is_not_64_hex_digits(text: str) -> None:
    with pytest.raises(InvalidSeed) as err:
        parse_seed(text)
    assert err.value.code == "fairness/invalid_seed"


@pytest.mark.parametrize("seed", [b"", bytes(31), bytes(33)])
def test_a_seed_of_the_wrong_size_is_refused(seed: bytes) -> None:
    for call in (shuffle, commitment, seed_hex, lambda s: derive_deal(s, EXAMPLE_CONTEXT)):
        with pytest.raises(InvalidSeed):
            call(seed)
    assert verify(seed, hashlib.sha256(seed).hexdigest()) is False


def test_commitment_is_sha256_of_the_raw_seed_bytes() -> None:
    assert commitment(EXAMPLE_SEED) == hashlib.sha256(EXAMPLE_SEED).hexdigest()
    assert commitment(EXAMPLE_SEED) != hashlib.sha256(EXAMPLE_SEED.hex().encode()).hexdigest()


@given(seeds, seeds)
def test_verify_accepts_the_seed_and_refuses_any_other(seed: bytes, other: bytes) -> None:
    published = commitment(seed)
    assert verify(seed, published)
    assert verify(seed, published.upper())
    assert verify(other, published) is (other == seed)
    assert not verify(seed, published[:-1])
    assert not verify(seed, "not a commitment")


# --- dealing and the command line --------------------------------------------------------------


@given(seeds, contexts)
def test_hands_alternate_from_the_non_dealer_and_the_stock_follows(
    seed: bytes, context: str
) -> None:
    deck = shuffle(seed, context=context)
    non_dealer, dealer, stock = split_deck(deck)
    assert non_dealer == tuple(deck[k] for k in range(0, 20, 2))
    assert dealer == tuple(deck[k] for k in range(1, 20, 2))
    assert stock[0] == deck[20] and stock[-1] == deck[39] and len(stock) == 20
    deal = derive_deal(seed, context)
    assert deal["non_dealer"] == [format_card(c) for c in non_dealer]
    assert deal["dealer"] == [format_card(c) for c in dealer]
    assert deal["stock"] == [format_card(c) for c in stock]
    assert sorted(deal["non_dealer"] + deal["dealer"] + deal["stock"]) == sorted(deal["deck"])
    assert deal["seed"] == seed.hex() and deal["context"] == context


def test_cli_checks_the_commitment() -> None:
    status, printed = run_cli([*EXAMPLE_ARGS, "--commitment", commitment(EXAMPLE_SEED)])
    assert status == 0 and "matches" in printed
    status, printed = run_cli([*EXAMPLE_ARGS, "--commitment", commitment(bytes(32))])
    assert status == 1


def test_cli_json_is_the_derivation() -> None:
    status, printed = run_cli([*EXAMPLE_ARGS, "--json"])
    assert status == 0
    assert json.loads(printed) == derive_deal(EXAMPLE_SEED, EXAMPLE_CONTEXT)


@pytest.mark.parametrize(
    ("bad", "message"),
    [(["--seed", "abc"], "64 hexadecimal digits"), (["--algorithm", "v9"], "unknown shuffle")],
)
def test_cli_rejects_a_bad_seed_or_algorithm(
    bad: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*EXAMPLE_ARGS, *bad])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
