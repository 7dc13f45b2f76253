// The Conquian wire contract as TypeScript declarations, for conquian-client.js.
// Generated from docs/schema/*.json by `python -m services.gateway.web_types`
// (make schema); do not edit by hand.

/**
 * The bot on ``seat`` could not choose its move: ``code`` says why, ``message`` in words.
 *
 * Recorded by the bots runner (through the command stream, ``report_bot_failure``) so that
 * clients see why a bot's table stopped; public, so the message never quotes a card.  It
 * changes nothing in the match; the seat's failure stands until the table's next event.
 */
export interface BotFailed {
  bot: string;
  code: string;
  message: string;
  seat: number;
  type: "bot_failed";
  v: 1;
}

/**
 * ``seat`` discarded a hand card face up; it is the opponent's offered card.
 */
export interface CardDiscarded {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  seat: number;
  type: "card_discarded";
  v: 1;
}

/**
 * ``seat`` left its turned card face up; ``forceable`` opens a force window.
 */
export interface CardLeft {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  forceable: boolean;
  seat: number;
  type: "card_left";
  v: 1;
}

/**
 * ``seat`` refused the offered card; ``forceable`` opens a force window for the opponent.
 */
export interface CardRefused {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  forceable: boolean;
  seat: number;
  type: "card_refused";
  v: 1;
}

/**
 * ``seat`` turned the top card of the stock; it is their turned card.
 */
export interface CardTurned {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  seat: number;
  type: "card_turned";
  v: 1;
}

/**
 * The refused card went to the waste, out of the game.
 */
export interface CardWasted {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  type: "card_wasted";
  v: 1;
}

/**
 * A command was rejected with a stable ``code``; sent to its sender, never stored.
 *
 * ``command_id`` is None when the command was too malformed to read its id.
 */
export interface CommandRejected {
  code: string;
  command_id: string | null;
  message: string;
  type: "command_rejected";
  v: 1;
}

/**
 * Open a table: rules (a preset name or options), how the match ends, clock and bots.
 *
 * The match ends after ``deals`` deals or when a player reaches ``target_score``, whichever
 * comes first; at least one of them must be set.  ``turn_seconds`` is the turn clock (None:
 * no clock).  ``bots`` seats a bot, by name, on a seat.
 */
export interface CreateTable {
  /**
   * A bot by name on a seat: {"1": "greedy"}.
   */
  bots?: ({ [key in "0" | "1"]?: string }) | null;
  command_id: string;
  deals?: number | null;
  expected_version?: number | null;
  rules?: ("automatic-forcing" | "bicycle" | "carry-stakes" | "classic" | "flat-stakes" | "long-runs" | "no-forcing") | RuleOptions;
  table_id: string;
  target_score?: number | null;
  turn_seconds?: number | null;
  type: "create_table";
}

/**
 * The ended deal's seed is revealed: anyone can re-derive its deck (docs/fairness.md).
 *
 * Version 2: version 1 also carried the 40-card ``deck``, which the seed determines.
 */
export interface DealRevealed {
  algorithm: string;
  number: number;
  seed: string;
  type: "deal_revealed";
  v: 2;
}

/**
 * A deal began; ``commitment`` is the SHA-256 of the secret seed the deck is shuffled from.
 */
export interface DealStarted {
  algorithm: string;
  commitment: string;
  dealer: number;
  number: number;
  stake: number;
  type: "deal_started";
  v: 1;
}

/**
 * Discard a hand card after a take.
 */
export interface Discard {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "discard";
}

/**
 * Force the card the opponent just declined on them.
 */
export interface Force {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "force";
}

/**
 * ``seat`` forced the card the opponent declined: the opponent must take it.
 */
export interface ForceDemanded {
  seat: number;
  type: "force_demanded";
  v: 1;
}

/**
 * ``seat`` let the opponent's declined card go on as if it were not forceable.
 */
export interface ForceWaived {
  seat: number;
  type: "force_waived";
  v: 1;
}

