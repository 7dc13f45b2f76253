"""Shard leases: a projector follows a shard while it holds ``<ns>:{sNN}:projlease``."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from services.projector.core import ProjectorCore
from services.projector.records import ProjectorBusy


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
        for s in self.owned - held:
            self._lose(s)
        for s in sorted(held - self.owned):
            self.log.info("lease_taken", shard=s)
        self.owned = held | (self.owned - set(wanted))
        return set(self.owned)

    async def release(self) -> None:
        """Give back every lease this projector holds."""
        if self.owner is None or not self.owned:
            self.owned = set()
            return
        owner = self.owner
        await self._run(
            [self._script("release", [self.lease_key(s)], [owner]) for s in sorted(self.owned)]
        )
        self.owned = set()

    def _lose(self, shard: int) -> None:
        """Forget a shard whose lease went to another projector."""
        self.log.warning("lease_lost", shard=shard)
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
