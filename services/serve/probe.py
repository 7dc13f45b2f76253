"""The health probes of compose and Kubernetes: Redis answers, an engine worker takes part.

    python -m services.serve.probe redis     # 0 when Redis answers PING (one server or the cluster)
    python -m services.serve.probe worker    # 0 when this worker (CONQUIAN_WORKER_ID) heartbeated
                                       # in <ns>:workers within one lease period

Both read the process's own settings (``services/settings.py``) and open a synchronous client
the way the services do: a cluster is found from one node's address, so a key such as
``<ns>:workers`` is asked of the master that holds it. ``docs/deploy.md`` lists the probes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import redis

from services.settings import Settings, load_settings
from services.store.client import is_cluster
from services.store.shard_leases import registry_key

TIMEOUT_S = 3.0


def sync_client(url: str) -> Any:
    """A synchronous client of ``url`` with short timeouts: a ``RedisCluster`` on a cluster."""
    options: dict[str, Any] = {"socket_timeout": TIMEOUT_S, "socket_connect_timeout": TIMEOUT_S}
    if is_cluster(url):
        return redis.RedisCluster.from_url(url, **options)
    return redis.Redis.from_url(url, **options)


def redis_answers(settings: Settings) -> bool:
    """Whether Redis answers PING (every master, on a cluster)."""
    client = sync_client(settings.redis_url)
    try:
        return bool(client.ping())
    finally:
        client.close()


def worker_ready(settings: Settings) -> bool:
    """Whether the worker ``settings.worker_id`` heartbeated within one lease period (by the
    Redis clock, as the heartbeat script records it)."""
    client = sync_client(settings.redis_url)
    try:
        seen = client.zscore(registry_key(settings.keys), settings.worker_id)
        seconds, micros = client.time()
    finally:
        client.close()
    return seen is not None and seconds * 1000 + micros // 1000 - seen < settings.lease_ms


PROBES = {"redis": redis_answers, "worker": worker_ready}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the probe named in ``argv``; 0 when it holds, 1 when not or on any error, 2 for a
    name that is no probe."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in PROBES:
        sys.stderr.write(f"usage: python -m services.serve.probe {{{','.join(PROBES)}}}\n")
        return 2
    try:
        return 0 if PROBES[args[0]](load_settings()) else 1
    except (redis.RedisError, OSError) as exc:
        sys.stderr.write(f"probe {args[0]}: {exc!r}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
