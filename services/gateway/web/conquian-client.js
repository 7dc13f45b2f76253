// conquian-client.js: the Conquian table service's protocol for browsers, as one ES module.
//
// No dependency, no build step: HTTP with fetch, live tables over a WebSocket that resumes
// where it stopped. The wire types come from the JSON Schema (conquian-types.d.ts, generated
// by `make schema`); the views are described below. docs/api.md is the protocol, docs/web.md
// how this module is used by the page.

/** @typedef {import('./conquian-types').Command} Command */
/** @typedef {import('./conquian-types').DomainEvent} DomainEvent */
/** @typedef {import('./conquian-types').CreateTable} CreateTable */
/**
 * An envelope as the gateway serves it: `hash` and `prev_hash` are null while a deal is in
 * play (docs/api.md, "What a viewer may see of the events").
 * @typedef {Omit<import('./conquian-types').Envelope, 'hash' | 'prev_hash'> &
 *   {hash: string | null, prev_hash: string | null}} ServedEnvelope
 */
/**
 * One seat's part of a deal view. `hand` is null when the viewer may not see it.
 * @typedef {{seat: number, table: string[][], hand: string[] | null, hand_count: number}} PlayerView
 */
/**
 * @typedef {{number: number, dealer: number, stake: number, phase: string,
 *   to_act: number | null, players: [PlayerView, PlayerView], centre: string | null,
 *   declined: 'refused' | 'left' | null, stock_count: number, waste_count: number,
 *   outcome: {termination: string, winner: number | null} | null}} DealView
 */
/**
 * A seat's or a spectator's view (engine/views.py); the public view (GET /tables/{id}) adds
 * `status`, `seats`, `turn_seconds`, `to_act` and `updated_at`.
 * @typedef {{table_id: string, version: number, seat: number | null,
 *   rules: Record<string, unknown>, deals: number | null, target_score: number | null,
 *   scores: [number, number], next_stake: number, deals_played: number,
 *   results: {termination: string, winner: number | null}[], match_over: boolean,
 *   winner: number | null, deal: DealView | null, legal_actions: string[],
 *   status?: string, seats?: {name: string | null, bot: string | null}[],
 *   turn_seconds?: number | null, to_act?: number | null, updated_at?: number | null,
 *   rematch?: {agreed: number[], table_id: string | null}}} TableView
 */

/** A rejection from the service: `code` is stable (docs/api.md), `message` is for people. */
export class ConquianError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {number} status
   * @param {Record<string, unknown>} body
   */
  constructor(code, message, status, body) {
    super(message);
    this.name = 'ConquianError';
    this.code = code;
    this.status = status;
    this.body = body;
  }
}

const CARD = /^[A2-7JQK][CDHS]$/;
const RANKS = 'A234567JQK';

/** Return the cards of a meld written without spaces: `"JHQHKH"` → `["JH", "QH", "KH"]`. */
export function meldCards(text) {
  const cards = [];
  for (let i = 0; i < text.length; i += 2) {
    const card = text.slice(i, i + 2).toUpperCase();
    if (!CARD.test(card)) throw new Error(`not a meld: ${text}`);
    cards.push(card);
  }
  return cards;
}

/**
 * Return the wire command fields of a legal action in engine notation (docs/notation.md):
 * `"take JH KH => JHQHKH"` → `{type: "take", hand: ["JH", "KH"], table: [["JH","QH","KH"]]}`.
 * @param {string} text
 * @returns {Record<string, unknown> & {type: string}}
 */
export function actionCommand(text) {
  const words = text.trim().split(/\s+/);
  const verb = words[0];
  if (['turn', 'refuse', 'leave', 'force', 'waive'].includes(verb)) return { type: verb };
  if (verb === 'discard') return { type: 'discard', card: words[1] };
  if (verb === 'take' || verb === 'meld') {
    const split = words.indexOf('=>');
    const hand = split < 0 ? words.slice(1) : words.slice(1, split);
    const melds = split < 0 ? null : words.slice(split + 1).filter((w) => w !== '-');
    const fields = { type: verb === 'take' ? 'take' : 'meld_hand', hand };
    if (melds !== null) fields.table = melds.map(meldCards);
    return fields;
  }
  throw new Error(`not an action: ${text}`);
}