/**
 * A card was refused with no stock card left: the deal is a draw.
 */
export interface GameDrawn {
  type: "game_drawn";
  v: 1;
}

/**
 * The ten cards dealt to ``seat``, sorted; SECRET: only that seat may see this event.
 */
export interface HandDealt {
  cards: string[];
  seat: number;
  type: "hand_dealt";
  v: 1;
}

/**
 * ``seat`` laid hand cards down without a centre card (variant); ``table`` is the new table.
 */
export interface HandMelded {
  hand: string[];
  seat: number;
  table: string[][];
  type: "hand_melded";
  v: 1;
}

/**
 * Take a seat (0 or 1, or None for any free seat) under a display name.
 */
export interface Join {
  command_id: string;
  expected_version?: number | null;
  name: string;
  seat?: number | null;
  table_id: string;
  type: "join";
}

/**
 * Leave the turned card face up for the opponent (not: leave the table).
 */
export interface Leave {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "leave";
}

/**
 * Give one's seat up before the first deal (not ``leave``: leave the turned card).
 */
export interface LeaveTable {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "leave_table";
}

/**
 * The match is over; ``winner`` has the higher score (None on a tie).
 */
export interface MatchEnded {
  scores: [number, number];
  type: "match_ended";
  v: 1;
  winner: number | null;
}

/**
 * Lay hand cards down without a centre card (variant); ``table`` is the whole new table.
 */
export interface MeldHand {
  command_id: string;
  expected_version?: number | null;
  hand: string[];
  table: string[][];
  table_id: string;
  type: "meld_hand";
}

/**
 * ``seat`` took the centre ``card`` with hand cards ``hand``; ``table`` is its new table.
 */
export interface MeldMade {
  /**
   * A card: rank A 2 3 4 5 6 7 J Q K, then suit C D H S (e.g. 7H).
   */
  card: string;
  hand: string[];
  seat: number;
  table: string[][];
  type: "meld_made";
  v: 1;
}

/**
 * Start the next deal of the match (the service shuffles and commits to the deck).
 */
export interface NextDeal {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "next_deal";
}

/**
 * A player (or a bot, named by ``bot``) took a seat.
 */
export interface PlayerJoined {
  bot?: string | null;
  name: string;
  seat: number;
  type: "player_joined";
  v: 1;
}

/**
 * The player of ``seat`` gave the seat up before the first deal; its token stops working.
 */
export interface PlayerLeft {
  seat: number;
  type: "player_left";
  v: 1;
}

/**
 * Refuse the offered card (it goes to the waste and the next card is turned).
 */
export interface Refuse {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "refuse";
}

/**
 * Agree, once the match is over, to play again: the same seats at ``next_table_id``.
 *
 * The gateway's rematch route sends it and derives ``next_table_id``; a seat cannot send it
 * on its own.
 */
export interface Rematch {
  command_id: string;
  expected_version?: number | null;
  next_table_id: string;
  table_id: string;
  type: "rematch";
}

/**
 * After the match, ``seat`` agreed to play again (a bot seat agrees without an event).
 */
export interface RematchAgreed {
  seat: number;
  type: "rematch_agreed";
  v: 1;
}

/**
 * Both seats agreed: the rematch is at table ``next_table_id`` (same rules, seats, clock).
 */
export interface RematchOpened {
  next_table_id: string;
  type: "rematch_opened";
  v: 1;
}

/**
 * Record that the bot on the sending seat could not choose its move (``bot_failed``).
 *
 * Sent by the bots runner only, as the bot's seat, through the command stream; the gateway
 * refuses it from clients (``command/unsupported``).
 */
export interface ReportBotFailure {
  code: string;
  command_id: string;
  expected_version?: number | null;
  message: string;
  table_id: string;
  type: "report_bot_failure";
}

/**
 * Concede: the running deal goes to the opponent and the match ends.
 */
export interface Resign {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "resign";
}

/**
 * ``seat`` conceded the match.
 */
export interface Resigned {
  seat: number;
  type: "resigned";
  v: 1;
}

