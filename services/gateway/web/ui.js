// ui.js: what every screen of the page shares: the client, the notice line, the element
// builder, the seats this browser holds (localStorage) and the card elements. docs/web.md.

import { ConquianClient, ConquianError } from './conquian-client.js';
import { cardName, cardSvg } from './cards.js';

export const client = new ConquianClient();
export const main = document.getElementById('main');
export const conn = document.getElementById('conn');
const notice = document.getElementById('notice');
const GOAL = 11;

// --- small helpers -------------------------------------------------------------------------

/** Build an element: h('button', {class: 'x', onclick}, 'text', child…). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'html') el.innerHTML = value; // only for SVG this module drew
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export function show(message, kind = 'error') {
  notice.textContent = message;
  notice.className = kind === 'error' ? 'notice' : 'notice info';
  notice.hidden = !message;
}

export function rejection(error) {
  if (error instanceof ConquianError) return `${error.message} (${error.code})`;
  return String(error?.message ?? error);
}

export const store = {
  seats() {
    try { return JSON.parse(localStorage.getItem('conquian.seats') || '{}'); } catch { return {}; }
  },
  seat(tableId) { return this.seats()[tableId] ?? null; },
  keep(tableId, seat) {
    const all = this.seats();
    if (seat) all[tableId] = seat; else delete all[tableId];
    localStorage.setItem('conquian.seats', JSON.stringify(all));
  },
  get name() { return localStorage.getItem('conquian.name') || ''; },
  set name(value) { localStorage.setItem('conquian.name', value); },
};

export function card(cardText, attrs = {}) {
  const label = cardText ? cardName(cardText) : 'a face-down card';
  return h(attrs.onclick ? 'button' : 'span', {
    ...attrs,
    class: `card ${attrs.class ?? ''}`.trim(),
    'data-card': cardText ?? null,
    title: cardText ? `${cardText}: ${label}` : null,
    'aria-label': attrs.onclick ? label : null,
    type: attrs.onclick ? 'button' : null,
    html: cardSvg(cardText),
  });
}

export function meldRow(melds) {
  return h('div', { class: 'melds' },
    melds.map((meld) => h('div', { class: 'meld', 'aria-label': meld.join(' ') }, meld.map((c) => card(c)))));
}

export function goal(table) {
  const count = table.reduce((n, meld) => n + meld.length, 0);
  return h('span', { class: 'goal', title: `${count} of the ${GOAL} cards needed to go out` },
    h('meter', { min: 0, max: GOAL, value: count }), `${count}/${GOAL} melded`);
}
