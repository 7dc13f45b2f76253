// app.js: the Conquian page. Screens by the URL's hash: `#/` start and lobby, `#/join/<id>`
// an invitation, `#/t/<id>` a table (as its seat when this browser holds the seat's token,
// else as a spectator), `#/replay/<id>` the replay viewer. docs/web.md describes the page.

import { ConquianClient, ConquianError, actionCommand } from './conquian-client.js';
import { cardName, cardSvg, handMelds, sortHand } from './cards.js';
import { verifyDeal } from './fairness.js';
import { PHASE_WORDS, describe, namesOf, positionAt, revealedHands } from './replay.js';

const client = new ConquianClient();
const main = document.getElementById('main');
const notice = document.getElementById('notice');
const conn = document.getElementById('conn');
const PRESETS = ['classic', 'long-runs', 'automatic-forcing', 'no-forcing', 'bicycle', 'carry-stakes', 'flat-stakes'];
const MELD_COLORS = ['#7fe0a6', '#8fc7ff', '#f7a8d8', '#ffd27f'];
const GOAL = 11;

// --- small helpers -------------------------------------------------------------------------

/** Build an element: h('button', {class: 'x', onclick}, 'text', child…). */
function h(tag, attrs = {}, ...children) {
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

function show(message, kind = 'error') {
  notice.textContent = message;
  notice.className = kind === 'error' ? 'notice' : 'notice info';
  notice.hidden = !message;
}

function rejection(error) {
  if (error instanceof ConquianError) return `${error.message} (${error.code})`;
  return String(error?.message ?? error);
}

const store = {
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

function card(cardText, attrs = {}) {
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

function meldRow(melds) {
  return h('div', { class: 'melds' },
    melds.map((meld) => h('div', { class: 'meld', 'aria-label': meld.join(' ') }, meld.map((c) => card(c)))));
}

function goal(table) {
  const count = table.reduce((n, meld) => n + meld.length, 0);
  return h('span', { class: 'goal', title: `${count} of the ${GOAL} cards needed to go out` },
    h('meter', { min: 0, max: GOAL, value: count }), `${count}/${GOAL} melded`);
}

// --- routing -------------------------------------------------------------------------------

let screen = null; // the current screen's cleanup

async function route() {
  screen?.();
  screen = null;
  show('');
  conn.textContent = '';
  const [, kind, id] = location.hash.replace(/^#\/?/, '/').split('/');
  try {
    if (kind === 't' && id) screen = await tableScreen(decodeURIComponent(id));
    else if (kind === 'join' && id) joinScreen(decodeURIComponent(id));
    else if (kind === 'replay' && id) screen = await replayScreen(decodeURIComponent(id));
    else screen = homeScreen();
  } catch (error) {
    show(rejection(error));
  }
}

window.addEventListener('hashchange', route);

// --- start and lobby -----------------------------------------------------------------------

function homeScreen() {
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

function joinScreen(tableId) {
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

// --- the table -----------------------------------------------------------------------------

async function retrying(read) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await read();
    } catch (error) {
      if (!(error instanceof ConquianError) || error.code !== 'view/not_ready' || attempt > 20) throw error;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

async function tableScreen(tableId) {
  document.title = `${tableId} · Conquian`;
  let held = store.seat(tableId);
  const t = {
    id: tableId, token: held?.token ?? null, seat: held?.seat ?? null,
    view: null, pub: null, events: [], selected: new Set(), busy: false, lastTime: 0, verify: {},
    resignArmed: false,
  };
  main.replaceChildren(h('p', { class: 'muted' }, `opening ${tableId}…`));
  try {
    t.pub = await retrying(() => client.publicView(tableId));
    t.events = await client.events(tableId, { token: t.token });
  } catch (error) {
    if (error.code === 'seat/bad_token') { // the seat was left or the token is stale: watch
      store.keep(tableId, null);
      held = null; t.token = null; t.seat = null;
      t.events = await client.events(tableId);
      show('This browser no longer holds a seat at this table; you are watching.', 'info');
    } else {
      throw error;
    }
  }
  for (const e of t.events) t.lastTime = Math.max(t.lastTime, e.time);
  t.view = await retrying(() => client.view(tableId, { token: t.token }));
  const after = t.events.length ? t.events[t.events.length - 1].version : 0;

  let refreshing = null;
  const refreshPublic = () => {
    if (refreshing) return;
    refreshing = client.publicView(tableId).then((pub) => {
      if (!t.pub || pub.version >= t.pub.version) t.pub = pub;
      if (pub.updated_at) t.lastTime = Math.max(t.lastTime, pub.updated_at);
      if (t.rematchAsked && pub.rematch?.table_id) rematch(t); // the other seat agreed: go
      render(t);
    }).catch(() => {}).finally(() => { refreshing = null; });
  };
  const live = client.live(tableId, {
    token: t.token,
    after,
    onEvent: (e) => {
      t.events.push(e);
      t.lastTime = Math.max(t.lastTime, e.time);
      if (PUBLIC_CHANGES.has(e.payload.type)) refreshPublic();
      schedule(t);
    },
    onView: (view) => {
      if (!t.view || view.version >= t.view.version) t.view = view;
      refreshPublic();
      schedule(t);
    },
    onStatus: (s) => { conn.textContent = s === 'live' ? '● live' : `○ ${s}…`; },
    onFatal: (code, message) => { show(`${message} (${code})`); },
  });
  t.live = live;
  window.conquianLive = live; // for the browser tests: drop the socket as a network failure
  render(t);
  const ticker = setInterval(() => tick(t), 250);
  const keys = (e) => onKey(t, e);
  document.addEventListener('keydown', keys);
  return () => { live.close(); clearInterval(ticker); document.removeEventListener('keydown', keys); };
}

const PUBLIC_CHANGES = new Set(['player_joined', 'player_left', 'match_ended', 'rematch_agreed', 'rematch_opened']);

let pending = false;
function schedule(t) {
  if (pending) return;
  pending = true;
  setTimeout(() => { pending = false; render(t); }, 16); // not rAF: it pauses in hidden tabs
}

function names(t) {
  const fromEvents = namesOf(t.events);
  return [0, 1].map((s) => t.pub?.seats?.[s]?.name ?? fromEvents[s]);
}

function deadline(t) {
  const v = t.view;
  const seconds = t.pub?.turn_seconds;
  if (!seconds || !v || v.match_over) return null;
  const deal = v.deal;
  const seats = t.pub?.seats ?? [];
  const between = !deal || deal.phase === 'over';
  if (between ? !seats.some((s) => s && !s.bot && s.name) : seats[deal.to_act]?.bot) return null;
  if (!deal && seats.some((s) => !s?.name)) return null; // still waiting for a player
  return t.lastTime + seconds * 1000;
}

function tick(t) {
  const el = document.getElementById('clock');
  if (!el) return;
  const due = deadline(t);
  if (due === null) { el.textContent = ''; return; }
  const left = Math.max(0, Math.ceil((due - Date.now()) / 1000));
  el.textContent = `clock ${Math.floor(left / 60)}:${String(left % 60).padStart(2, '0')}`;
  el.classList.toggle('low', left <= 10);
}

async function act(t, fields, send = () => client.command(t.id, t.token, fields)) {
  if (t.busy) return;
  t.busy = true;
  show('');
  try {
    const answer = await send();
    if (answer.pending) show('The service has queued the move; it will show when it is played.', 'info');
    t.selected.clear();
    const view = await client.view(t.id, { token: t.token, minVersion: answer.version ?? null });
    if (view.version >= t.view.version) t.view = view; // the socket may have brought a newer one
  } catch (error) {
    show(rejection(error));
  } finally {
    t.busy = false;
    render(t);
  }
}

function centreSource(t) {
  for (let k = t.events.length - 1; k >= 0; k -= 1) {
    const p = t.events[k].payload;
    const who = names(t)[p.seat];
    if (p.type === 'card_turned') return `turned by ${who}`;
    if (p.type === 'card_discarded') return `discarded by ${who}`;
    if (p.type === 'card_left') return `left by ${who}`;
    if (p.type === 'card_refused') return `refused by ${who}`;
    if (p.type === 'deal_started') return '';
  }
  return '';
}

function render(t) {
  const focusKey = document.activeElement?.getAttribute?.('data-key');
  const v = t.view;
  const deal = v.deal;
  const seatNames = names(t);
  const me = t.seat;
  const status = t.pub?.status ?? (v.match_over ? 'over' : deal ? 'playing' : 'open');
  const root = h('div', {
    id: 'table', 'data-table': t.id, 'data-version': v.version, 'data-seat': me ?? 'spectator',
    'data-phase': deal?.phase ?? 'none', 'data-to-act': deal?.to_act ?? '', 'data-status': status,
    'data-match-over': v.match_over ? 'yes' : 'no',
  });
  root.append(headBar(t, status, seatNames));
  root.append(infoBar(t, seatNames));
  const bottom = me ?? 0;
  const top = 1 - bottom;
  root.append(seatArea(t, top, seatNames, false));
  root.append(centreArea(t));
  root.append(seatArea(t, bottom, seatNames, me !== null));
  if (me !== null) root.append(actionPanel(t));
  root.append(fairnessPanel(t));
  root.append(h('details', { class: 'panel' }, h('summary', {}, `Events (${t.events.length})`),
    h('ol', { class: 'log', id: 'log' }, t.events.slice(-200).map((e) => h('li', { value: e.version }, describe(e.payload, seatNames))))));
  main.replaceChildren(root);
  tick(t);
  if (focusKey) document.querySelector(`[data-key="${CSS.escape(focusKey)}"]`)?.focus();
}

function headBar(t, status, seatNames) {
  const v = t.view;
  const parts = [h('span', { class: 'mono' }, t.id), h('span', { class: 'pill', id: 'status' }, status)];
  parts.push(h('span', {}, t.seat === null ? 'watching' : `you are ${seatNames[t.seat]} (seat ${t.seat})`));
  const seats = t.pub?.seats ?? [];
  const free = seats.length && seats.some((s) => !s?.name);
  if (t.seat !== null && free) {
    const link = `${location.origin}${location.pathname}#/join/${t.id}`;
    parts.push(h('span', { class: 'row' }, 'Invite a player: ',
      h('input', { id: 'invite-link', readonly: true, value: link, size: 28, 'aria-label': 'invitation link' }),
      h('button', { class: 'secondary', 'data-key': 'copy', onclick: () => navigator.clipboard?.writeText(link).then(() => show('Link copied.', 'info'), () => {}) }, 'Copy')));
  }
  if (status === 'over') parts.push(h('a', { href: `#/replay/${t.id}` }, 'Replay this table'));
  if (v.match_over && t.seat !== null) {
    parts.push(h('button', { class: 'secondary', id: 'rematch', 'data-key': 'rematch', onclick: () => rematch(t) }, 'Rematch'));
  }
  const agreed = t.pub?.rematch?.agreed ?? [];
  if (agreed.length) {
    const next = t.pub.rematch.table_id;
    parts.push(h('span', { id: 'rematch-state' }, `rematch asked by ${agreed.map((s) => seatNames[s]).join(' and ')}`,
      next && t.seat === null ? h('a', { href: `#/t/${next}` }, ` · watch it`) : ''));
  }
  return h('div', { class: 'bar panel' }, parts);
}

async function rematch(t) {
  t.rematchAsked = true;
  try {
    const answer = await client.rematch(t.id, t.token);
    const r = answer.rematch;
    if (r.token && r.table_id) {
      store.keep(r.table_id, { token: r.token, seat: r.seat, name: store.name });
      location.hash = `#/t/${r.table_id}`;
    } else {
      show('Rematch asked; waiting for the other player to agree (ask again then).', 'info');
    }
  } catch (error) {
    show(rejection(error));
  }
}

function infoBar(t, seatNames) {
  const v = t.view;
  const deal = v.deal;
  const items = [
    h('span', { class: 'pill', id: 'score' }, `score ${seatNames[0]} ${v.scores[0]} : ${v.scores[1]} ${seatNames[1]}`),
    h('span', {}, `deals ${v.deals_played}${v.deals ? `/${v.deals}` : ''}${v.target_score ? `, first to ${v.target_score}` : ''}`),
    h('span', { id: 'stakes' }, deal ? `stake ${deal.stake}, next ${v.next_stake}` : `first stake ${v.next_stake}`),
    h('span', { class: 'muted' }, `${v.rules.name} rules`),
  ];
  let turn = '';
  if (v.match_over) {
    turn = v.winner === null ? 'Match over: a tie.' : `Match over: ${seatNames[v.winner]} wins.`;
  } else if (!deal) {
    turn = 'Waiting for both seats to be taken.';
  } else if (deal.phase === 'over') {
    const o = deal.outcome;
    const how = o.termination === 'draw' ? 'drawn' : `won by ${seatNames[o.winner]}${o.termination === 'resign' ? ' (resignation)' : ''}`;
    turn = `Deal ${deal.number} ${how}. Next deal when a player asks.`;
  } else {
    const mine = deal.to_act === t.seat;
    turn = `${mine ? 'Your turn' : `${seatNames[deal.to_act]}'s turn`}: ${mine ? PHASE_WORDS[deal.phase].replace(/^turns/, 'turn').replace(/^takes or (\w+)s/, 'take or $1').replace(/^discards/, 'discard').replace(/^forces/, 'force').replace(/^must/, 'you must').replace(/they declined/, 'you declined') : PHASE_WORDS[deal.phase]}`;
  }
  items.unshift(h('span', { class: `pill ${deal && deal.to_act === t.seat && deal.phase !== 'over' ? 'turn' : ''}`, id: 'turn', 'data-phase': deal?.phase ?? '' }, turn));
  items.push(h('span', { class: 'clock', id: 'clock', 'aria-live': 'off' }));
  return h('div', { class: 'bar panel' }, items);
}

function seatArea(t, seat, seatNames, mine) {
  const v = t.view;
  const player = v.deal?.players[seat];
  const acting = v.deal && v.deal.phase !== 'over' && v.deal.to_act === seat;
  const bot = t.pub?.seats?.[seat]?.bot;
  const head = h('div', { class: 'seat-head' },
    h('strong', {}, seatNames[seat]), bot ? h('span', { class: 'muted' }, `(${bot} bot)`) : '',
    h('span', { class: 'muted' }, `seat ${seat}`), acting ? h('span', { class: 'pill turn' }, 'to act') : '',
    player ? goal(player.table) : '');
  const area = h('section', { class: `seat ${acting ? 'acting' : ''}`, id: `seat-${seat}`, 'aria-label': `${seatNames[seat]}'s side` }, head);
  if (!player) return area;
  area.append(h('div', { class: 'table-melds', id: `melds-${seat}` }, player.table.length ? meldRow(player.table) : h('span', { class: 'muted' }, 'no melds yet')));
  if (player.hand) {
    const hand = sortHand(player.hand);
    const melds = handMelds(hand, v.rules.max_run_length ?? null);
    const colour = {};
    melds.forEach((meld, k) => meld.forEach((c) => { colour[c] ??= MELD_COLORS[k % MELD_COLORS.length]; }));
    const cards = hand.map((c) => {
      const attrs = {
        class: colour[c] ? 'in-meld' : '',
        style: colour[c] ? `--meld-color: ${colour[c]}` : null,
      };
      if (mine) {
        Object.assign(attrs, {
          'aria-pressed': t.selected.has(c) ? 'true' : 'false', 'data-key': `card-${c}`,
          onclick: () => { if (t.selected.has(c)) t.selected.delete(c); else t.selected.add(c); render(t); },
        });
      }
      return card(c, attrs);
    });
    area.append(h('div', { class: 'hand', id: `hand-${seat}` },
      h('div', { class: 'cards' }, cards),
      melds.length ? h('p', { class: 'muted' }, `could meld: ${melds.map((m) => m.join(' ')).join(' · ')}`) : ''));
  } else {
    area.append(h('div', { class: 'hand', id: `hand-${seat}` },
      h('div', { class: 'cards', 'aria-label': `${player.hand_count} cards in hand` },
        Array.from({ length: player.hand_count }, () => card(null)))));
  }
  return area;
}

function centreArea(t) {
  const deal = t.view.deal;
  if (!deal) return h('section', { class: 'centre panel' }, h('span', { class: 'muted' }, 'No deal yet.'));
  const source = deal.centre ? centreSource(t) : '';
  const declined = deal.declined ? ` (${deal.declined})` : '';
  return h('section', { class: 'centre panel', id: 'centre' },
    h('div', { class: 'pile' }, deal.stock_count ? card(null) : h('div', { class: 'empty-slot' }), h('span', { id: 'stock-count' }, `stock ${deal.stock_count}`)),
    h('div', { class: 'pile' }, deal.centre ? card(deal.centre) : h('div', { class: 'empty-slot' }),
      h('span', { id: 'centre-source' }, deal.centre ? `${source}${declined}` : 'no centre card')),
    h('div', { class: 'pile' }, deal.waste_count ? card(null) : h('div', { class: 'empty-slot' }), h('span', { id: 'waste-count' }, `waste ${deal.waste_count}`)));
}

const SIMPLE = {
  turn: ['Turn the top card', 't'], refuse: ['Refuse it', 'r'], leave: ['Leave it for the opponent', 'l'],
  force: ['Force it on them', 'f'], waive: ['Let it go', 'w'],
};

function actionPanel(t) {
  const v = t.view;
  const deal = v.deal;
  const legal = v.legal_actions;
  const panel = h('section', { class: 'panel', id: 'actions', 'data-legal': JSON.stringify(legal), 'aria-label': 'your moves' });
  const buttons = h('div', { class: 'actions' });
  for (const [verb, [label, key]] of Object.entries(SIMPLE)) {
    if (legal.includes(verb)) {
      buttons.append(h('button', { 'data-action': verb, 'data-key': verb, 'aria-keyshortcuts': key, disabled: t.busy, onclick: () => act(t, { type: verb }) }, label));
    }
  }
  const discards = legal.filter((a) => a.startsWith('discard '));
  if (discards.length) {
    const chosen = [...t.selected];
    const ok = chosen.length === 1 && discards.includes(`discard ${chosen[0]}`);
    buttons.append(h('button', { 'data-action': 'discard', 'data-key': 'discard', 'aria-keyshortcuts': 'd', disabled: !ok || t.busy, onclick: () => act(t, { type: 'discard', card: chosen[0] }) },
      ok ? `Discard ${chosen[0]}` : 'Discard (select one card)'));
  }
  if (deal && deal.phase === 'over' && !v.match_over) {
    buttons.append(h('button', { 'data-action': 'next_deal', 'data-key': 'next', 'aria-keyshortcuts': 'n', disabled: t.busy, onclick: () => act(t, { type: 'next_deal' }) }, 'Next deal'));
  }
  if (!v.match_over && deal) {
    buttons.append(h('button', {
      class: 'danger', 'data-action': 'resign', 'data-key': 'resign', disabled: t.busy,
      onclick: () => { if (t.resignArmed) { t.resignArmed = false; act(t, { type: 'resign' }, () => client.resign(t.id, t.token)); } else { t.resignArmed = true; render(t); } },
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
        onclick: () => { t.selected = new Set(hand); render(t); },
      }, hand.length ? hand.join(' ') : 'no hand card'))));
  if (matching.length) {
    box.append(h('span', { class: 'muted' }, `${matching.length} arrangement(s) for ${chosen || 'no hand card'}:`));
    for (const p of matching) {
      const { text, ...fields } = p;
      box.append(h('button', {
        'data-take': text, 'data-key': `take-${text}`, disabled: t.busy,
        'aria-label': `${p.type === 'take' ? 'take' : 'lay down'}: your table becomes ${(p.table ?? []).map((m) => m.join(' ')).join(', ')}`,
        onclick: () => act(t, fields),
      }, p.type === 'take' ? 'Take → ' : 'Lay down → ', h('span', { class: 'take-table' }, (p.table ?? []).map((m) => h('span', {}, m.join(''))))));
    }
  } else {
    box.append(h('span', { class: 'muted' }, 'Select hand cards (or a button above) to see the ways to take.'));
  }
  return box;
}

function fairnessPanel(t) {
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
            render(t);
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

function onKey(t, e) {
  if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || e.altKey) return;
  const byKey = { t: 'turn', r: 'refuse', l: 'leave', f: 'force', w: 'waive', d: 'discard', n: 'next_deal' };
  const action = byKey[e.key];
  if (!action) return;
  const button = document.querySelector(`#actions [data-action="${action}"]`);
  if (button && !button.disabled) { e.preventDefault(); button.click(); }
}

// --- the replay viewer ---------------------------------------------------------------------

async function replayScreen(tableId) {
  document.title = `Replay ${tableId} · Conquian`;
  main.replaceChildren(h('p', { class: 'muted' }, `loading the events of ${tableId}…`));
  const events = await client.events(tableId);
  const hands = await revealedHands(tableId, events);
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

route();
