"""A finished table read from Redis, turned into what the archive keeps (``ArchivedTable``).

What is kept and what is not (``docs/archive.md``): the head and every event as hashed; the
seat token hashes (``token:<seat>``), so that a seat can still read its finished view; the view
parts at the head's version, as stored, or folded from the events as the projector folds them
when the stored ones are missing or behind.  The deal seeds of the secret hash are not kept:
once a match is over each of them is in its deal's ``deal_revealed`` event, and a table whose
secret hash holds a seed its events do not reveal is refused (it stays in Redis).
"""

from __future__ import annotations

import orjson

from services.archive.record import ArchivedTable, ArchiveError, check_chain, from_stored
from services.archive.redis_tables import Exported
from services.store.keys import TOKEN_PREFIX
from services.tables.stored_parts import STORED_PARTS, TableFold, version_of
from services.tables.table import SEED_PREFIX, FoldError

__all__ = ["FINISHED", "prepare"]

FINISHED = "over"
"""The head status of a table whose match has ended: the only tables archived."""


def prepare(exported: Exported) -> ArchivedTable:
    """The archived form of a table read whole from Redis, its chain checked.

    Raises :class:`ArchiveError`: ``archive/not_finished`` (its status is not ``over``),
    ``archive/unreadable`` (a stored body the store cannot decode), ``archive/broken_chain``
    or ``archive/head_mismatch`` (its events do not chain to its head),
    ``archive/unrevealed_seed`` (a seed of its secret hash is not revealed by its events),
    ``archive/no_views`` (its views can be neither read nor folded).
    """
    t = exported.table_id
    if exported.head.status != FINISHED:
        raise ArchiveError("archive/not_finished", f"table {t} is {exported.head.status!r}")
    if exported.problem is not None:
        raise ArchiveError("archive/unreadable", exported.problem)
    _check_seeds_revealed(exported)
    tokens = {k: v for k, v in exported.secrets.items() if k.startswith(TOKEN_PREFIX)}
    table = from_stored(t, exported.head, exported.events, tokens, _views(exported))
    check_chain(table, bodies=False)  # the bodies were just written canonically from Redis's
    return table


def _check_seeds_revealed(exported: Exported) -> None:
    """Every seed in the secret hash must be the one its deal's ``deal_revealed`` holds."""
    revealed = {
        e.body.get("number"): e.body.get("seed")
        for e in exported.events
        if e.body.get("type") == "deal_revealed"
    }
    for field, seed in exported.secrets.items():
        if not field.startswith(SEED_PREFIX):
            continue
        number = field[len(SEED_PREFIX) :]
        if not number.isdigit() or revealed.get(int(number)) != seed:
            raise ArchiveError(
                "archive/unrevealed_seed",
                f"table {exported.table_id}: the seed of deal {number} is not revealed by its "
                "events",
            )


def _views(exported: Exported) -> dict[str, str]:
    """The stored view parts when every one is at the head's version, else the fold's."""
    version = exported.head.version
    stored = exported.views
    if all(part in stored for part in STORED_PARTS):
        try:
            current = all(version_of(orjson.loads(stored[p])) == version for p in STORED_PARTS)
        except orjson.JSONDecodeError:
            current = False
        if current:
            return {p: stored[p] for p in STORED_PARTS}
    fold = TableFold(exported.table_id)
    try:
        for event in exported.events:
            fold.apply_body(event.version, event.body)
        return fold.views()
    except FoldError as exc:
        raise ArchiveError("archive/no_views", str(exc)) from exc
