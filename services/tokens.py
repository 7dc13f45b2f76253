"""Seat tokens: a bearer secret per seat, derived by HMAC so that only its hash is stored.

``token = base64url(HMAC-SHA256(secret, "<table>:<seat>:<join command id>"))``.  The join
stores ``sha256(token)`` in the table's secret hash (atomically with ``player_joined``); the
gateway recomputes the token for the joining client, also when a join is retried with the same
command id, and checks a presented token by its hash.  The secret comes from
``CONQUIAN_TOKEN_SECRET`` or, when unset, is created once in Redis (``<ns>:token-secret``) so
that every process of a deployment shares it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from redis.asyncio import Redis


class SeatTokens:
    """Mints and checks seat tokens with one deployment secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("a token secret needs at least 16 bytes")
        self._secret = secret

    def token(self, table_id: str, seat: int, command_id: str) -> str:
        """Return the token of the seat that the join ``command_id`` took."""
        mac = hmac.new(self._secret, f"{table_id}:{seat}:{command_id}".encode(), hashlib.sha256)
        return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()

    def token_hash(self, table_id: str, seat: int, command_id: str) -> str:
        """Return the SHA-256 hex of the token (what the table's secret hash stores)."""
        return hash_token(self.token(table_id, seat, command_id))


def hash_token(token: str) -> str:
    """Return the SHA-256 hex of a presented token."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, stored_hash: str | None) -> bool:
    """Say whether a presented token has the stored hash (constant-time comparison)."""
    return stored_hash is not None and hmac.compare_digest(hash_token(token), stored_hash)


async def load_secret(redis: Redis, namespace: str, configured: str | None) -> bytes:
    """Return the configured secret, else the deployment's secret in Redis (created once)."""
    if configured:
        return configured.encode()
    key = f"{namespace}:token-secret"
    await redis.set(key, secrets.token_hex(32), nx=True)
    value = await redis.get(key)
    if value is None:
        raise RuntimeError(f"could not read the token secret at {key}")
    return value if isinstance(value, bytes) else str(value).encode()
