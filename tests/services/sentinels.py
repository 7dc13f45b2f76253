"""A primary, its replica and one Sentinel watching them (quorum 1), on free loopback ports:
what the Sentinel tests run the service behind (``tests/services/test_sentinel.py``, and with
the Redis users ``tests/deploy/test_redis_acl.py``)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import redis

from services.redis_server import LocalRedis
from services.redis_server.local import free_port

SERVICE = "conquian"
"""The name the Sentinel monitors (``sentinel monitor``)."""


class Sentinels:
    """A primary, a replica and one Sentinel watching them.

    ``node_args`` go to both data nodes (an ACL file, ``masteruser``…), ``sentinel_lines`` into
    the Sentinel's configuration (``sentinel auth-user``…), and ``password`` is the Sentinel's
    own (``requirepass``), which its URL then carries.
    """

    def __init__(
        self,
        folder: Path,
        *,
        node_args: Mapping[str, str] | None = None,
        sentinel_lines: Sequence[str] = (),
        password: str | None = None,
    ) -> None:
        self.folder = folder
        self.password = password
        node = {"repl-diskless-sync-delay": "0", **(node_args or {})}
        self.primary = LocalRedis(folder / "a", extra_args=node, stop_timeout=10)
        self.primary.start()
        assert self.primary.port is not None
        follow = {**node, "replicaof": f"127.0.0.1 {self.primary.port}"}
        self.replica = LocalRedis(folder / "b", extra_args=follow, stop_timeout=10)
        self.replica.start()
        self.port = free_port()
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {folder}",
            *([f"requirepass {password}"] if password else []),
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary.port} 1",
            *sentinel_lines,
            f"sentinel down-after-milliseconds {SERVICE} 1000",
            f"sentinel failover-timeout {SERVICE} 10000",
        ]
        config = folder / "sentinel.conf"  # the Sentinel rewrites it: a file of its own
        config.write_text("\n".join(lines) + "\n")
        self.log = folder / "sentinel.log"
        self.process = subprocess.Popen(
            [str(self.primary.binary), str(config), "--sentinel"],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        self.client = redis.Redis(
            port=self.port, password=password, socket_timeout=2, decode_responses=True
        )
        self.wait(lambda: self.master_port() == self.primary.port and self.replicas_up() >= 1)

    def url(self, credentials: str = "") -> str:
        """The services' ``redis+sentinel://`` URL; ``credentials`` (``user:password``) are
        the primary's."""
        at = f"{credentials}@" if credentials else ""
        query = f"?sentinel_password={self.password}" if self.password else ""
        return f"redis+sentinel://{at}127.0.0.1:{self.port}/{SERVICE}/0{query}"

    def master_port(self) -> int | None:
        """The primary's port, as the Sentinel names it."""
        with contextlib.suppress(redis.RedisError):
            address = self.client.sentinel_get_master_addr_by_name(SERVICE)
            return int(address[1]) if address else None
        return None

    def replicas_up(self) -> int:
        """The replicas the Sentinel sees with their link to the primary up."""
        with contextlib.suppress(redis.RedisError):
            found = self.client.sentinel_slaves(SERVICE)
            return sum(1 for r in found if r.get("master-link-status") == "ok")
        return 0

    def wait(self, ready: Callable[[], bool], timeout: float = 30.0) -> None:
        """Wait until ``ready()``; fail with the Sentinel's log after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not ready():
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.1)

    def in_sync(self) -> bool:
        """Whether the replica has every write the primary had when asked (as the default
        user: for servers without an ACL file)."""
        primary = redis.Redis(port=self.primary.port, socket_timeout=2)
        replica = redis.Redis(port=self.replica.port, socket_timeout=2)
        try:
            wanted = primary.info("replication")["master_repl_offset"]
            info = replica.info("replication")
        finally:
            primary.close()
            replica.close()
        return info.get("master_link_status") == "up" and info["slave_repl_offset"] >= wanted

    def kill_primary(self) -> None:
        """Once the replica has caught up, SIGKILL the primary and wait until the Sentinel has
        promoted the replica (replication is asynchronous: the replica has only what it had
        received)."""
        self.wait(self.in_sync)
        assert self.primary.pid is not None
        os.kill(self.primary.pid, signal.SIGKILL)
        self.wait(lambda: self.master_port() == self.replica.port)

    def stop(self) -> None:
        """Stop the Sentinel and both servers."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(10)
        self.client.close()
        self.replica.stop()
        self.primary.stop()
