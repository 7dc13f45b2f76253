// replay-view.js: the replay viewer `#/replay/<table>`: a table's public events, step by step,
// the hands of every ended deal shown (replay.js folds them). docs/web.md.

import { card, client, goal, h, main, meldRow } from './ui.js';
import { sortHand } from './cards.js';
import { positionAt, revealedHands } from './replay.js';

export async function replayScreen(tableId, stale = () => false) {
  document.title = `Replay ${tableId} · Conquian`;
  main.replaceChildren(h('p', { class: 'muted' }, `loading the events of ${tableId}…`));
  const events = await client.events(tableId);
  const hands = await revealedHands(tableId, events);
  if (stale()) return () => {}; // another screen was asked for meanwhile
  let at = events.length;
  const draw = () => {
    const pos = positionAt(events, at, hands);
    const seatBox = (seat) => {
      const p = pos.players[seat];
      return h('section', { class: 'seat', id: `replay-seat-${seat}` },
        h('div', { class: 'seat-head' }, h('strong', {}, pos.names[seat]), goal(p.table),
          p.hand ? '' : h('span', { class: 'muted' }, 'hand hidden until the deal ends')),
        p.table.length ? meldRow(p.table) : h('span', { class: 'muted' }, 'no melds'),
        h('div', { class: 'cards hand' }, p.hand ? sortHand(p.hand).map((c) => card(c)) : Array.from({ length: p.count }, () => card(null))));
    };
    const root = h('div', { id: 'replay', 'data-step': at, 'data-steps': events.length },
      h('div', { class: 'panel replay-controls' },
        h('strong', {}, `Replay of ${tableId}`),
        h('button', { 'data-key': 'first', onclick: () => { at = 0; draw(); } }, 'start'),
        h('button', { id: 'back', 'data-key': 'back', 'aria-label': 'step back', disabled: at === 0, onclick: () => { at -= 1; draw(); } }, '◀ back'),
        h('span', { id: 'step' }, `event ${at} of ${events.length}`),
        h('button', { id: 'forward', 'data-key': 'forward', 'aria-label': 'step forward', disabled: at === events.length, onclick: () => { at += 1; draw(); } }, 'forward ▶'),
        h('button', { 'data-key': 'last', onclick: () => { at = events.length; draw(); } }, 'end'),
        h('a', { href: `#/t/${tableId}` }, 'back to the table')),
      h('div', { class: 'bar panel' }, h('span', { class: 'pill', id: 'replay-line' }, pos.line || 'The table before its first event.'),
        h('span', {}, `deal ${pos.deal || '-'}, stake ${pos.stake ?? '-'}`), h('span', {}, `score ${pos.scores.join(':')}`)),
      seatBox(1),
      h('section', { class: 'centre panel' },
        h('div', { class: 'pile' }, card(null), `stock ${pos.stock ?? '-'}`),
        h('div', { class: 'pile' }, pos.centre ? card(pos.centre) : h('div', { class: 'empty-slot' }), pos.centre ? pos.centreFrom : 'no centre card'),
        h('div', { class: 'pile' }, `waste ${pos.waste}`)),
      seatBox(0));
    const focusKey = document.activeElement?.getAttribute?.('data-key');
    main.replaceChildren(root);
    if (focusKey) document.querySelector(`[data-key="${focusKey}"]`)?.focus();
  };
  const keys = (e) => {
    if (e.key === 'ArrowRight' && at < events.length) { at += 1; draw(); }
    if (e.key === 'ArrowLeft' && at > 0) { at -= 1; draw(); }
  };
  document.addEventListener('keydown', keys);
  draw();
  return () => document.removeEventListener('keydown', keys);
}
