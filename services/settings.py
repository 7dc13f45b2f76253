"""Every setting of every service in one place, read from the environment.

Variables are prefixed ``CONQUIAN_`` (``CONQUIAN_SHARDS=32``); ``REDIS_URL`` is read as is.
"""

from __future__ import annotations

import os
import secrets
import socket
from functools import cached_property

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.store.keys import KeySpace


class Settings(BaseSettings):
    """Settings shared by the engine worker, projector, gateway, bots and turn clock."""

    model_config = SettingsConfigDict(env_prefix="CONQUIAN_", extra="ignore", frozen=True)

    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        validation_alias=AliasChoices("REDIS_URL", "CONQUIAN_REDIS_URL"),
    )
    namespace: str = "cq"
    shards: int = Field(default=16, ge=1, le=1024)
    http_host: str = "127.0.0.1"
    http_port: int = Field(default=8000, ge=0, le=65535)
    worker_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    )
    token_secret: str | None = None
    log_level: str = "INFO"
    batch_size: int = Field(default=600, ge=1, le=10_000)
    claim_idle_ms: int = Field(default=5_000, ge=100)
    command_retention_ms: int = Field(default=10_000, ge=0)
    """How long an engine worker keeps an acknowledged command in its stream before its sweep
    (every ``claim_idle_ms``) deletes it (``services.engine_worker.consumed``)."""
    finished_command_ids_ms: int = Field(default=3_600_000, ge=0)
    """How long a table's command ids stay once its match is over (0: for ever); a duplicate
    sent later is decided again and refused (``services.store.redis_store``)."""
    lease_ms: int = Field(default=1_500, ge=1_000)
    """Shard lease period of the engine workers and projectors: a dead owner's shards are
    taken over within about this long (docs/services.md, "Taking over a dead worker's shards")."""
    projector_linger_ms: int = Field(default=50, ge=0, le=5_000)
    """How long a projector waits after a round that found every view current (the engine
    workers store views with their appends): its next round then reads a bigger batch."""
    result_wait_ms: int = Field(default=5_000, ge=0)
    resume_gap: int = Field(default=500, ge=1)
    archive_dir: str | None = None
    """The folder of the archive of finished tables (``docs/archive.md``); unset, tables stay in
    Redis and ``conquian serve`` runs no archiver.  The gateway, ``conquian audit`` and
    ``conquian replay`` read archived tables from it."""
    archive_after_ms: int = Field(default=3_600_000, ge=0)
    """How long after its match ended a table is archived: keep it at least
    ``finished_command_ids_ms``, so that a late retry is still answered from the table's
    command ids."""
    archive_interval_ms: int = Field(default=60_000, ge=100)
    """How often the archiver looks for tables to archive."""
    drop_hints: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="fraction of hint messages the engine workers and projectors drop instead "
        "of publishing: a fault for tests that no waiter rests on hints; 0 in production",
    )
    rate_seat_per_s: float = 50.0
    """Commands a second one seat may send, HTTP and WebSocket together (0: no limit); a burst
    of ``rate_seat_burst`` goes at once (``services.gateway.rate_limit``, ``docs/api.md``)."""
    rate_seat_burst: float = Field(default=100.0, ge=1.0)
    rate_address_per_s: float = 200.0
    """Creates, joins and commands a second from one client address (0: no limit)."""
    rate_address_burst: float = Field(default=400.0, ge=1.0)
    rate_create_per_s: float = 2.0
    """Tables a second one client address may create (0: no limit)."""
    rate_create_burst: float = Field(default=20.0, ge=1.0)
    rate_exempt: str = "127.0.0.0/8,::1/128"
    """Addresses or networks (comma-separated) whose requests are not limited: loopback by
    default, so that ``make run``, the tests and the load tool on this machine are not
    throttled.  Behind a proxy, have uvicorn take the client's address from it
    (``--proxy-headers --forwarded-allow-ips``)."""
    insecure_deal_key: str | None = Field(
        default=None,
        description="hex key that makes decks predictable; benchmarks and tests only",
    )

    @cached_property
    def keys(self) -> KeySpace:
        """Return the key scheme of this deployment."""
        return KeySpace(ns=self.namespace, shards=self.shards)


def load_settings(**overrides: object) -> Settings:
    """Return the settings from the environment, with explicit overrides on top."""
    return Settings(**overrides)  # type: ignore[arg-type]
