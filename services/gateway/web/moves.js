// moves.js: the seat's moves (only what legal_actions lists; a take as hand cards, then one of
// the arrangements the server lists) and the deck panel with Verify. docs/web.md.

import { actionCommand } from './conquian-client.js';
import { verifyDeal } from './fairness.js';
import { client, h, rejection, show, store } from './ui.js';

const SIMPLE = {
  turn: ['Turn the top card', 't'], refuse: ['Refuse it', 'r'], leave: ['Leave it for the opponent', 'l'],
  force: ['Force it on them', 'f'], waive: ['Let it go', 'w'],
};

export function actionPanel(t) {
  const v = t.view;
  const deal = v.deal;
  const legal = v.legal_actions;
  const panel = h('section', { class: 'panel', id: 'actions', 'data-legal': JSON.stringify(legal), 'aria-label': 'your moves' });
  const buttons = h('div', { class: 'actions' });
  for (const [verb, [label, key]] of Object.entries(SIMPLE)) {
    if (legal.includes(verb)) {
      buttons.append(h('button', { 'data-action': verb, 'data-key': verb, 'aria-keyshortcuts': key, disabled: t.busy, onclick: () => t.act({ type: verb }) }, label));
    }
  }
  const discards = legal.filter((a) => a.startsWith('discard '));
  if (discards.length) {
    const chosen = [...t.selected];
    const ok = chosen.length === 1 && discards.includes(`discard ${chosen[0]}`);
    buttons.append(h('button', { 'data-action': 'discard', 'data-key': 'discard', 'aria-keyshortcuts': 'd', disabled: !ok || t.busy, onclick: () => t.act({ type: 'discard', card: chosen[0] }) },
      ok ? `Discard ${chosen[0]}` : 'Discard (select one card)'));
  }
  if (legal.includes('next_deal')) { // offered to both seated players between deals
    buttons.append(h('button', { 'data-action': 'next_deal', 'data-key': 'next', 'aria-keyshortcuts': 'n', disabled: t.busy, onclick: () => t.act({ type: 'next_deal' }) }, 'Next deal'));
  }
  if (!v.match_over && deal) {
    buttons.append(h('button', {
      class: 'danger', 'data-action': 'resign', 'data-key': 'resign', disabled: t.busy,
      onclick: () => { if (t.resignArmed) { t.resignArmed = false; t.act({ type: 'resign' }, () => client.resign(t.id, t.token)); } else { t.resignArmed = true; t.redraw(); } },
    }, t.resignArmed ? 'Really resign the match?' : 'Resign'));
  }
  if (!deal && !v.match_over) {
    buttons.append(h('button', { class: 'secondary', 'data-action': 'leave_table', 'data-key': 'leave-table', onclick: () => leaveTable(t) }, 'Leave the table'));
  }
  panel.append(buttons);
  const takes = legal.filter((a) => a.startsWith('take') || a.startsWith('meld '));
  if (takes.length) panel.append(takePicker(t, takes));
  if (!buttons.childElementCount && !takes.length) panel.hidden = true; // nothing to do now
  return panel;
}

async function leaveTable(t) {
  try {
    await client.leaveTable(t.id, t.token);
    store.keep(t.id, null);
    location.hash = '#/';
  } catch (error) {
    show(rejection(error));
  }
}

/** Pick hand cards, then one of the arrangements the server lists for exactly those cards. */
function takePicker(t, takes) {
  const parsed = takes.map((text) => ({ text, ...actionCommand(text) }));
  const chosen = [...t.selected].sort().join(' ');
  const combos = [...new Map(parsed.map((p) => [[...p.hand].sort().join(' '), p.hand])).values()];
  const matching = parsed.filter((p) => [...p.hand].sort().join(' ') === chosen);
  const box = h('div', { class: 'takes', id: 'takes' },
    h('div', { class: 'row' }, h('span', {}, 'Take or lay down, with: '),
      combos.map((hand) => h('button', {
        class: 'secondary', 'data-combo': hand.join(' '), 'data-key': `combo-${hand.join('-')}`,
        onclick: () => { t.selected = new Set(hand); t.redraw(); },
      }, hand.length ? hand.join(' ') : 'no hand card'))));
  if (matching.length) {
    box.append(h('span', { class: 'muted' }, `${matching.length} arrangement(s) for ${chosen || 'no hand card'}:`));
    for (const p of matching) {
      const { text, ...fields } = p;
      box.append(h('button', {
        'data-take': text, 'data-key': `take-${text}`, disabled: t.busy,
        'aria-label': `${p.type === 'take' ? 'take' : 'lay down'}: your table becomes ${(p.table ?? []).map((m) => m.join(' ')).join(', ')}`,
        onclick: () => t.act(fields),
      }, p.type === 'take' ? 'Take → ' : 'Lay down → ', h('span', { class: 'take-table' }, (p.table ?? []).map((m) => h('span', {}, m.join(''))))));
    }
  } else {
    box.append(h('span', { class: 'muted' }, 'Select hand cards (or a button above) to see the ways to take.'));
  }
  return box;
}

export function fairnessPanel(t) {
  const deals = {};
  const turned = {};
  const dealt = {};
  let current = 0;
  for (const { payload: p } of t.events) {
    if (p.type === 'deal_started') { deals[p.number] = { ...p, seed: null }; current = p.number; turned[current] = []; }
    if (p.type === 'hand_dealt' && current) dealt[current] = { [p.seat]: p.cards };
    if (p.type === 'card_turned' && current) turned[current].push(p.card);
    if (p.type === 'deal_revealed' && deals[p.number]) deals[p.number].seed = p.seed;
  }
  const rows = Object.values(deals).reverse().slice(0, 5).map((d) => {
    const result = t.verify[d.number];
    return h('li', { 'data-deal': d.number },
      h('div', {}, `Deal ${d.number}: commitment `, h('span', { class: 'mono commitment' }, d.commitment)),
      d.seed
        ? h('div', {}, 'seed ', h('span', { class: 'mono seed' }, d.seed), ' ',
          h('button', { class: 'secondary', 'data-verify': d.number, 'data-key': `verify-${d.number}`, onclick: async () => {
            try {
              t.verify[d.number] = await verifyDeal({
                tableId: t.id, number: d.number, dealer: d.dealer, commitment: d.commitment,
                seed: d.seed, algorithm: d.algorithm, hands: dealt[d.number] ?? {}, turned: turned[d.number],
              });
            } catch (error) {
              t.verify[d.number] = { ok: false, checks: [{ what: String(error.message ?? error), ok: false }] };
            }
            t.redraw();
          } }, 'Verify'))
        : h('div', { class: 'muted' }, 'the seed is revealed when the deal ends'),
      result ? h('div', { class: result.ok ? 'ok' : 'bad', 'data-verified': result.ok ? 'ok' : 'failed' },
        result.ok ? '✔ the deck was fixed before the deal: ' : '✘ verification FAILED: ',
        h('ul', { class: 'checks' }, result.checks.map((c) => h('li', { class: c.ok ? 'ok' : 'bad' }, `${c.ok ? '✔' : '✘'} ${c.what}`)))) : '');
  });
  return h('details', { class: 'panel', id: 'fairness', open: rows.length ? true : null },
    h('summary', {}, 'Fair deck: commitment and revealed seed'),
    rows.length ? h('ul', { class: 'lobby-list' }, rows) : h('p', { class: 'muted' }, 'No deal yet.'));
}

