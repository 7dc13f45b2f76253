"""Bots that play a seat by choosing one of ``legal_actions``: a random one and a greedy one.

A bot decides from its seat's ``BotView`` (the hands ``engine.secrecy.sees`` lets it see) and
its legal actions alone, with the randomness it is given; why that leaks nothing is in
``docs/rules.md`` ("Module notes").

>>> import random
>>> sorted(BOTS)
['greedy', 'random']
>>> isinstance(make_bot("greedy"), GreedyBot)
True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import Protocol

from engine.actions import Action, Discard, Force, Leave, Refuse, Take, Waive
from engine.cards import FULL_MASK, Card, CardMask, card, count, iter_cards, rank_of, suit_of
from engine.game_events import Decline
from engine.legal import legal_actions
from engine.melds import Meld, can_split, is_meld
from engine.rules import Rules
from engine.secrecy import sees
from engine.state import Match, Phase


class Bot(Protocol):
    """A player: picks one of the legal actions of ``seat``, the seat to act."""

    def choose(self, match: Match, seat: int, rng: random.Random) -> Action:
        """Return one action of ``legal_actions(match)``; ``rng`` is the only randomness."""
        ...


# --- what a seat may see ---------------------------------------------------------------------


@dataclass(frozen=True)
class BotView:
    """What ``seat`` knows during a deal: its own cards, everything face up, and counts.

    ``waste`` is public because each wasted card was face up before it was refused.  The
    opponent's hand and the stock appear only as counts.
    """

    seat: int
    rules: Rules
    phase: Phase
    hand: CardMask
    table: tuple[Meld, ...]
    opponent_table: tuple[Meld, ...]
    centre: Card | None
    declined: Decline | None
    waste: CardMask
    stock_count: int
    opponent_hand_count: int

    @property
    def table_mask(self) -> CardMask:
        """Return the cards of the seat's own table."""
        return _union(self.table)

    @property
    def opponent_mask(self) -> CardMask:
        """Return the cards of the opponent's table."""
        return _union(self.opponent_table)

    @property
    def unseen(self) -> CardMask:
        """Return the cards the seat has not seen: the opponent's hand and the stock, mixed."""
        seen = self.hand | self.table_mask | self.opponent_mask | self.waste
        if self.centre is not None:
            seen |= 1 << self.centre
        return FULL_MASK & ~seen


def bot_view(match: Match, seat: int) -> BotView:
    """Return what ``seat`` may see of the running deal; raises ValueError when none is running."""
    deal = match.deal
    if deal is None or deal.phase is Phase.OVER:
        raise ValueError("no deal is being played")
    waste = 0
    for c in deal.waste:
        waste |= 1 << c
    return BotView(
        seat=seat,
        rules=match.rules,
        phase=deal.phase,
        hand=sum(hand for owner, hand in enumerate(deal.hands) if sees(seat, owner)),
        table=deal.tables[seat],
        opponent_table=deal.tables[1 - seat],
        centre=deal.centre,
        declined=deal.declined,
        waste=waste,
        stock_count=len(deal.stock),
        opponent_hand_count=count(deal.hands[1 - seat]),
    )


def _union(melds: Sequence[Meld]) -> CardMask:
    mask = 0
    for m in melds:
        mask |= m
    return mask


def _legal_for(match: Match, seat: int) -> list[Action]:
    if match.to_act != seat:
        raise ValueError(f"seat {seat} is not to act (seat to act: {match.to_act})")
    return legal_actions(match)


# --- the random bot --------------------------------------------------------------------------


class RandomBot:
    """Choose uniformly among the legal actions."""

    def choose(self, match: Match, seat: int, rng: random.Random) -> Action:
        """Return a uniformly random legal action; raises ValueError when ``seat`` is not to act."""
        return rng.choice(_legal_for(match, seat))


# --- the greedy bot --------------------------------------------------------------------------


@cache
def _triples(c: Card) -> tuple[tuple[Card, Card], ...]:
    """Return the other two cards of every 3-card meld (set or run) that holds ``c``."""
    rank, suit = rank_of(c), suit_of(c)
    found = [
        (card(rank, a), card(rank, b)) for a, b in combinations(range(4), 2) if suit not in (a, b)
    ]
    for start in range(rank - 2, rank + 1):
        if 0 <= start <= 7:
            others = [card(r, suit) for r in range(start, start + 3) if r != rank]
            found.append((others[0], others[1]))
    return tuple(found)


