"""Bots: legal choices only, greedy beats random, and no bot sees a hidden card."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace

import pytest

from engine.actions import Action, Discard, Force, NewMatch, Play, StartDeal, Take, Waive
from engine.bots import BOTS, Bot, GreedyBot, RandomBot, bot_view, make_bot
from engine.cards import ALL_CARDS, iter_cards, mask_of, parse_card, parse_cards
from engine.game import decide, evolve
from engine.legal import legal_actions
from engine.melds import Meld
from engine.rules import CLASSIC, PRESETS, Rules
from engine.state import Deal, Match, Phase


def _deck(seed: int) -> tuple[int, ...]:
    deck = list(ALL_CARDS)
    random.Random(f"test-bots/{seed}").shuffle(deck)
    return tuple(deck)


def _start(deck: tuple[int, ...], rules: Rules = CLASSIC, dealer: int = 0) -> Match:
    match: Match | None = None
    for command in (NewMatch(rules=rules, first_dealer=dealer), StartDeal(deck)):
        for event in decide(match, command):
            match = evolve(match, event)
    assert match is not None
    return match


def _play(match: Match, seat: int, action: Action) -> Match:
    for event in decide(match, Play(seat, action)):
        match = evolve(match, event)
    return match


def _positions(
    bots: tuple[Bot, Bot], seed: int, rules: Rules = CLASSIC
) -> Iterator[tuple[Match, int, random.Random]]:
    """Yield every decision point of one deal; the bot of the seat to act then plays on."""
    match = _start(_deck(seed), rules, dealer=seed % 2)
    rng = random.Random(seed)
    while (seat := match.to_act) is not None:
        yield match, seat, rng
        match = _play(match, seat, bots[seat].choose(match, seat, rng))


def _winner(bots: tuple[Bot, Bot], seed: int) -> int | None:
    match = _start(_deck(seed), dealer=seed % 2)
    rng = random.Random(seed)
    while (seat := match.to_act) is not None:
        match = _play(match, seat, bots[seat].choose(match, seat, rng))
    assert match.deal is not None and match.deal.outcome is not None
    return match.deal.outcome.winner


# --- legality --------------------------------------------------------------------------------


@pytest.mark.parametrize("rules", ["classic", "bicycle", "automatic-forcing", "long-runs"])
def test_bots_choose_only_legal_actions(rules: str) -> None:
    greedy, rand = GreedyBot(), RandomBot()
    steps = 0
    for seed in range(40):
        pair: tuple[Bot, Bot] = (greedy, rand) if seed % 2 else (rand, greedy)
        for match, seat, _rng in _positions(pair, seed, PRESETS[rules]):
            legal = legal_actions(match)
            assert greedy.choose(match, seat, random.Random(steps)) in legal
            assert rand.choose(match, seat, random.Random(steps)) in legal
            steps += 1
    assert steps > 1000


def test_greedy_is_deterministic_and_ignores_rng() -> None:
    match = _start(_deck(3))
    match = _play(match, 1, legal_actions(match)[0])  # seat 1 turns the first card
    greedy = GreedyBot()
    choices = {greedy.choose(match, 1, random.Random(s)) for s in range(5)}
    assert len(choices) == 1


def test_a_bot_refuses_to_act_for_the_wrong_seat() -> None:
    match = _start(_deck(4), dealer=0)  # seat 1 is to act
    for name in BOTS:
        with pytest.raises(ValueError, match="seat 0 is not to act"):
            make_bot(name).choose(match, 0, random.Random(0))


def test_make_bot_names_the_known_bots() -> None:
    assert isinstance(make_bot("random"), RandomBot)
    with pytest.raises(KeyError, match="unknown bot 'alphago'; known: greedy, random"):
        make_bot("alphago")


# --- strength --------------------------------------------------------------------------------


@pytest.mark.slow
def test_greedy_wins_most_decided_deals_against_random() -> None:
    greedy, rand = GreedyBot(), RandomBot()
    wins = losses = 0
    for seed in range(300):
        greedy_seat = seed % 2  # both seat orders, and the deal alternates with the seed
        bots: tuple[Bot, Bot] = (greedy, rand) if greedy_seat == 0 else (rand, greedy)
        winner = _winner(bots, 10_000 + seed)
        if winner == greedy_seat:
            wins += 1
        elif winner is not None:
            losses += 1
    assert wins + losses >= 100
    assert wins / (wins + losses) >= 0.70


# --- decisions in written positions ----------------------------------------------------------


def _melds(*texts: str) -> tuple[Meld, ...]:
    return tuple(sorted(mask_of(parse_cards(t)) for t in texts))


def _position(
    phase: Phase,
    hand: str,
    table: tuple[str, ...],
    opponent_table: tuple[str, ...] = (),
    opponent_hand: str = "",
    centre: str | None = None,
) -> Match:
    """Seat 0 to act; every card not named goes to the stock."""
    mine = mask_of(parse_cards(hand))
    theirs = mask_of(parse_cards(opponent_hand))
    tables = (_melds(*table), _melds(*opponent_table))
    centre_card = parse_card(centre) if centre else None
    used = mine | theirs
    for meld in (*tables[0], *tables[1]):
        used |= meld
    if centre_card is not None:
        used |= 1 << centre_card
    stock = tuple(c for c in ALL_CARDS if not used >> c & 1)
    deal = Deal(1, 1, 1, phase, 0, (mine, theirs), tables, stock, centre=centre_card)
    return Match(deal=deal)


def test_greedy_goes_out_when_it_can() -> None:
    match = _position(
        Phase.OFFERED, "QC KC", ("2S 3S 4S 5S", "7H 7D 7C 7S"), ("AD 2D 3D",), "KH KD", "JC"
    )
    action = GreedyBot().choose(match, 0, random.Random(0))
    assert isinstance(action, Take) and action.hand == mask_of(parse_cards("QC KC"))


def test_greedy_never_discards_the_card_that_lets_the_opponent_go_out() -> None:
    # the opponent has 10 cards down and an empty hand: 5H would be their 11th
    match = _position(
        Phase.DISCARD, "5H QD", ("QC QH QS",), ("AH 2H 3H 4H", "4C 5C 6C", "KS KH KD")
    )
    assert GreedyBot().choose(match, 0, random.Random(0)) == Discard(parse_card("QD"))


def test_greedy_keeps_a_pair_and_discards_the_loose_card() -> None:
    match = _position(Phase.DISCARD, "5C 5D KH", ("AS 2S 3S",), opponent_hand="7C 7D")
    assert GreedyBot().choose(match, 0, random.Random(0)) == Discard(parse_card("KH"))


def test_greedy_waives_by_default_and_forces_when_configured() -> None:
    match = _position(Phase.FORCE_WINDOW, "5C 5D", ("AS 2S 3S",), ("7H JH QH",), "2C 3C 4C", "KH")
    assert GreedyBot().choose(match, 0, random.Random(0)) == Waive()
    assert GreedyBot(force_min_hand=3).choose(match, 0, random.Random(0)) == Force()
    assert GreedyBot(force_min_hand=4).choose(match, 0, random.Random(0)) == Waive()


# --- hidden information ----------------------------------------------------------------------


def _reshuffle_hidden(match: Match, seat: int, rng: random.Random) -> Match:
    """Redeal the opponent's hand and the stock from their cards: same counts, same view."""
    deal = match.deal
    assert deal is not None
    other = 1 - seat
    hidden = [*iter_cards(deal.hands[other]), *deal.stock]
    rng.shuffle(hidden)
    size = deal.hands[other].bit_count()
    hands = list(deal.hands)
    hands[other] = mask_of(hidden[:size])
    return replace(
        match, deal=replace(deal, hands=(hands[0], hands[1]), stock=tuple(hidden[size:]))
    )


