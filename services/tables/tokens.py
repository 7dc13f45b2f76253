"""Seat tokens: issued for a join, stored only as their hash, checked against that hash.

``token = base64url(HMAC-SHA256(secret, "<table>:<seat>:<join command id>"))``; the engine worker
stores ``sha256(token)`` with ``player_joined``, the gateway issues the token to the joining
client (again for a retried join) and checks a presented one by its hash.  A join's wire command
id and a rematch's ids are derived from the same deployment secret, which comes from
``CONQUIAN_TOKEN_SECRET`` or is created once in Redis (``docs/api.md``, "Module notes").
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from redis.asyncio import Redis


class SeatTokens:
    """Issues seat tokens, and the ids derived with them, from one deployment secret."""

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

    def join_command_id(self, table_id: str, key: str) -> str:
        """Return the wire command id of a join whose client idempotency key is ``key``."""
        mac = hmac.new(self._secret, f"join:{table_id}:{key}".encode(), hashlib.sha256)
        return "j-" + base64.urlsafe_b64encode(mac.digest()).decode()[:22]

    def derive(self, purpose: str) -> bytes:
        """Return ``HMAC-SHA256(secret, purpose)``: ids nobody without the secret can guess
        (a rematch's table and commands, ``services.gateway.rematch``)."""
        return hmac.new(self._secret, purpose.encode(), hashlib.sha256).digest()


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