/** Return a card's rank index (A=0 … K=9) and suit letter. */
export function cardParts(card) {
  return { rank: RANKS.indexOf(card[0]), suit: card[1] };
}

/** Return a fresh command id: 22 URL-safe characters from the browser's CSPRNG. */
export function newCommandId(prefix = 'w') {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  const text = btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_');
  return `${prefix}-${text.replace(/=+$/, '')}`;
}

/** The HTTP and WebSocket client of one gateway. */
export class ConquianClient {
  /**
   * @param {{base?: string, fetch?: typeof fetch, WebSocket?: typeof WebSocket}} [options]
   *   `base`: the gateway's URL (default: the page's origin).
   */
  constructor(options = {}) {
    this.base = (options.base ?? globalThis.location?.origin ?? '').replace(/\/$/, '');
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.WebSocket = options.WebSocket ?? globalThis.WebSocket;
  }

  /**
   * Send one request; return the JSON answer, or throw ConquianError with the service's code.
   * @param {string} method
   * @param {string} path
   * @param {{token?: string | null, body?: unknown}} [options]
   */
  async request(method, path, { token = null, body = undefined } = {}) {
    const headers = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let response;
    try {
      response = await this.fetch(this.base + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      throw new ConquianError('network/unreachable', `the service does not answer (${error})`, 0, {});
    }
    let answer = {};
    try {
      answer = await response.json();
    } catch {
      answer = {};
    }
    if (!response.ok || answer.ok === false) {
      const code = answer.code ?? `http/${response.status}`;
      const message = answer.message ?? `${method} ${path} answered ${response.status}`;
      throw new ConquianError(code, message, response.status, answer);
    }
    if (response.status === 202) answer.pending = true;
    return answer;
  }

  /**
   * Open a table (POST /tables). `options` is a create_table command without `type`.
   * @param {Partial<CreateTable>} options
   */
  createTable(options) {
    return this.request('POST', '/tables', { body: options });
  }

  /** Take a seat: `{name, seat?}` → `{seat, token, …}`. Retried with the same key, the same seat. */
  join(tableId, { name, seat = null, commandId = newCommandId('j') }) {
    const body = { name, command_id: commandId };
    if (seat !== null && seat !== undefined) body.seat = seat;
    return this.request('POST', `/tables/${enc(tableId)}/join`, { body });
  }

  /** The public view (names, status, turn clock, scores, the deal's public part). */
  publicView(tableId, { minVersion = null } = {}) {
    return this.request('GET', `/tables/${enc(tableId)}${query({ min_version: minVersion })}`);
  }

  /** The seat's view with its hand and legal actions (no token: the spectator's). */
  view(tableId, { token = null, minVersion = null } = {}) {
    const path = `/tables/${enc(tableId)}/view${query({ min_version: minVersion })}`;
    return this.request('GET', path, { token });
  }

  /** Every event after `after` the viewer may see, all pages read: ServedEnvelope[]. */
  async events(tableId, { token = null, after = 0 } = {}) {
    const out = [];
    for (;;) {
      const path = `/tables/${enc(tableId)}/events${query({ after, limit: 1000 })}`;
      const page = await this.request('GET', path, { token });
      out.push(...page.events);
      if (page.next_after === after || page.events.length === 0) return out;
      after = page.next_after;
    }
  }

  /**
   * Send a seat's command; its `command_id` is made here and kept across retries, so a
   * command the service queued (202) is sent again until it has its result.
   * @param {string} tableId
   * @param {string} token
   * @param {Record<string, unknown> & {type: string}} fields
   */
  async command(tableId, token, fields) {
    const body = { ...fields, table_id: tableId, command_id: newCommandId('w') };
    for (let attempt = 0; ; attempt += 1) {
      const answer = await this.request('POST', `/tables/${enc(tableId)}/commands`, { token, body });
      if (!answer.pending || attempt >= 5) return answer;
    }
  }

  /** Lobby: `{tables, next_cursor}` of the waiting or running tables, newest first. */
  listTables({ status = 'waiting', limit = 20, cursor = null } = {}) {
    return this.request('GET', `/tables${query({ status, limit, cursor })}`);
  }

  /** Free the seat again, before the first deal (the token stops working). */
  leaveTable(tableId, token) {
    return this.request('POST', `/tables/${enc(tableId)}/leave`, { token, body: {} });
  }

  /** Concede the match (POST /tables/{id}/resign: the answer of a `resign` command). */
  async resign(tableId, token) {
    const body = { command_id: newCommandId('w') };
    for (let attempt = 0; ; attempt += 1) {
      const answer = await this.request('POST', `/tables/${enc(tableId)}/resign`, { token, body });
      if (!answer.pending || attempt >= 5) return answer;
    }
  }

  /** Ask for a rematch once the match is over; asked again, the new table's seat and token. */
  rematch(tableId, token) {
    return this.request('POST', `/tables/${enc(tableId)}/rematch`, { token, body: {} });
  }

  /**
   * Follow a table live (see LiveTable).
   * @param {string} tableId
   * @param {{token?: string | null, after?: number | null, onEvent?: (e: ServedEnvelope) => void,
   *   onView?: (v: TableView) => void, onStatus?: (s: string, detail?: string) => void,
   *   onFatal?: (code: string, message: string) => void}} handlers
   */
  live(tableId, handlers) {
    return new LiveTable(this, tableId, handlers);
  }
}

const FATAL = new Set([4401, 4404, 4422]); // bad token, no table, bad query: do not reconnect

/**
 * A table followed over `/tables/{id}/ws`: events and views in version order, each once. The
 * highest version received is kept, and after a dropped connection the socket is opened again
 * with it as `after` (docs/api.md, "Catching up"), so nothing is missed or seen twice.
 */
export class LiveTable {
  constructor(client, tableId, handlers) {
    this.client = client;
    this.tableId = tableId;
    this.handlers = handlers;
    this.token = handlers.token ?? null;
    this.version = handlers.after ?? null;
    this.lastEvent = handlers.after ?? 0;
    this.closed = false;
    this.retries = 0;
    this.connect();
  }