/**
 * A rule set chosen option by option; an option left out takes its classic value.
 *
 * The options are those of ``engine.rules.Rules``; the set is checked by ``Rules.from_dict``.
 */
export interface RuleOptions {
  base_stake?: number;
  forcing?: "optional" | "automatic" | "off";
  hand_melds_without_centre_card?: boolean;
  max_run_length?: number | null;
  name?: string;
  stake_on_draw?: "double" | "carry" | "none";
}

/**
 * A complete rule set, field for field ``engine.rules.Rules`` (RULES.md: *variant*).
 */
export interface RuleSet {
  base_stake: number;
  forcing: "optional" | "automatic" | "off";
  hand_melds_without_centre_card: boolean;
  max_run_length: number | null;
  name: string;
  stake_on_draw: "double" | "carry" | "none";
}

/**
 * The deal's stake went to ``winner`` (None on a draw); ``scores`` by seat, then next stake.
 *
 * Version 2: version 1 wrote ``scores`` as an object keyed by seat (``{"0": 3, "1": 1}``).
 */
export interface StakesSettled {
  amount: number;
  next_stake: number;
  scores: [number, number];
  type: "stakes_settled";
  v: 2;
  winner: number | null;
}

/**
 * A table opened: its rules, how the match ends, the turn clock and the first dealer.
 */
export interface TableCreated {
  deals: number | null;
  first_dealer: number;
  rules: RuleSet;
  target_score: number | null;
  turn_seconds: number | null;
  type: "table_created";
  v: 1;
}

/**
 * Take the centre card with the named hand cards; ``table`` is the whole table after it.
 *
 * ``table`` None lets the engine choose the arrangement (``engine.legal.default_take``).
 */
export interface Take {
  command_id: string;
  expected_version?: number | null;
  hand?: string[];
  table?: string[][] | null;
  table_id: string;
  type: "take";
}

/**
 * Turn the top card of the stock (first turn of a deal).
 */
export interface Turn {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "turn";
}

/**
 * Let the opponent's declined card go on as if it were not forceable.
 */
export interface Waive {
  command_id: string;
  expected_version?: number | null;
  table_id: string;
  type: "waive";
}

/**
 * ``seat`` reached exactly 11 table cards with an empty hand and won the deal.
 */
export interface WentOut {
  seat: number;
  type: "went_out";
  v: 1;
}

export type Command = CreateTable | Join | NextDeal | Resign | LeaveTable | Rematch | Turn | Take | Refuse | Leave | Force | Waive | Discard | MeldHand | ReportBotFailure;

export type DomainEvent = TableCreated | PlayerJoined | PlayerLeft | RematchAgreed | RematchOpened | DealStarted | HandDealt | CardTurned | CardRefused | CardLeft | ForceDemanded | ForceWaived | CardWasted | MeldMade | HandMelded | CardDiscarded | WentOut | GameDrawn | Resigned | StakesSettled | DealRevealed | MatchEnded | BotFailed | CommandRejected;

/**
 * One event of a table's stream with its position, cause, time and hash chain links.
 *
 * ``event_id`` is always ``<table_id>:<version>``: it may be left out and is filled in.
 * ``causation_id`` is the command id for events a command caused, or the id of the event
 * that caused this one.  ``time`` is milliseconds since the epoch, set by the service when
 * it accepted the command (``events`` never reads a clock).
 */
export interface Envelope {
  causation_id: string;
  command_id: string;
  event_id?: string;
  hash: string;
  payload: TableCreated | PlayerJoined | PlayerLeft | RematchAgreed | RematchOpened | DealStarted | HandDealt | CardTurned | CardRefused | CardLeft | ForceDemanded | ForceWaived | CardWasted | MeldMade | HandMelded | CardDiscarded | WentOut | GameDrawn | Resigned | StakesSettled | DealRevealed | MatchEnded | BotFailed;
  prev_hash: string;
  table_id: string;
  time: number;
  version: number;
}
