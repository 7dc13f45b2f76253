// fairness.js: re-derive a deal's shuffle from its revealed seed in the browser (WebCrypto),
// exactly as docs/fairness.md specifies `hmac-sha256-fy-v1`, and check it against the
// commitment published when the deal started and against the cards the viewer saw.

export const ALGORITHM = 'hmac-sha256-fy-v1';
const SUITS = 'CDHS';
const RANKS = ['A', '2', '3', '4', '5', '6', '7', 'J', 'Q', 'K'];

function hexBytes(hex) {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new Error(`a seed is 64 hexadecimal digits, not ${hex}`);
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i += 1) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function bytesHex(bytes) {
  return Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, '0')).join('');
}

function subtle() {
  if (!globalThis.crypto?.subtle) {
    throw new Error('this page is not in a secure context (https or localhost): no WebCrypto');
  }
  return globalThis.crypto.subtle;
}

/** Return SHA-256 of the seed's 32 bytes as 64 lowercase hex digits. */
export async function commitmentOf(seedHex) {
  return bytesHex(await subtle().digest('SHA-256', hexBytes(seedHex)));
}

/** Return the 40-card deck of a seed and a context (`table/deal`), step 4 of docs/fairness.md. */
export async function deckOrder(seedHex, context, algorithm = ALGORITHM) {
  if (algorithm !== ALGORITHM) throw new Error(`unknown shuffle algorithm ${algorithm}`);
  const key = await subtle().importKey(
    'raw', hexBytes(seedHex), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'],
  );
  const prefix = new TextEncoder().encode(`${context}:`);
  let counter = 0;
  let words = [];
  const nextWord = async () => {
    if (words.length === 0) {
      const message = new Uint8Array(prefix.length + 4);
      message.set(prefix);
      new DataView(message.buffer).setUint32(prefix.length, counter, false);
      const block = new DataView(await subtle().sign('HMAC', key, message));
      words = Array.from({ length: 8 }, (_, k) => block.getUint32(4 * k, false));
      counter += 1;
    }
    return words.shift();
  };
  const deck = [];
  for (const suit of SUITS) for (const rank of RANKS) deck.push(rank + suit);
  for (let i = 39; i >= 1; i -= 1) {
    const n = i + 1;
    const limit = Math.floor(2 ** 32 / n) * n;
    let word = await nextWord();
    while (word >= limit) word = await nextWord();
    const j = word % n;
    [deck[i], deck[j]] = [deck[j], deck[i]];
  }
  return deck;
}

/**
 * Derive a deal: `{commitment, deck, nonDealer, dealer, stock}` (hands in dealt order).
 * @param {string} seedHex
 * @param {string} context  `table_id/deal_number`
 */
export async function deriveDeal(seedHex, context, algorithm = ALGORITHM) {
  const deck = await deckOrder(seedHex, context, algorithm);
  return {
    commitment: await commitmentOf(seedHex),
    deck,
    nonDealer: deck.slice(0, 20).filter((_, k) => k % 2 === 0),
    dealer: deck.slice(0, 20).filter((_, k) => k % 2 === 1),
    stock: deck.slice(20),
  };
}

/**
 * Check a revealed deal: the seed against the commitment, the viewer's dealt hand (if any)
 * against the derived one, and every turned card against the stock, in order.
 * @param {{tableId: string, number: number, dealer: number, commitment: string, seed: string,
 *   algorithm?: string, hands?: Record<number, string[]>, turned?: string[]}} deal
 * @returns {Promise<{ok: boolean, checks: {what: string, ok: boolean}[], derived: object}>}
 */
export async function verifyDeal(deal) {
  const derived = await deriveDeal(deal.seed, `${deal.tableId}/${deal.number}`, deal.algorithm);
  const checks = [{ what: 'SHA-256 of the seed is the commitment', ok: derived.commitment === deal.commitment }];
  for (const [seat, cards] of Object.entries(deal.hands ?? {})) {
    const mine = Number(seat) === deal.dealer ? derived.dealer : derived.nonDealer;
    const same = [...cards].sort().join(' ') === [...mine].sort().join(' ');
    checks.push({ what: `seat ${seat}'s dealt hand comes from the seed`, ok: same });
  }
  const turned = deal.turned ?? [];
  if (turned.length) {
    const same = turned.every((card, k) => derived.stock[k] === card);
    checks.push({ what: `the ${turned.length} turned cards are the stock in order`, ok: same });
  }
  return { ok: checks.every((c) => c.ok), checks, derived };
}