class _PeekingBot:
    """A cheat for the control case: its choice depends on the opponent's hand."""

    def choose(self, match: Match, seat: int, rng: random.Random) -> Action:
        actions = legal_actions(match)
        assert match.deal is not None
        return actions[match.deal.hands[1 - seat] % len(actions)]


def _changes_of_mind(bot: Bot, deals: range) -> tuple[int, int, int]:
    """Return (positions checked, reshuffles that moved hidden cards, changed choices)."""
    checked = moved = changed = 0
    opponent = RandomBot()
    for seed in deals:
        pair: tuple[Bot, Bot] = (bot, opponent) if seed % 2 else (opponent, bot)
        for match, seat, rng in _positions(pair, seed):
            if pair[seat] is not bot:
                continue
            view = bot_view(match, seat)
            state = rng.getstate()
            for k in range(3):
                other = _reshuffle_hidden(match, seat, random.Random(f"{seed}/{checked}/{k}"))
                assert bot_view(other, seat) == view
                assert legal_actions(other) == legal_actions(match)
                assert other.deal is not None and match.deal is not None
                moved += other.deal.hands[1 - seat] != match.deal.hands[1 - seat]
                first, second = random.Random(), random.Random()
                first.setstate(state)
                second.setstate(state)
                changed += bot.choose(other, seat, second) != bot.choose(match, seat, first)
            checked += 1
    return checked, moved, changed


@pytest.mark.parametrize("name", sorted(BOTS))
def test_bots_decide_only_from_what_their_seat_sees(name: str) -> None:
    checked, moved, changed = _changes_of_mind(make_bot(name), range(500, 540))
    assert checked > 400
    assert moved > checked  # the reshuffles really moved hidden cards
    assert changed == 0


def test_the_hidden_information_check_catches_a_peeking_bot() -> None:
    _checked, _moved, changed = _changes_of_mind(_PeekingBot(), range(500, 510))
    assert changed > 0