@dataclass(frozen=True)
class GreedyBot:
    """A one-step greedy player with a hand-potential evaluation (see ``value`` and ``danger``).

    Takes are scored by the position they leave after the best discard: each table card is worth
    ``table_weight``; a hand card that completes a meld in hand or lays off on the table is worth
    ``made_weight``; otherwise each unseen card that would complete a 3-card meld with it is worth
    ``out_weight`` (pairs, near runs, gaps).  A discard also pays ``danger_weight`` times its use
    to the opponent: fitting their table (fatal when it would let them go out), or completing a
    meld with unseen cards that may be in their hand.  Leaving a turned card pays its danger too.
    With at most ``exact_outs_hand`` hand cards left, each unseen card that would let it go out
    adds ``go_out_weight``.  Refusing scores the position as it stands, so a take that improves
    it wins; in practice the bot takes nearly every card it can.

    Forcing helps the opponent's table, so the bot waives unless ``force_min_hand`` is set; then
    it forces when the opponent holds at least that many cards (never fewer than 2: a forced
    card could be their last); ``docs/rules.md`` ("Module notes") has the games that chose this.
    The bot is deterministic: ties go to the first legal action, and ``rng`` is not used.
    """

    table_weight: float = 2.0
    made_weight: float = 1.0
    out_weight: float = 0.3
    two_away_weight: float = 0.02
    danger_weight: float = 1.0
    force_min_hand: int | None = None
    exact_outs_hand: int = 2
    go_out_weight: float = 0.5

    def choose(self, match: Match, seat: int, rng: random.Random) -> Action:
        """Return the best legal action for the seat's view; raises ValueError when not to act."""
        return self.choose_from_view(bot_view(match, seat), _legal_for(match, seat))

    def choose_from_view(self, view: BotView, actions: Sequence[Action]) -> Action:
        """Return the best of ``actions`` judged only from ``view`` (ties: the first listed)."""
        if len(actions) == 1:
            return actions[0]
        if view.phase is Phase.DISCARD:
            discards = [a for a in actions if isinstance(a, Discard)]
            return max(discards, key=lambda a: self._discard_score(view, view.hand, a.card))
        if view.phase is Phase.FORCE_WINDOW:
            return self._force_or_waive(view, actions)
        return self._take_or_decline(view, actions)

    # --- evaluation ---

    def value(
        self, view: BotView, hand: CardMask, table_melds: Sequence[Meld], live: CardMask
    ) -> float:
        """Return how promising a hand and table are: table cards plus each hand card's potential.

        ``view`` gives the rules; ``live`` is the unseen cards that may still come.
        """
        table = _union(table_melds)
        have = hand | table
        limit = view.rules.max_run_length
        total = self.table_weight * count(table)
        for h in iter_cards(hand):
            outs = 0
            two_away = 0
            made = False
            for a, b in _triples(h):
                in_a, in_b = have >> a & 1, have >> b & 1
                if in_a and in_b:
                    made = True
                    break
                if in_a and live >> b & 1:
                    outs |= 1 << b
                elif in_b and live >> a & 1:
                    outs |= 1 << a
                elif live >> a & 1 and live >> b & 1:
                    two_away += 1
            if not made:
                bit = 1 << h
                made = any(is_meld(m | bit, limit) for m in table_melds)
            if made:
                total += self.made_weight
            else:
                total += self.out_weight * count(outs) + self.two_away_weight * two_away
        if count(hand) <= self.exact_outs_hand:
            total += self.go_out_weight * self.going_out_cards(have, live, limit)
        return total

    @staticmethod
    def going_out_cards(have: CardMask, live: CardMask, limit: int | None) -> int:
        """Return how many unseen cards would let hand + table + that card split into melds."""
        return sum(1 for c in iter_cards(live) if can_split(have | 1 << c, limit))

    def danger(self, view: BotView, c: Card, live: int) -> float:
        """Return how much offering ``c`` to the opponent may help them.

        Fitting their table with no hand card at all is worst when their hand is empty (they go
        out); otherwise each unseen card that completes a meld with ``c`` and their table, or
        each unseen pair that completes one with ``c`` alone, counts by the chance that it is in
        their hand.
        """
        opp = view.opponent_mask
        bit = 1 << c
        unseen = max(1, count(live))
        p = view.opponent_hand_count / unseen
        score = 0.0
        if opp and can_split(opp | bit, view.rules.max_run_length):
            if view.opponent_hand_count == 0:
                return 100.0
            score += 1.0
        for a, b in _triples(c):
            in_a, in_b = opp >> a & 1, opp >> b & 1
            live_a, live_b = live >> a & 1, live >> b & 1
            if live_a and live_b:
                score += p * p
            elif (in_a and live_b) or (in_b and live_a):
                score += p
        return score

    def _discard_score(self, view: BotView, hand: CardMask, c: Card) -> float:
        live = view.unseen
        rest = hand & ~(1 << c)
        keep = self.value(view, rest, view.table, live)
        return keep - self.danger_weight * self.danger(view, c, live)

    # --- decisions ---

    def _take_or_decline(self, view: BotView, actions: Sequence[Action]) -> Action:
        live = view.unseen
        best: Action | None = None
        best_score = float("-inf")
        seen_hands: set[CardMask] = set()
        for action in actions:
            if isinstance(action, Take):
                if action.hand in seen_hands:
                    continue  # the first take per hand cards is the default arrangement
                seen_hands.add(action.hand)
                score = self._take_score(view, action, live)
            elif isinstance(action, Refuse | Leave):
                score = self._decline_score(view, action, live)
            else:
                continue  # hand melds without a centre card: not needed to go out
            if score > best_score:
                best, best_score = action, score
        return best if best is not None else actions[0]

    def _take_score(self, view: BotView, take: Take, live: int) -> float:
        hand = view.hand & ~take.hand
        if not hand:
            return float("inf")  # goes out
        melds = take.table or ()
        return max(
            self.value(view, hand & ~(1 << c), melds, live)
            - self.danger_weight * self.danger(view, c, live)
            for c in iter_cards(hand)
        )

    def _decline_score(self, view: BotView, action: Action, live: int) -> float:
        score = self.value(view, view.hand, view.table, live)
        if isinstance(action, Leave) and view.centre is not None:
            score -= self.danger_weight * self.danger(view, view.centre, live)
        return score

    def _force_or_waive(self, view: BotView, actions: Sequence[Action]) -> Action:
        threshold = self.force_min_hand
        force = threshold is not None and view.opponent_hand_count >= max(2, threshold)
        wanted = Force if force else Waive
        return next(a for a in actions if isinstance(a, wanted))


BOTS: dict[str, Callable[[], Bot]] = {"random": RandomBot, "greedy": GreedyBot}


def make_bot(name: str) -> Bot:
    """Return a new bot of the registered name; raises KeyError listing the known names."""
    try:
        factory = BOTS[name]
    except KeyError:
        raise KeyError(f"unknown bot {name!r}; known: {', '.join(sorted(BOTS))}") from None
    return factory()
