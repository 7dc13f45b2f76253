"""One naming scheme for every service: shards, hash tags, key names and hint channels.

A table lives on shard ``crc32(utf8(table_id)) % shards``; every key of a shard carries the hash
tag ``{sNN}``.  The table of keys is in ``docs/services.md`` ("Module notes").  A hint on a
channel is only a nudge: what it announces is already stored, so a lost hint costs a read.
"""

from __future__ import annotations

import random
import re
import zlib
from dataclasses import dataclass
from functools import cached_property

from engine.codes import Code, CodedError

__all__ = [
    "DEFAULT_NS",
    "DEFAULT_SHARDS",
    "TOKEN_PREFIX",
    "InvalidTableId",
    "KeySpace",
    "check_table_id",
    "command_key",
    "other_command_keys",
    "results_channel",
    "views_channel",
]

DEFAULT_NS = "cq"
DEFAULT_SHARDS = 16
TOKEN_PREFIX = "token:"
"""The field prefix of a seat-token digest among a table's secrets (``token:<seat>``): the
append writes such fields to :meth:`KeySpace.tokens`, the others to :meth:`KeySpace.secret`."""

_TABLE_ID = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
_NS = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")
_GLOB = re.compile(r"([*?\[\]\\])")


class InvalidTableId(CodedError, ValueError):
    """A table id the store refuses: 1-128 characters of ``A-Z a-z 0-9 _ . : -``."""

    code = Code.STORE_INVALID_TABLE_ID.value


def check_table_id(table_id: str) -> str:
    """Return ``table_id`` if it is a valid table id, else raise :class:`InvalidTableId`."""
    if not isinstance(table_id, str) or not _TABLE_ID.fullmatch(table_id):
        raise InvalidTableId(f"invalid table id {table_id!r}: use 1-128 of A-Z a-z 0-9 _ . : -")
    return table_id


def command_key(command_id: str, seat: int | None) -> str:
    """The field a command's record is kept under in its table's command ids: a seat's command
    by ``<seat>:<command id>``, a table-level one (create, join: ``seat`` None) by its id.

    A command id is its seat's idempotency key: the ids are public (every envelope carries
    one), so a retry is a retry only from the same seat (wire ids have no ``:``, so the forms
    never meet; ``docs/api.md``, "Idempotency").

    >>> command_key("c-0001-abcd", 1), command_key("j-0001-abcd", None)
    ('1:c-0001-abcd', 'j-0001-abcd')
    """
    return command_id if seat is None else f"{seat}:{command_id}"


def other_command_keys(command_id: str, seat: int | None) -> tuple[str, ...]:
    """The fields the same command id has when another sender used it: the store refuses a
    command whose id one of them holds (``command/id_taken``), so that an id stays one
    command's in the table's events.

    >>> other_command_keys("c-0001-abcd", 1)
    ('0:c-0001-abcd', 'c-0001-abcd')
    >>> other_command_keys("c-0001-abcd", None)
    ('0:c-0001-abcd', '1:c-0001-abcd')
    """
    senders = (0, 1, None)
    return tuple(command_key(command_id, other) for other in senders if other != seat)


def results_channel(namespace: str) -> str:
    """Return the channel of result hints, a JSON object ``{"table_id", "command_id",
    "result"}`` a line: ``<ns>:results`` (the engine workers publish, the gateways listen)."""
    return f"{namespace}:results"


def views_channel(namespace: str) -> str:
    """Return the channel of view hints, ``<table_id> <version>`` a line: ``<ns>:views`` (the
    engine workers publish the views their appends stored, the projectors the views they
    write, and the gateways listen)."""
    return f"{namespace}:views"


def hint_dropped(share: float) -> bool:
    """Say whether to drop a hint message on purpose, for about ``share`` of them
    (``Settings.drop_hints``, a fault for tests: every waiter must finish without hints)."""
    return share > 0 and random.random() < share


def _glob_escape(text: str) -> str:
    return _GLOB.sub(r"\\\1", text)


