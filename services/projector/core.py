"""The projector's shared machinery: its state, the keys it writes, the fold cache, and running
its scripts together (``services.store.scripts.run_scripts``: EVALSHA, loaded on NOSCRIPT)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript

from services.log import get_logger
from services.lru import Lru
from services.projector.records import ShardWrite
from services.projector.scripts import READ_ONLY, SCRIPTS
from services.store.keys import KeySpace, hint_dropped, views_channel
from services.store.redis_store import READ_CHUNK
from services.store.scripts import ReadOnlyScript, ScriptCall, run_scripts
from services.store.stream_watch import StreamWatch
from services.tables.stored_parts import STORED_PARTS, TableFold

CHECKPOINT = "projector"
"""The projector's name in its checkpoint key ``<ns>:{sNN}:ckpt:projector``."""
LEASE = "projlease"
"""The last part of a shard's projector lease key ``<ns>:{sNN}:projlease``."""


class ProjectorCore:
    """A projector's state and the helpers every part of it uses (see :class:`Projector`)."""

    def __init__(
        self,
        client: Redis,
        keys: KeySpace,
        *,
        owner: str | None = None,
        batch_size: int = 200,
        cache_size: int = 50_000,
        lease_ms: int = 10_000,
        read_chunk: int = READ_CHUNK,
        clock: Callable[[], float] = time.time,
        drop_hints: float = 0.0,
    ) -> None:
        self.client = client
        self.drop_hints = drop_hints
        """The fraction of its hint messages the projector drops (a fault for tests)."""
        self.keys = keys
        self.owner = owner
        self.batch_size = batch_size
        self.lease_ms = lease_ms
        self.read_chunk = read_chunk
        self.clock = clock
        self.channel = views_channel(keys.ns)
        self.positions: dict[int, str] = {}
        """The checkpoint of each shard as this projector knows it ('' when none yet)."""
        self.owned: set[int] = set()
        """The shards whose lease this projector holds (with an ``owner``)."""
        self.gaps: dict[int, str] = {}
        """Shards whose feed was trimmed past the checkpoint: the newest id trimmed away."""
        self._claimed_at = 0.0
        self._cache: Lru[str, TableFold] = Lru(cache_size)
        self._feed_shard = {keys.feed(s): s for s in range(keys.shards)}
        self.watch = StreamWatch(client) if isinstance(client, RedisCluster) else None
        """A cluster's wait on the feeds (:mod:`services.store.stream_watch`); None on one Redis."""
        self.log = get_logger("projector", owner=owner)
        self._scripts = {
            name: (ReadOnlyScript if name in READ_ONLY else AsyncScript)(client, source)
            for name, source in SCRIPTS.items()
        }  # EVALSHA_RO for those that write nothing: read permission on their keys is enough

    # --- keys ----------------------------------------------------------------------------------

    def checkpoint_key(self, shard: int) -> str:
        """``<ns>:{sNN}:ckpt:projector``."""
        return self.keys.ckpt(shard, CHECKPOINT)

    def lease_key(self, shard: int) -> str:
        """``<ns>:{sNN}:projlease``."""
        return self.keys.shard_key(shard, LEASE)

    def view_keys(self, table_id: str) -> list[str]:
        """The keys of a table's stored view parts, in the order of ``STORED_PARTS``."""
        base = self.keys.table_view(table_id)  # = table_view(table_id, part) without the part
        return [f"{base}:{part}" for part in STORED_PARTS]

    def cached(self, table_id: str) -> TableFold | None:
        """Return the folded table in the cache, if any."""
        return self._cache.get(table_id)

    # --- scripts -------------------------------------------------------------------------------

    async def _run(self, calls: Sequence[ScriptCall]) -> list[Any]:
        """Run script calls together (:func:`run_scripts`); errors come back in place of
        replies."""
        return await run_scripts(self.client, calls)

    def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> ScriptCall:
        return self._scripts[name], keys, args

    def reset(self) -> None:
        """Forget the checkpoints and every folded table (after a round failed half-way, when
        the cache may be ahead of what was written): the next round starts from Redis again."""
        self.positions.clear()
        self._cache.clear()

    def _forget(self, tables: Iterable[str]) -> None:
        for t in tables:
            self._cache.pop(t, None)

    def _remember(self, fold: TableFold) -> None:
        self._cache.remember(fold.table_id, fold)

    def _write_call(self, w: ShardWrite) -> ScriptCall:
        keys = [self.checkpoint_key(w.shard), self.lease_key(w.shard), *w.views]
        hints = "\n".join(w.hints)  # one message per shard write (docs/services.md)
        if hint_dropped(self.drop_hints):  # a fault for tests
            hints = ""  # '' publishes nothing
        args: list[Any] = [
            w.expected,
            w.position,
            self.owner or "",
            self.channel,
            hints,
            len(STORED_PARTS),
        ]
        return self._script("write", keys, [*args, *w.views.values()])