  connect() {
    if (this.closed) return;
    const base = this.client.base || globalThis.location.origin;
    const url = new URL(`/tables/${enc(this.tableId)}/ws`, base.replace(/^http/, 'ws'));
    if (this.token) url.searchParams.set('token', this.token);
    if (this.version !== null) url.searchParams.set('after', String(this.version));
    const socket = new this.client.WebSocket(url.toString());
    this.socket = socket;
    this.status('connecting');
    socket.onmessage = (message) => this.receive(JSON.parse(message.data));
    socket.onclose = (closing) => {
      if (this.socket !== socket || this.closed) return; // replaced, or closed by its owner
      if (FATAL.has(closing.code)) {
        this.closed = true;
        this.handlers.onFatal?.(this.lastError?.code ?? `ws/${closing.code}`,
          this.lastError?.message ?? `the socket closed (${closing.code})`);
        return;
      }
      this.status('reconnecting');
      const wait = Math.min(5000, 250 * 2 ** this.retries);
      this.retries += 1;
      this.timer = setTimeout(() => this.connect(), wait);
    };
  }

  receive(message) {
    if (message.kind === 'hello') {
      this.retries = 0;
      this.status('live');
    } else if (message.kind === 'event') {
      const version = message.event.version;
      if (version <= this.lastEvent) return; // seen before a reconnect
      this.lastEvent = version;
      if (this.version === null || version > this.version) this.version = version;
      this.handlers.onEvent?.(message.event);
    } else if (message.kind === 'view') {
      const version = message.view.version;
      if (this.version === null || version > this.version) this.version = version;
      this.handlers.onView?.(message.view);
    } else if (message.kind === 'error') {
      this.lastError = message;
    }
  }

  status(text) {
    this.handlers.onStatus?.(text);
  }

  /** Drop the connection as a network failure would (it reconnects by itself). */
  drop() {
    this.socket?.close();
  }

  /** Stop following the table. */
  close() {
    this.closed = true;
    clearTimeout(this.timer);
    this.socket?.close();
  }
}

function enc(text) {
  return encodeURIComponent(text);
}

function query(params) {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}