@dataclass(frozen=True)
class KeySpace:
    """Key names of one deployment: namespace prefix ``ns`` and the number of ``shards``.

    >>> ks = KeySpace()
    >>> ks.shard_of("table-1"), ks.events("table-1")
    (1, 'cq:{s01}:t:table-1:ev')
    >>> ks.feed(1), ks.cmdids(1), ks.shard_key(1, "view", "lobby")
    ('cq:{s01}:feed', 'cq:{s01}:cmdids', 'cq:{s01}:view:lobby')
    """

    ns: str = DEFAULT_NS
    shards: int = DEFAULT_SHARDS

    def __post_init__(self) -> None:
        if not _NS.fullmatch(self.ns):
            raise ValueError(f"invalid key namespace {self.ns!r}")
        if not 1 <= self.shards <= 10_000:
            raise ValueError(f"shards must be 1..10000, got {self.shards}")

    # -- shards -------------------------------------------------------------------------------
    def shard_of(self, table_id: str) -> int:
        """The shard of a table: ``crc32(utf8(table_id)) % shards``."""
        return zlib.crc32(table_id.encode("utf-8")) % self.shards

    def tag(self, shard: int) -> str:
        """The hash tag of a shard, ``{s07}``."""
        if not 0 <= shard < self.shards:
            raise ValueError(f"shard {shard} out of range 0..{self.shards - 1}")
        return f"{{s{shard:02d}}}"

    @cached_property
    def _prefixes(self) -> tuple[str, ...]:
        return tuple(f"{self.ns}:{{s{s:02d}}}" for s in range(self.shards))

    def shard_prefix(self, shard: int) -> str:
        """``<ns>:{sNN}``: the start of every key of the shard."""
        if not 0 <= shard < self.shards:
            raise ValueError(f"shard {shard} out of range 0..{self.shards - 1}")
        return self._prefixes[shard]

    def shard_key(self, shard: int, *parts: str) -> str:
        """``<ns>:{sNN}:<part>:<part>…``: any other key of a shard (views, checkpoints, …)."""
        if not parts:
            raise ValueError("shard_key needs at least one part")
        return ":".join((self.shard_prefix(shard), *parts))

    # -- per table ----------------------------------------------------------------------------
    def table_key(self, table_id: str, suffix: str) -> str:
        """``<ns>:{sNN}:t:<table>:<suffix>`` on the table's own shard."""
        check_table_id(table_id)
        return f"{self.shard_prefix(self.shard_of(table_id))}:t:{table_id}:{suffix}"

    def events(self, table_id: str) -> str:
        """The table's event stream."""
        return self.table_key(table_id, "ev")

    def head(self, table_id: str) -> str:
        """The table's head hash (version, last hash, status)."""
        return self.table_key(table_id, "head")

    def secret(self, table_id: str) -> str:
        """The table's secret hash: its deal seeds, ``seed:<n>`` (written only atomically with
        an append).  Stores before :meth:`tokens` kept the token digests here too."""
        return self.table_key(table_id, "secret")

    def tokens(self, table_id: str) -> str:
        """The table's hash of seat-token digests, ``token:<seat>`` (written only atomically
        with an append): apart from the seeds, so that the gateway, which checks tokens, need
        not be able to read a seed (``docs/deploy.md``, "Redis users")."""
        return self.table_key(table_id, "tokens")

    def command_ids(self, table_id: str) -> str:
        """The table's processed command ids: hash :func:`command_key` → ``<first> <last>
        <result>``, kept a while after the match ends (``RedisEventStore``)."""
        return self.table_key(table_id, "cmdids")

    def table_view(self, table_id: str, *parts: str) -> str:
        """``<ns>:{sNN}:view:<table>[:part…]``: a read model of one table."""
        return self.shard_key(self.shard_of(check_table_id(table_id)), "view", table_id, *parts)

    # -- per shard ----------------------------------------------------------------------------
    def feed(self, shard: int) -> str:
        """The shard feed stream: one entry per append."""
        return self.shard_key(shard, "feed")

    def cmdids(self, shard: int) -> str:
        """The shard's hash ``<table>|<command id>`` → result, where stores before
        :meth:`command_ids` recorded every table's commands: read, never written, so that a
        command recorded there is still answered once."""
        return self.shard_key(shard, "cmdids")

    def cmd(self, shard: int) -> str:
        """The shard's command intake stream."""
        return self.shard_key(shard, "cmd")

    def view(self, shard: int, *parts: str) -> str:
        """A read model key of the shard: ``<ns>:{sNN}:view:<part>…``."""
        return self.shard_key(shard, "view", *parts)

    def ckpt(self, shard: int, projector: str) -> str:
        """A projector's checkpoint on the shard."""
        return self.shard_key(shard, "ckpt", projector)

    def timers(self, shard: int) -> str:
        """The shard's sorted set of deadlines."""
        return self.shard_key(shard, "timers")

    def sealed(self, shard: int) -> str:
        """The shard's sorted set of finished tables, scored by the time (ms) their match
        ended: written by the append that ends a match, emptied by the archiver."""
        return self.shard_key(shard, "sealed")

    def lobby(self, part: str) -> str:
        """``<ns>:{lobby}:<part>``: a key of the lobby (``waiting``, ``running``, ``rows``), all
        in one slot of their own (``services/lobby/listing.py``)."""
        return f"{self.ns}:{{lobby}}:{part}"

    def layout(self) -> str:
        """``<ns>:layout``: a hash of the changes of key layout done on every table of the
        namespace (``services/store/token_digests.py``)."""
        return f"{self.ns}:layout"

    def cmdid_field(self, table_id: str, command_id: str) -> str:
        """The field of a command in the shard's :meth:`cmdids`: ``<table>|<command id>``."""
        if not command_id or len(command_id) > 128:
            raise ValueError(f"invalid command id {command_id!r}")
        return f"{table_id}|{command_id}"

    # -- scanning -----------------------------------------------------------------------------
    def head_pattern(self) -> str:
        """SCAN MATCH pattern of every table head of this namespace."""
        return f"{_glob_escape(self.ns)}:{{s*}}:t:*:head"

    def table_of_head(self, key: str) -> str | None:
        """The table id of a head key of this namespace, else ``None``."""
        start = f"{self.ns}:{{s"
        if not (key.startswith(start) and key.endswith(":head")):
            return None
        rest = key[len(start) :]
        close = rest.find("}:t:")
        if close < 0 or not rest[:close].isdigit():
            return None
        table_id = rest[close + 4 : -5]
        if not _TABLE_ID.fullmatch(table_id) or self.head(table_id) != key:
            return None
        return table_id
