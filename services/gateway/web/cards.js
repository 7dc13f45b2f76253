// cards.js: the project's own French card faces, drawn as SVG (no image files, no fonts
// needed for the suits), and the meld finder that highlights what a hand could make.

const SUIT_PATHS = {
  // each suit in a 20×20 box
  H: 'M10 18.5 L2.3 10.2 A4.7 4.7 0 1 1 10 4.6 A4.7 4.7 0 1 1 17.7 10.2 Z',
  D: 'M10 1 L17.5 10 L10 19 L2.5 10 Z',
  S: 'M10 1.5 L17.7 9.8 A4.7 4.7 0 1 1 11 15.2 L13 19 L7 19 L9 15.2 A4.7 4.7 0 1 1 2.3 9.8 Z',
  C: 'M10 1.3 A4.3 4.3 0 0 1 13.3 8.4 A4.3 4.3 0 1 1 11 14.6 L13 19 L7 19 L9 14.6 ' +
     'A4.3 4.3 0 1 1 6.7 8.4 A4.3 4.3 0 0 1 10 1.3 Z',
};
export const SUIT_NAMES = { C: 'clubs', D: 'diamonds', H: 'hearts', S: 'spades' };
export const RANK_NAMES = {
  A: 'ace', 2: 'two', 3: 'three', 4: 'four', 5: 'five', 6: 'six', 7: 'seven',
  J: 'jack', Q: 'queen', K: 'king',
};
const RED = '#c0182a';
const BLACK = '#1b1b1f';
const RANKS = 'A234567JQK';
const SUITS = 'CDHS';

// pip positions (x, y) on a 60×84 card for ranks A to 7
const PIPS = {
  A: [[30, 42]],
  2: [[30, 20], [30, 64]],
  3: [[30, 18], [30, 42], [30, 66]],
  4: [[20, 22], [40, 22], [20, 62], [40, 62]],
  5: [[20, 22], [40, 22], [30, 42], [20, 62], [40, 62]],
  6: [[20, 20], [40, 20], [20, 42], [40, 42], [20, 64], [40, 64]],
  7: [[20, 20], [40, 20], [30, 31], [20, 42], [40, 42], [20, 64], [40, 64]],
};

function suitShape(suit, x, y, size, color, flip = false) {
  const scale = size / 20;
  const turn = flip ? ` rotate(180 10 10)` : '';
  return `<path d="${SUIT_PATHS[suit]}" fill="${color}" ` +
    `transform="translate(${x - size / 2} ${y - size / 2}) scale(${scale})${turn}"/>`;
}

function courtFigure(rank, suit, color) {
  // a framed figure: crown (king), flower (queen) or feathered cap (jack), and the suit
  const hats = {
    K: 'M19 30 L22 20 L26 27 L30 18 L34 27 L38 20 L41 30 Z',
    Q: 'M20 30 Q24 18 30 24 Q36 18 40 30 Z',
    J: 'M20 30 Q30 14 40 30 Z M38 24 Q46 14 44 26',
  };
  return `<rect x="13" y="15" width="34" height="54" rx="3" fill="#f6efd8" stroke="${color}" stroke-width="1.2"/>` +
    `<path d="${hats[rank]}" fill="${rank === 'J' ? 'none' : '#e3b23c'}" stroke="${color}" stroke-width="1.2"/>` +
    `<circle cx="30" cy="36" r="6" fill="#fbe3cf" stroke="${color}" stroke-width="1.1"/>` +
    `<path d="M19 62 Q30 40 41 62 Z" fill="${color}" opacity="0.85"/>` +
    suitShape(suit, 30, 56, 9, '#fff') +
    `<text x="30" y="68" text-anchor="middle" font-size="7" font-family="sans-serif" fill="${color}">${rank}</text>`;
}

/** Return the words for a card: `"7H"` → `"seven of hearts"`. */
export function cardName(card) {
  return `${RANK_NAMES[card[0]]} of ${SUIT_NAMES[card[1]]}`;
}

/**
 * Return the SVG text of a card face (60×84 units), or of a card back when `card` is null.
 * The back carries nothing that tells one hidden card from another.
 */
export function cardSvg(card) {
  if (!card) {
    return '<svg class="card-svg" viewBox="0 0 60 84" aria-hidden="true">' +
      '<rect x="1" y="1" width="58" height="82" rx="5" fill="#1f4e8c" stroke="#0d2a52"/>' +
      '<rect x="6" y="6" width="48" height="72" rx="3" fill="none" stroke="#9cc1f0" stroke-dasharray="3 2"/>' +
      '<path d="M30 18 L42 42 L30 66 L18 42 Z" fill="#2f6cc0" stroke="#9cc1f0"/></svg>';
  }
  const rank = card[0];
  const suit = card[1];
  const color = suit === 'H' || suit === 'D' ? RED : BLACK;
  const corner = (flip) => {
    const g = `<text x="7" y="13" text-anchor="middle" font-size="11" font-weight="700" ` +
      `font-family="sans-serif" fill="${color}">${rank}</text>${suitShape(suit, 7, 20, 7, color)}`;
    return flip ? `<g transform="rotate(180 30 42)">${g}</g>` : g;
  };
  const middle = PIPS[rank]
    ? PIPS[rank].map(([x, y]) => suitShape(suit, x, y, rank === 'A' ? 22 : 11, color, y > 45)).join('')
    : courtFigure(rank, suit, color);
  return `<svg class="card-svg" viewBox="0 0 60 84" role="img" aria-label="${cardName(card)}">` +
    `<rect x="1" y="1" width="58" height="82" rx="5" fill="#fffdf7" stroke="#8a8a8a"/>` +
    `${corner(false)}${corner(true)}${middle}</svg>`;
}

/** Sort cards by suit (clubs, diamonds, hearts, spades), then rank, so runs sit together. */
export function sortHand(cards) {
  return [...cards].sort((a, b) =>
    SUITS.indexOf(a[1]) - SUITS.indexOf(b[1]) || RANKS.indexOf(a[0]) - RANKS.indexOf(b[0]));
}

/**
 * Return the melds a hand could lay down by itself (RULES.md section 4): sets of three or four
 * cards of a rank, and the longest runs of three or more cards of a suit in rank order
 * (A 2 3 4 5 6 7 J Q K, the jack following the seven), at most `maxRun` long.
 * @param {string[]} cards
 * @param {number | null} maxRun
 * @returns {string[][]}
 */
export function handMelds(cards, maxRun = null) {
  const melds = [];
  for (const rank of RANKS) {
    const same = cards.filter((c) => c[0] === rank);
    if (same.length >= 3) melds.push(sortHand(same));
  }
  for (const suit of SUITS) {
    let run = [];
    const flush = () => {
      if (run.length >= 3) melds.push(maxRun ? run.slice(0, maxRun) : run);
      run = [];
    };
    for (const rank of RANKS) {
      if (cards.includes(rank + suit)) run.push(rank + suit);
      else flush();
    }
    flush();
  }
  return melds;
}
