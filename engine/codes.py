"""The error catalogue: every code a client can see, its HTTP status, close code and meaning.

Each :class:`Code` is declared once here; the engine, the contract (``events``) and the services
raise and answer with these members, and :class:`CodedError` is the base of their errors.  It
lives in ``engine`` because every layer may import the engine (standard library only).  The
error table of ``docs/api.md`` is generated from it (``make schema``); docs/services.md, "Error
codes", says why it is here and how to add a code.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Code", "CodedError", "close_of", "lookup", "status_of"]

DEFAULT_STATUS = 400
"""The HTTP status of a code the catalogue does not hold (none should reach a client)."""


class Code(StrEnum):
    """A stable error code (``"<area>/<what>"``) with its HTTP status, WebSocket close code and
    one-line meaning; a member equals its text (``Code.SEAT_TAKEN == "seat/taken"``).

    ``status`` is None for a code that is never an HTTP answer (a bot's failure, shown in the
    view); ``close`` is None unless a socket closes for the code.
    """

    status: int | None
    close: int | None
    meaning: str

    def __new__(cls, text: str, status: int | None, close: int | None, meaning: str) -> Code:
        member = str.__new__(cls, text)
        member._value_ = text
        member.status = status
        member.close = close
        member.meaning = meaning
        return member

    # --- the command's text and fields ---------------------------------------------------------
    COMMAND_MALFORMED_JSON = (
        "command/malformed_json", 400, None, "the body is not JSON text, or not a JSON object")
    COMMAND_TOO_LARGE = (
        "command/too_large", 413, None,
        "a body or socket message over 8 KiB (`MAX_COMMAND_BYTES`): by `Content-Length`, "
        "or as soon as the bytes read pass it")
    COMMAND_UNKNOWN_TYPE = (
        "command/unknown_type", 422, None,
        "`type` missing or unknown (on the socket: a message that is no `command`)")
    COMMAND_INVALID = ("command/invalid", 422, None, "the type is known, the fields are not")
    COMMAND_WRONG_TABLE = (
        "command/wrong_table", 422, None, "the body's `table_id` is not the table of the URL")
    COMMAND_UNSUPPORTED = (
        "command/unsupported", 422, None,
        "`create_table`, `join` or `rematch` sent as a seat's command; `report_bot_failure` "
        "(the bots runner's alone)")
    COMMAND_STALE_VERSION = (
        "command/stale_version", 409, None, "`expected_version` is not the table's version")
    COMMAND_ID_TAKEN = (
        "command/id_taken", 409, None,
        "the `command_id` was used at this table by the other seat (or a create or join): "
        "send the command with an id of your own")
    COMMAND_WRONG_SHARD = (
        "command/wrong_shard", 400, None,
        "a command stream entry whose table lives on another shard (a misrouted entry)")
    COMMAND_FAILED = (
        "command/failed", 500, None,
        "the worker gave up on the command (poison), or its result could not be read")
    QUERY_INVALID = (
        "query/invalid", 422, 4422,
        "a query parameter breaks its rule, on HTTP and on the WebSocket alike: `after` and "
        "`min_version` are whole numbers from 0 to 2^53 − 1 in digits alone (no sign, no "
        "space), `limit` from 1 to 1000 (the "
        "lobby's: 1 to 100), the lobby's `status` is `waiting` or `running` and its `cursor` "
        "one a page handed out")
    # --- stored events read back (a corrupt or too new table stream) ----------------------------
    EVENT_MALFORMED_JSON = (
        "event/malformed_json", 400, None, "a stored event is not JSON text or not an object")
    EVENT_UNKNOWN_TYPE = (
        "event/unknown_type", 400, None, "a stored event of a type this code does not know")
    EVENT_UNKNOWN_VERSION = (
        "event/unknown_version", 400, None,
        "a stored event's schema version is newer than this code, or no upcaster leads from it")
    EVENT_INVALID = ("event/invalid", 400, None, "a stored event's fields are wrong")
    EVENT_BAD_HASH = (
        "event/bad_hash", 400, None,
        "a stored event's hash is not the hash of its body chained to the previous one")
    # --- seats ----------------------------------------------------------------------------------
    SEAT_BAD_TOKEN = (
        "seat/bad_token", 401, 4401,
        "no `Authorization: Bearer`, or a token that is no seat's on this table (on a socket: "
        "also when the seat is given up)")
    SEAT_REQUIRED = (
        "seat/required", 403, None, "a command from no seat (e.g. a spectator's socket)")
    SEAT_TAKEN = ("seat/taken", 409, None, "joining a seat that is taken")
    # --- tables ---------------------------------------------------------------------------------
    TABLE_INVALID_ID = (
        "table/invalid_id", 422, 4404, "a table id in the URL that cannot be one")
    TABLE_NOT_FOUND = ("table/not_found", 404, 4404, "no such table")
    TABLE_EXISTS = ("table/exists", 409, None, "creating a table that exists")
    TABLE_FULL = ("table/full", 409, None, "joining a table with no free seat")
    TABLE_NOT_FULL = ("table/not_full", 409, None, "a deal starts only with both seats taken")
    TABLE_STARTED = ("table/started", 409, None, "leaving a seat after the first deal")
    TABLE_NOT_OVER = ("table/not_over", 409, None, "a rematch before the match is over")
    TABLE_ARCHIVED = (
        "table/archived", 409, None, "a rematch after the table left Redis for the archive")
    TABLE_UNKNOWN_BOT = (
        "table/unknown_bot", 422, None,
        "a create that seats a bot by a name no bot has (`random`, `greedy`)")
    TABLE_BUSY = ("table/busy", 503, None, "too many concurrent writers (retry)")
    TABLE_ERROR = ("table/error", 409, None, "the table cannot take the command")
    REMATCH_CONFLICT = (
        "rematch/conflict", 409, None,
        "the rematch's table, or one of its seats, was taken by someone else")
    # --- the service --------------------------------------------------------------------------
    RATE_LIMITED = (
        "rate/limited", 429, None,
        "a seat or a client address sent faster than its limit (\"Rate limits\"); "
        "`Retry-After` and `retry_after` say in how many seconds to send it again, `limit` "
        "which limit it met")
    VIEW_NOT_READY = (
        "view/not_ready", 503, None, "no view of the table is stored yet (`Retry-After: 1`)")
    VIEW_TOO_SLOW = (
        "view/too_slow", 503, 4008,
        "the socket fell too far behind its messages (reconnect with `after`)")
    STORE_UNAVAILABLE = (
        "store/unavailable", 503, 4503,
        "Redis does not answer (down, loading its AOF, failing over), or the gateway's "
        "connections to it are all out: send the request again (`Retry-After: 1`)")
    STORE_REFUSED = (
        "store/refused", 500, 4500,
        "Redis refused the gateway's own request (its Redis user lacks a permission: a "
        "deployment's mistake, logged as `redis_refused`; `docs/deploy.md`, \"Redis users\")")
    STORE_ERROR = ("store/error", 422, None, "the event store cannot take the write")
    STORE_VERSION_CONFLICT = (
        "store/version_conflict", 422, None,
        "the table moved on: its head is not at the expected version and hash")
    STORE_INVALID_EVENT = (
        "store/invalid_event", 422, None,
        "an event body the store cannot take (wrong table id or version, not JSON)")
    STORE_INVALID_TABLE_ID = (
        "store/invalid_table_id", 422, None,
        "a table id the store refuses: 1-128 of `A-Z a-z 0-9 _ . : -`")
    PROJECTOR_FOLD_FAILED = (
        "projector/fold_failed", 400, None,
        "a table's events cannot be folded into views (a gap, a card not where they say)")
    FAIRNESS_ERROR = ("fairness/error", 400, None, "the shuffle cannot be made or checked")
    FAIRNESS_INVALID_SEED = (
        "fairness/invalid_seed", 400, None, "a seed that is not 32 bytes (64 hex digits)")
    FAIRNESS_UNKNOWN_ALGORITHM = (
        "fairness/unknown_algorithm", 400, None,
        "a shuffle algorithm name that this version does not know")
    HTTP_NOT_FOUND = ("http/not_found", 404, None, "no such route")
    HTTP_METHOD_NOT_ALLOWED = (
        "http/method_not_allowed", 405, None, "the route takes no such method")
    HTTP_ERROR = (
        "http/error", 400, None, "another HTTP error of the framework, with its own status")
    GATEWAY_ERROR = (
        "gateway/error", 500, 4500,
        "a fault of the gateway itself, logged as `http_failed` (a request) or `ws_failed` (a "
        "socket, which closes: reconnect with `after`)")
    # --- the rules (engine.errors) ------------------------------------------------------------
    ENGINE_ERROR = ("engine/error", 409, None, "the rules engine refuses the command")
    NOTATION_INVALID = (
        "notation/invalid", 422, None, "a card, action or position text that does not parse")
    MOVE_ILLEGAL = ("move/illegal", 409, None, "the rules do not allow it in this position")
    MOVE_NOT_YOUR_TURN = (
        "move/not_your_turn", 409, None, "the seat that sent the command is not the one to act")
    MOVE_WRONG_PHASE = (
        "move/wrong_phase", 409, None,
        "the kind of action does not fit the phase of the deal (a discard before a take)")
    MOVE_UNKNOWN_CARD = (
        "move/unknown_card", 409, None,
        "a named card is not where the command says it is (not in the hand, not the centre)")
    MOVE_ILLEGAL_TAKE = (
        "move/illegal_take", 409, None,
        "a take whose hand cards or resulting table break RULES.md section 5")
    MOVE_MUST_TAKE = (
        "move/must_take", 409, None, "declining is not allowed: the card is forced")
    MOVE_DEAL_OVER = ("move/deal_over", 409, None, "the deal has ended; only a new deal may start")
    MOVE_MATCH_OVER = (
        "move/match_over", 409, None,
        "the match has ended (or the table is archived); it takes no more deals")
    MOVE_INVALID_MATCH = (
        "move/invalid_match", 409, None,
        "a match opened with settings that cannot be played (no such seat, no way to end)")
    MOVE_INVALID_DECK = (
        "move/invalid_deck", 409, None,
        "a deal started with something that is not an order of the 40 cards")
    # --- a bot's failure, shown in the view's `bot_failure`, never an HTTP answer ---------------
    BOT_UNKNOWN = ("bot/unknown", None, None, "the seat's bot is named by no bot")
    BOT_FAILED = ("bot/failed", None, None, "the seat's bot raised choosing its move")
    BOT_ILLEGAL_ACTION = (
        "bot/illegal_action", None, None, "the seat's bot chose a move the rules refuse")


_BY_TEXT: dict[str, Code] = {member.value: member for member in Code}


def lookup(text: str) -> Code | None:
    """Return the catalogue's entry whose text is ``text``, or None.

    >>> lookup("seat/taken") is Code.SEAT_TAKEN, lookup("no/such")
    (True, None)
    """
    return _BY_TEXT.get(text)


def status_of(code: str) -> int:
    """Return the HTTP status of a code: the catalogue's, else :data:`DEFAULT_STATUS`.

    >>> status_of("table/not_found"), status_of("no/such")
    (404, 400)
    """
    member = lookup(code)
    if member is None or member.status is None:
        return DEFAULT_STATUS
    return member.status


def close_of(code: str, default: int) -> int:
    """Return the WebSocket close code of ``code``, or ``default`` when it has none."""
    member = lookup(code)
    if member is None or member.close is None:
        return default
    return member.close


class CodedError(Exception):
    """Base of every error with a stable code: the engine's, the contract's, the services'.

    ``code`` is the text of a :class:`Code` (a plain string on the wire); ``message`` is the
    one-line text sent beside it.
    """

    code: str

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
