// table.js: the table screen `#/t/<table>`: a seat's page when this browser holds the seat's
// token, else a spectator's; live over the socket, resumed after a reload. docs/web.md.

import { ConquianError } from './conquian-client.js';
import { handMelds, sortHand } from './cards.js';
import { PHASE_WORDS, describe, namesOf } from './replay.js';
import { actionPanel, fairnessPanel } from './moves.js';
import { card, client, conn, goal, h, main, meldRow, rejection, show, store } from './ui.js';

const MELD_COLORS = ['#7fe0a6', '#8fc7ff', '#f7a8d8', '#ffd27f'];

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

export async function tableScreen(tableId, stale = () => false) {
  document.title = `${tableId} · Conquian`;
  let held = store.seat(tableId);
  const t = {
    id: tableId, token: held?.token ?? null, seat: held?.seat ?? null,
    view: null, pub: null, events: [], selected: new Set(), busy: false, lastTime: 0, verify: {},
    resignArmed: false, skew: 0,
  };
  t.act = (fields, send) => act(t, fields, send); // for moves.js
  t.redraw = () => render(t);
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
  if (stale()) return () => {}; // another screen was asked for meanwhile
  const after = t.events.length ? t.events[t.events.length - 1].version : 0;

  // the public view (names, status, clock, rematch) read again after a change: at least at
  // the newest version seen, and once more if another change came while it was being read
  let refreshing = false;
  let again = false;
  const refreshPublic = async () => {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      do {
        again = false;
        const pub = await client.publicView(tableId, { minVersion: t.live?.version ?? null });
        if (!t.pub || pub.version >= t.pub.version) t.pub = pub;
        if (pub.updated_at) t.lastTime = Math.max(t.lastTime, pub.updated_at);
        if (t.rematchAsked && pub.rematch?.table_id) rematch(t); // the other seat agreed: go
        render(t);
      } while (again && !t.gone);
    } catch {
      // the next change reads it again
    } finally {
      refreshing = false;
    }
  };
  const live = client.live(tableId, {
    token: t.token,
    after,
    onEvent: (e) => {
      // a live event is at most as new as the server's clock: the largest (time − now) seen
      // is how far the server's clock is ahead of this one (0 until one is ahead)
      t.skew = Math.max(t.skew, e.time - Date.now());
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
  return () => {
    t.gone = true; // a render still scheduled must not draw over the next screen
    live.close();
    clearInterval(ticker);
    document.removeEventListener('keydown', keys);
  };
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
  const left = Math.max(0, Math.ceil((due - Date.now() - t.skew) / 1000));
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
  if (t.gone) return;
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
  const last = t.events[t.events.length - 1];
  if (last) items.push(h('span', { class: 'muted', id: 'last-move', 'aria-live': 'polite' }, describe(last.payload, seatNames)));
  return h('div', { class: 'bar panel' }, items);
}

function seatArea(t, seat, seatNames, mine) {
  const v = t.view;
  const player = v.deal?.players[seat];
  const acting = v.deal && v.deal.phase !== 'over' && v.deal.to_act === seat;
  const bot = t.pub?.seats?.[seat]?.bot;
  const taken = !t.pub?.seats || Boolean(t.pub.seats[seat]?.name);
  const head = h('div', { class: 'seat-head' },
    h('strong', {}, taken ? seatNames[seat] : 'free seat'), bot ? h('span', { class: 'muted' }, `(${bot} bot)`) : '',
    h('span', { class: 'muted' }, `seat ${seat}`), acting ? h('span', { class: 'pill turn' }, 'to act') : '',
    player ? goal(player.table) : '');
  const area = h('section', { class: `seat ${acting ? 'acting' : ''}`, id: `seat-${seat}`, 'aria-label': `${seatNames[seat]}'s side` }, head);
  const failure = t.pub?.seats?.[seat]?.bot_failure; // the bots runner could not move for it
  if (failure) area.append(h('p', { class: 'notice', id: `bot-failure-${seat}`, role: 'alert' }, `The bot failed: ${failure.message} (${failure.code})`));
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


function onKey(t, e) {
  if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || e.altKey) return;
  const byKey = { t: 'turn', r: 'refuse', l: 'leave', f: 'force', w: 'waive', d: 'discard', n: 'next_deal' };
  const action = byKey[e.key];
  if (!action) return;
  const button = document.querySelector(`#actions [data-action="${action}"]`);
  if (button && !button.disabled) { e.preventDefault(); button.click(); }
}
