"""Seat tokens at the gateway: minting them for a join and finding the seat of a presented one.

Tokens are kept only as hashes, compared in constant time; a join's wire command id is derived
from its private key.  Why: ``docs/api.md`` ("Module notes").
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from redis.asyncio import Redis

from services.archive.reads import ArchiveReader
from services.lru import Lru
from services.store.keys import KeySpace
from services.table import SEED_KEY, TOKEN_KEY
from services.tokens import SeatTokens, hash_token, token_matches

SEATS = (0, 1)


class SeatAuth:
    """Mints seat tokens and finds the seat of a presented token on a table."""

    def __init__(
        self,
        redis: Redis,
        keys: KeySpace,
        secret: bytes,
        cache_size: int = 50_000,
        archived: ArchiveReader | None = None,
    ) -> None:
        self.redis = redis
        self.keys = keys
        self.archived = archived
        self.tokens = SeatTokens(secret)
        self._secret = secret
        self._cache: Lru[tuple[str, str], int] = Lru(cache_size)

    def join_command_id(self, table_id: str, key: str) -> str:
        """Return the wire command id of a join whose client idempotency key is ``key``."""
        mac = hmac.new(self._secret, f"join:{table_id}:{key}".encode(), hashlib.sha256)
        return "j-" + base64.urlsafe_b64encode(mac.digest()).decode()[:22]

    def derive(self, purpose: str) -> bytes:
        """Return ``HMAC-SHA256(secret, purpose)``: ids nobody without the secret can guess
        (a rematch's table and commands, ``services.gateway.rematch``)."""
        return hmac.new(self._secret, purpose.encode(), hashlib.sha256).digest()

    def token(self, table_id: str, seat: int, join_command_id: str) -> str:
        """Return the token of the seat that the join ``join_command_id`` took."""
        return self.tokens.token(table_id, seat, join_command_id)

    def token_hash(self, table_id: str, seat: int, join_command_id: str) -> str:
        """Return what the engine worker stores for that token (its ``token_hasher``)."""
        return self.tokens.token_hash(table_id, seat, join_command_id)

    async def seat_of(self, table_id: str, token: str) -> int | None:
        """Return the seat whose token ``token`` is on the table, None when it is no seat's.

        A seat's token hash changes only when its player leaves the seat, which is possible
        only before the first deal: a match is remembered once the table has dealt (its
        secret hash holds ``seed:1``, whose presence alone is asked, never its value).
        """
        key = (table_id, hash_token(token))
        seat = self._cache.recall(key)
        if seat is not None:
            return seat
        fields = [TOKEN_KEY.format(seat=s) for s in SEATS]
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self.keys.secret(table_id), fields)
            pipe.hexists(self.keys.secret(table_id), SEED_KEY.format(number=1))
            stored, dealt = await pipe.execute()
        if self.archived is not None and all(raw is None for raw in stored):
            table = self.archived.table(table_id)  # a finished table that left Redis
            if table is not None:
                stored = [table.tokens.get(field) for field in fields]
                dealt = True
        for s, raw in zip(SEATS, stored, strict=True):
            text = raw.decode() if isinstance(raw, bytes) else raw
            if token_matches(token, text):
                if dealt:
                    self._cache.remember(key, s)
                return s
        return None


def bearer(authorization: str | None) -> str | None:
    """Return the token of an ``Authorization: Bearer <token>`` header, None if there is none."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
