"""Shard leases: a projector follows a shard while it holds ``<ns>:{sNN}:projlease``; the
running projectors share the shards (each holds at most its fair share of the live ones)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from services.projector.core import ProjectorCore
from services.projector.records import ProjectorBusy
from services.store.shard_leases import fair_share, heartbeat, preference

REGISTRY = "projectors"
"""The last part of the projectors' heartbeat registry ``<ns>:projectors`` (a sorted set)."""


class ProjectorLeases(ProjectorCore):
    """Takes, renews, checks and gives back the shard leases (with an ``owner``)."""

    async def claim(self, shards: Iterable[int] | None = None) -> set[int]:
        """Take or renew the lease of each shard that is free or ours; return the shards held.

        Without an ``owner`` every shard asked for counts as held.  A shard lost since the last
        claim drops its checkpoint and its tables from memory.
        """
        wanted = list(range(self.keys.shards) if shards is None else shards)
        if self.owner is None:
            self.owned = set(wanted)
            return set(self.owned)
        replies = await self._run(
            [
                self._script("lease", [self.lease_key(s)], [self.owner, self.lease_ms])
                for s in wanted
            ]
        )
        self._claimed_at = time.monotonic()
        held = {s for s, ok in zip(wanted, replies, strict=True) if ok == 1}
        for s in (self.owned & set(wanted)) - held:  # asked for and not ours any more
            self._lose(s)
        for s in sorted(held - self.owned):
            self.log.info("lease_taken", shard=s)
        self.owned = held | (self.owned - set(wanted))
        return set(self.owned)

    @property
    def registry_key(self) -> str:
        """The sorted set of projector heartbeats: ``<ns>:projectors``."""
        return f"{self.keys.ns}:{REGISTRY}"

    async def balance(self) -> set[int]:
        """Heartbeat, renew the leases held, then take free shards up to the fair share of the
        live projectors (``ceil(shards / live)``) or give back the ones above it; return the
        shards held.  Without an ``owner`` every shard is held.

        Run every third of ``lease_ms`` by each projector: two projectors split the shards, and
        when one stops (or dies: its heartbeat and leases lapse) the other takes them all.
        """
        if self.owner is None:
            return await self.claim()
        live = await heartbeat(self.client, self.registry_key, self.owner, self.lease_ms)
        share = fair_share(self.keys.shards, live)
        held = preference(self.owner, await self.claim(sorted(self.owned)) if self.owned else ())
        if len(held) > share:
            await self.release(held[share:])
            self.log.info("leases_released", shards=sorted(held[share:]), share=share, live=live)
        elif len(held) < share:
            async with self.client.pipeline(transaction=False) as pipe:  # a GET a shard's slot
                for s in range(self.keys.shards):
                    pipe.get(self.lease_key(s))
                holders = await pipe.execute()
            free = [s for s in preference(self.owner, range(self.keys.shards)) if not holders[s]]
            if free:
                await self.claim(free[: share - len(held)])
        return set(self.owned)

    async def release(self, shards: Iterable[int] | None = None) -> None:
        """Give back the leases of ``shards`` (default: every one this projector holds)."""
        giving = sorted(self.owned if shards is None else self.owned & set(shards))
        if self.owner is not None and giving:
            owner = self.owner
            await self._run([self._script("release", [self.lease_key(s)], [owner]) for s in giving])
        for s in giving:
            self._drop(s)

    async def deregister(self) -> None:
        """Leave the projectors' registry (a clean stop): the others' share grows at once."""
        if self.owner is not None:
            await self.client.zrem(self.registry_key, self.owner)

    def _lose(self, shard: int) -> None:
        """Forget a shard whose lease went to another projector."""
        self.log.warning("lease_lost", shard=shard)
        self._drop(shard)

    def _drop(self, shard: int) -> None:
        """Stop following a shard: its checkpoint and its tables leave memory."""
        self.owned.discard(shard)
        self.positions.pop(shard, None)
        self._forget(t for t in list(self._cache) if self.keys.shard_of(t) == shard)

    async def _claim_or_raise(self, shards: Sequence[int]) -> None:
        """Take the lease of every shard (with an ``owner``); raise ProjectorBusy when another
        projector holds some."""
        if self.owner is not None:
            held = await self.claim(shards)
            busy = [s for s in shards if s not in held]
            if busy:
                raise ProjectorBusy(busy)

    async def _keep_leases(self, shards: Sequence[int]) -> None:
        """Renew the leases of a long rebuild every third of ``lease_ms``; raise if one is lost."""
        if self.owner is None or time.monotonic() - self._claimed_at < self.lease_ms / 3000:
            return
        held = await self.claim(shards)
        lost = [s for s in shards if s not in held]
        if lost:
            raise ProjectorBusy(lost)
