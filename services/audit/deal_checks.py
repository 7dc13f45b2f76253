"""Step 3 of the full audit: each revealed seed against its deal's commitment, each dealt hand
against the seed's deck, and the deck of a deal still running as far as its events show it."""

from __future__ import annotations

from engine.cards import ALL_CARDS, Card
from events.fairness import FairnessError, deal_context, parse_seed, shuffle, split_deck, verify
from services.audit.audit_state import _AuditState
from services.audit.decode import _Decoded
from services.audit.plain_checks import _CARD_OF
from services.audit.results import (
    COMMITMENT_MISMATCH,
    DEALT_CARD_MISMATCH,
    EVENT_MISMATCH,
    TURNED_CARD_MISMATCH,
    UNREVEALED_DEAL,
)
from services.audit.wire import _wire_cards

_DEAL_TYPES = frozenset({"deal_started", "hand_dealt", "stakes_settled", "deal_revealed"})
"""The types step 3 reads (the full audit and the fast path list them as they read)."""


class _DealChecks(_AuditState):
    """Step 3 of ``_Audit``: the deals."""

    def check_deals(self) -> None:
        started: dict[int, int] = {}
        dealt: dict[int, list[_Decoded]] = {}
        settled: dict[int, _Decoded] = {}
        revealed: dict[int, _Decoded] = {}
        current = 0
        events = self.events
        for i in self.deal_events:
            event = events[i]
            kind = event.type
            if kind == "deal_started":
                current = event.payload["number"]
                if current in started:
                    raise self.fail_at(event, EVENT_MISMATCH, f"deal {current} starts twice")
                started[current] = i
            elif kind == "hand_dealt":
                dealt.setdefault(current, []).append(event)
            elif kind == "stakes_settled":
                if current:
                    settled.setdefault(current, event)
            else:
                number = event.payload["number"]
                if number in revealed:
                    raise self.fail_at(event, EVENT_MISMATCH, f"deal {number} is revealed twice")
                revealed[number] = event
                start = started.get(number)
                self._check_reveal(None if start is None else events[start], event)
        self.deals = len(started)
        self.reveals = {number: event.payload for number, event in revealed.items()}
        for number, i in started.items():
            hands = dealt.get(number, [])
            if number in revealed:
                self._check_hands(events[i], hands, self.decks[number])
            elif number in settled:
                raise self.fail_at(
                    settled[number],
                    UNREVEALED_DEAL,
                    f"deal {number} is settled but its seed was never revealed",
                )
            else:
                self.running = number
                self.decks[number] = self._recorded_deck(i, hands)

    def _check_reveal(self, start: _Decoded | None, reveal: _Decoded) -> None:
        number = reveal.payload["number"]
        if start is None:
            raise self.fail_at(
                reveal, COMMITMENT_MISMATCH, f"deal {number} is revealed but was never committed"
            )
        seed_text = reveal.payload["seed"]
        algorithm = reveal.payload["algorithm"]
        committed = start.payload["commitment"]
        if algorithm != start.payload["algorithm"]:
            raise self.fail_at(
                reveal,
                COMMITMENT_MISMATCH,
                f"deal {number} was committed under {start.payload['algorithm']!r} "
                f"(version {start.version}) but revealed under {algorithm!r}",
            )
        seed = parse_seed(seed_text)
        if not verify(seed, committed):
            raise self.fail_at(
                reveal,
                COMMITMENT_MISMATCH,
                f"SHA-256 of the seed {seed_text[:12]}… is not the commitment {committed[:12]}… "
                f"of deal {number} (version {start.version})",
            )
        try:
            self.decks[number] = shuffle(seed, algorithm, deal_context(self.table_id, number))
        except FairnessError as error:
            raise self.fail_at(reveal, COMMITMENT_MISMATCH, str(error)) from None

    def _check_hands(self, start: _Decoded, hands: list[_Decoded], deck: tuple[Card, ...]) -> None:
        dealer = start.payload["dealer"]
        non_dealer, dealer_cards, _ = split_deck(deck)
        expected = {1 - dealer: _wire_cards(non_dealer), dealer: _wire_cards(dealer_cards)}
        for event in hands:
            seat = event.payload["seat"]
            want = expected[seat]
            got = event.payload["cards"]
            if got != want:
                wrong = " ".join(c for c in got if c not in want)
                missing = " ".join(c for c in want if c not in got)
                raise self.fail_at(
                    event,
                    DEALT_CARD_MISMATCH,
                    f"seat {seat} is dealt {wrong} where the deck of deal "
                    f"{start.payload['number']} deals {missing}",
                )

    def _recorded_deck(self, start: int, hands: list[_Decoded]) -> tuple[Card, ...]:
        """The deck of a running deal as far as its events show it: the dealt hands, then the
        turned cards in order, then the cards nobody has seen (in card order)."""
        events = self.events
        started = events[start]
        dealer = started.payload["dealer"]
        by_seat = {e.payload["seat"]: e for e in hands}
        seen: set[Card] = set()
        cards: dict[int, list[Card]] = {}
        for seat in (0, 1):
            event = by_seat.get(seat)
            if event is None:
                raise self.fail_at(started, DEALT_CARD_MISMATCH, f"seat {seat} is dealt no hand")
            cards[seat] = [_CARD_OF[c] for c in event.payload["cards"]]
            if not seen.isdisjoint(cards[seat]):
                raise self.fail_at(event, DEALT_CARD_MISMATCH, "both hands hold the same card")
            seen.update(cards[seat])
        deck: list[Card] = []
        for a, b in zip(cards[1 - dealer], cards[dealer], strict=True):
            deck += (a, b)
        for event in events[start:]:
            if event.type != "card_turned":
                continue
            card = _CARD_OF[event.payload["card"]]
            if card in seen:
                raise self.fail_at(
                    event,
                    TURNED_CARD_MISMATCH,
                    f"{event.payload['card']} was dealt or turned before in this deal",
                )
            seen.add(card)
            deck.append(card)
        deck += [c for c in ALL_CARDS if c not in seen]
        return tuple(deck)
