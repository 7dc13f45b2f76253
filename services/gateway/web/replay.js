// replay.js: a table's public events in words, and folded into positions for the replay
// viewer. Hands are shown once the deal has ended: its revealed seed gives both dealt hands
// (fairness.js), and the events then say which cards left them.

import { deriveDeal } from './fairness.js';

export const PHASE_WORDS = {
  turn: 'turns the first card',
  offered: 'takes or refuses the offered card',
  turned: 'takes or leaves the turned card',
  discard: 'discards',
  force_window: 'forces the declined card or lets it go',
  forced: 'must take the card they declined',
  over: 'the deal is over',
};

/** Return one event as a line of words; `names` are the seats' names. */
export function describe(payload, names) {
  const who = (seat) => names[seat] ?? `seat ${seat}`;
  const p = payload;
  switch (p.type) {
    case 'table_created': {
      const end = [p.deals && `${p.deals} deal(s)`, p.target_score && `to ${p.target_score} points`]
        .filter(Boolean).join(' or ');
      const clock = p.turn_seconds ? `, ${p.turn_seconds} s a turn` : '';
      return `Table opened: ${p.rules.name} rules, ${end}${clock}.`;
    }
    case 'player_joined': return `${p.name}${p.bot ? ' (bot)' : ''} sits at seat ${p.seat}.`;
    case 'player_left': return `${who(p.seat)} leaves the table; seat ${p.seat} is free.`;
    case 'rematch_agreed': return `${who(p.seat)} asks for a rematch.`;
    case 'rematch_opened': return `Rematch at table ${p.next_table_id}.`;
    case 'bot_failed': return `${who(p.seat)}'s ${p.bot} bot failed: ${p.message} (${p.code}).`;
    case 'deal_started': return `Deal ${p.number}: ${who(p.dealer)} deals, stake ${p.stake}; deck committed ${p.commitment.slice(0, 12)}…`;
    case 'hand_dealt': return `${who(p.seat)} is dealt ${p.cards.join(' ')}.`;
    case 'card_turned': return `${who(p.seat)} turns ${p.card}.`;
    case 'card_refused': return `${who(p.seat)} refuses ${p.card}${p.forceable ? ' (it could be forced)' : ''}.`;
    case 'card_left': return `${who(p.seat)} leaves ${p.card} for the opponent${p.forceable ? ' (it could be forced)' : ''}.`;
    case 'force_demanded': return `${who(p.seat)} forces the card.`;
    case 'force_waived': return `${who(p.seat)} lets it go.`;
    case 'card_wasted': return `${p.card} goes to the waste.`;
    case 'meld_made': return `${who(p.seat)} takes ${p.card}${p.hand.length ? ` with ${p.hand.join(' ')}` : ''}: ${p.table.map((m) => m.join('')).join(' ')}.`;
    case 'hand_melded': return `${who(p.seat)} lays down ${p.hand.join(' ')}.`;
    case 'card_discarded': return `${who(p.seat)} discards ${p.card}.`;
    case 'went_out': return `${who(p.seat)} goes out with 11 cards on the table!`;
    case 'game_drawn': return 'The deal is drawn: the stock is empty.';
    case 'resigned': return `${who(p.seat)} resigns.`;
    case 'stakes_settled': return p.winner === null
      ? `No stake paid; the next deal is worth ${p.next_stake}. Score ${p.scores.join(':')}.`
      : `${who(p.winner)} wins ${p.amount}. Score ${p.scores.join(':')}.`;
    case 'deal_revealed': return `Deal ${p.number}'s seed revealed: ${p.seed.slice(0, 12)}…`;
    case 'match_ended': return p.winner === null
      ? `The match ends in a tie, ${p.scores.join(':')}.`
      : `${who(p.winner)} wins the match, ${p.scores.join(':')}.`;
    default: return p.type;
  }
}

/** Return the seats' names from the events so far (`seat 0`, `seat 1` until they join). */
export function namesOf(envelopes) {
  const names = ['seat 0', 'seat 1'];
  for (const { payload: p } of envelopes) {
    if (p.type === 'player_joined') names[p.seat] = p.name;
    if (p.type === 'player_left') names[p.seat] = `seat ${p.seat}`;
  }
  return names;
}

/** Return, by deal number, the hands a revealed seed dealt (non-dealer first in the deck). */
export async function revealedHands(tableId, envelopes) {
  const started = {};
  const hands = {};
  for (const { payload: p } of envelopes) {
    if (p.type === 'deal_started') started[p.number] = p;
    if (p.type === 'deal_revealed' && started[p.number]) {
      const deal = await deriveDeal(p.seed, `${tableId}/${p.number}`, p.algorithm);
      const dealer = started[p.number].dealer;
      hands[p.number] = dealer === 0 ? [deal.dealer, deal.nonDealer] : [deal.nonDealer, deal.dealer];
    }
  }
  return hands;
}

/**
 * Fold the first `upto` envelopes into a position: `{deal, stake, scores, players, centre,
 * centreFrom, stock, waste, phase, names, line}`; `hands` from revealedHands.
 */
export function positionAt(envelopes, upto, hands) {
  const names = namesOf(envelopes);
  const pos = {
    deal: 0, stake: null, scores: [0, 0], centre: null, centreFrom: '', stock: null, waste: 0,
    players: [0, 1].map((seat) => ({ seat, table: [], hand: null, count: 0 })),
    ended: false, line: '', names,
  };
  for (const { payload: p } of envelopes.slice(0, upto)) {
    pos.line = describe(p, names);
    if (p.type === 'deal_started') {
      pos.deal = p.number; pos.stake = p.stake; pos.stock = 20; pos.waste = 0;
      pos.centre = null; pos.ended = false;
      const dealt = hands[p.number];
      pos.players = [0, 1].map((seat) => ({
        seat, table: [], hand: dealt ? [...dealt[seat]] : null, count: 10,
      }));
    } else if (p.type === 'card_turned') {
      pos.stock -= 1; pos.centre = p.card; pos.centreFrom = `turned by ${names[p.seat]}`;
    } else if (p.type === 'card_left') {
      pos.centreFrom = `left by ${names[p.seat]}`;
    } else if (p.type === 'card_refused') {
      pos.centreFrom = `refused by ${names[p.seat]}`;
    } else if (p.type === 'card_wasted') {
      pos.waste += 1; pos.centre = null;
    } else if (p.type === 'meld_made' || p.type === 'hand_melded') {
      const player = pos.players[p.seat];
      player.table = p.table;
      player.count -= p.hand.length;
      if (player.hand) player.hand = player.hand.filter((c) => !p.hand.includes(c));
      if (p.type === 'meld_made') pos.centre = null;
    } else if (p.type === 'card_discarded') {
      const player = pos.players[p.seat];
      player.count -= 1;
      if (player.hand) player.hand = player.hand.filter((c) => c !== p.card);
      pos.centre = p.card; pos.centreFrom = `discarded by ${names[p.seat]}`;
    } else if (p.type === 'stakes_settled') {
      pos.scores = p.scores; pos.ended = true;
    }
  }
  return pos;
}
