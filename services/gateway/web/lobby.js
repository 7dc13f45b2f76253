// lobby.js: the start screen (create a table against a bot or for a friend), the lobby's
// waiting and running tables, and the invitation screen `#/join/<table>`. docs/web.md.

import { client, h, main, rejection, show, store } from './ui.js';

const PRESETS = ['classic', 'long-runs', 'automatic-forcing', 'no-forcing', 'bicycle', 'carry-stakes', 'flat-stakes'];

export function homeScreen() {
  document.title = 'Conquian';
  const name = h('input', { name: 'name', value: store.name || 'Player', maxlength: 40, required: true });
  const rules = h('select', { name: 'rules' }, PRESETS.map((p) => h('option', { value: p }, p)));
  const deals = h('input', { name: 'deals', type: 'number', min: 1, max: 1000, value: 3 });
  const target = h('input', { name: 'target', type: 'number', min: 1, placeholder: 'none' });
  const clock = h('select', { name: 'clock' },
    h('option', { value: '' }, 'no clock'), [15, 30, 60, 120, 300].map((s) => h('option', { value: s, selected: s === 60 }, `${s} s a turn`)));
  const opponent = h('select', { name: 'opponent' },
    h('option', { value: 'greedy' }, 'the greedy bot'), h('option', { value: 'random' }, 'the random bot'),
    h('option', { value: 'friend' }, 'a friend (invitation link)'));
  const form = h('form', { class: 'panel', id: 'create-form', onsubmit: (e) => { e.preventDefault(); create(); } },
    h('h2', {}, 'New table'),
    h('div', { class: 'form-grid' },
      h('label', {}, 'Your name', name), h('label', {}, 'Rules', rules),
      h('label', {}, 'Deals', deals), h('label', {}, 'Target score', target),
      h('label', {}, 'Turn clock', clock), h('label', {}, 'Play against', opponent)),
    h('p', { class: 'row' }, h('button', { type: 'submit', id: 'create' }, 'Create table')));

  async function create() {
    store.name = name.value.trim();
    const options = {
      rules: rules.value,
      deals: deals.value ? Number(deals.value) : null,
      target_score: target.value ? Number(target.value) : null,
      turn_seconds: clock.value ? Number(clock.value) : null,
    };
    if (opponent.value !== 'friend') options.bots = { 1: opponent.value };
    try {
      const created = await client.createTable(options);
      const joined = await client.join(created.table_id, { name: store.name, seat: 0 });
      store.keep(created.table_id, { token: joined.token, seat: joined.seat, name: store.name });
      location.hash = `#/t/${created.table_id}`;
    } catch (error) {
      show(rejection(error));
    }
  }

  const openId = h('input', { name: 'table', placeholder: 't-…', 'aria-label': 'table id' });
  const open = h('form', { class: 'panel', onsubmit: (e) => e.preventDefault() },
    h('h2', {}, 'Open a table by its id'),
    h('div', { class: 'row' }, openId,
      h('button', { type: 'button', class: 'secondary', onclick: () => { location.hash = `#/t/${openId.value.trim()}`; } }, 'Watch'),
      h('button', { type: 'button', class: 'secondary', onclick: () => { location.hash = `#/join/${openId.value.trim()}`; } }, 'Join'),
      h('button', { type: 'button', class: 'secondary', onclick: () => { location.hash = `#/replay/${openId.value.trim()}`; } }, 'Replay')));
  const waiting = h('section', { class: 'panel', id: 'lobby-waiting' });
  const running = h('section', { class: 'panel', id: 'lobby-running' });
  main.replaceChildren(form, waiting, running, open, mine());
  lobby(waiting, 'waiting', 'Tables waiting for a player');
  lobby(running, 'running', 'Tables being played (watch)');
  return () => {};
}

function mine() {
  const seats = Object.entries(store.seats());
  if (!seats.length) return '';
  return h('section', { class: 'panel' }, h('h2', {}, 'Your tables in this browser'),
    h('ul', { class: 'lobby-list' }, seats.slice(-10).reverse().map(([id, s]) =>
      h('li', {}, h('a', { href: `#/t/${id}` }, id), h('span', { class: 'muted' }, `seat ${s.seat} as ${s.name}`)))));
}

async function lobby(section, status, title, cursor = null) {
  section.replaceChildren(h('h2', {}, title), h('p', { class: 'muted' }, 'loading…'));
  let page;
  try {
    page = await client.listTables({ status, limit: 20, cursor });
  } catch (error) {
    const text = error.code === 'http/not_found' || error.code === 'http/method_not_allowed'
      ? 'This server has no lobby list yet: open a table by its id or an invitation link.'
      : rejection(error);
    section.replaceChildren(h('h2', {}, title), h('p', { class: 'muted' }, text));
    return;
  }
  const items = page.tables.map((t) => {
    const seats = t.seats.map((s) => (s.taken ? `${s.name ?? '?'}${s.bot ? ' (bot)' : ''}` : 'free')).join(' vs ');
    const length = [t.deals && `${t.deals} deals`, t.target_score && `to ${t.target_score}`].filter(Boolean).join(', ');
    const go = status === 'waiting'
      ? h('button', { onclick: () => { location.hash = `#/join/${t.table_id}`; } }, 'Join')
      : h('button', { class: 'secondary', onclick: () => { location.hash = `#/t/${t.table_id}`; } }, 'Watch');
    return h('li', { 'data-table': t.table_id }, go, h('span', { class: 'mono' }, t.table_id),
      h('span', {}, seats), h('span', { class: 'muted' }, `${t.rules}, ${length}${t.turn_seconds ? `, ${t.turn_seconds} s` : ''}`));
  });
  section.replaceChildren(h('h2', {}, title,
    ' ', h('button', { class: 'secondary', onclick: () => lobby(section, status, title) }, 'Refresh')),
  items.length ? h('ul', { class: 'lobby-list' }, items) : h('p', { class: 'muted' }, 'None right now.'),
  page.next_cursor ? h('button', { class: 'secondary', onclick: () => lobby(section, status, title, page.next_cursor) }, 'More') : '');
}

export function joinScreen(tableId) {
  document.title = `Join ${tableId} · Conquian`;
  const held = store.seat(tableId);
  if (held) { location.hash = `#/t/${tableId}`; return; }
  const name = h('input', { name: 'name', value: store.name || 'Player', maxlength: 40, 'aria-label': 'your name' });
  const form = h('form', { class: 'panel', id: 'join-form', onsubmit: async (e) => {
    e.preventDefault();
    store.name = name.value.trim();
    try {
      const joined = await client.join(tableId, { name: store.name });
      store.keep(tableId, { token: joined.token, seat: joined.seat, name: store.name });
      location.hash = `#/t/${tableId}`;
    } catch (error) {
      show(rejection(error));
    }
  } },
  h('h2', {}, `You are invited to table ${tableId}`),
  h('div', { class: 'row' }, h('label', {}, 'Your name ', name), h('button', { type: 'submit', id: 'join' }, 'Take the seat')),
  h('p', {}, h('a', { href: `#/t/${tableId}` }, 'or just watch')));
  main.replaceChildren(form);
  name.focus();
}
