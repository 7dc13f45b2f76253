"""A private Redis Cluster on 127.0.0.1: several :class:`LocalRedis` masters joined into one.

What the cluster tests and the cluster benchmarks run on (``docs/deploy.md``, "Redis Cluster"):
no replicas, every master on a free loopback port with its own data folder, AOF on, and the
cluster bus on a second free port (``cluster-port``). The cluster is formed with plain commands
(``CLUSTER ADDSLOTSRANGE``, ``SET-CONFIG-EPOCH``, ``MEET``), so no ``redis-cli`` is needed.
A master killed with SIGKILL is started again on the same ports and folder, and rejoins from
its ``nodes.conf`` with the data of its AOF.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import redis
import structlog

from services.redis_server.errors import RedisLauncherError
from services.redis_server.local import LocalRedis, _client, free_port

log = structlog.get_logger(__name__)

SLOTS = 16384


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """The slots of each of ``masters`` masters: equal contiguous ranges, first to last.

    >>> slot_ranges(3)
    [(0, 5460), (5461, 10922), (10923, 16383)]
    """
    if masters < 1:
        raise ValueError("a cluster needs at least one master")
    bounds = [round(i * SLOTS / masters) for i in range(masters + 1)]
    bounds[-1] = SLOTS
    return [(bounds[i], bounds[i + 1] - 1) for i in range(masters)]


class LocalCluster:
    """``masters`` private Redis servers joined into a Redis Cluster without replicas.

    ``node_timeout_ms`` is ``cluster-node-timeout``: how long a silent master takes to be
    marked failed by the others. ``admin`` (user, password) is the user the launcher forms and
    watches the cluster as, for nodes given an ACL file in ``extra_args`` (``aclfile``), where
    the default user may not run ``CLUSTER``. Use as a context manager, or :meth:`start` and
    :meth:`stop`.
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        masters: int = 3,
        binary: Path | str | None = None,
        node_timeout_ms: int = 2000,
        startup_timeout: float = 30.0,
        extra_args: Mapping[str, str] | None = None,
        admin: tuple[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.masters = masters
        self.admin = admin
        self.startup_timeout = startup_timeout
        self.nodes: list[LocalRedis] = []
        for index in range(masters):
            args = {
                "cluster-enabled": "yes",
                "cluster-config-file": "nodes.conf",
                "cluster-node-timeout": str(node_timeout_ms),
                "cluster-port": str(free_port()),
                # Redis's default, said aloud: while a master without replica is away, the
                # cluster refuses every command, and the services wait for it to come back
                "cluster-require-full-coverage": "yes",
                **(extra_args or {}),
            }
            self.nodes.append(
                LocalRedis(
                    self.data_dir / f"node{index}",
                    binary=binary,
                    port=free_port(),
                    extra_args=args,
                    startup_timeout=startup_timeout,
                )
            )

    # ---- properties

    @property
    def ports(self) -> list[int]:
        return [node._requested_port or 0 for node in self.nodes]

    @property
    def url(self) -> str:
        """The URL of the first master: any one node's address finds the whole cluster."""
        return self.node_url(0)

    def node_url(self, index: int) -> str:
        return f"redis://127.0.0.1:{self.ports[index]}/0"

    # ---- lifecycle

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> LocalCluster:
        """Start every master and form the cluster (once: a restarted one rejoins by itself)."""
        try:
            for node in self.nodes:
                node.start()
            if not self._formed():
                self._form()
            self.wait_ok()
        except BaseException:
            self.stop()
            raise
        log.info("redis.cluster_started", ports=self.ports, data_dir=str(self.data_dir))
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def kill(self, index: int) -> None:
        """SIGKILL master ``index`` (its AOF keeps what it acknowledged; ``restart`` it)."""
        pid = self.nodes[index].pid
        if pid is None:
            raise RedisLauncherError(f"master {index} is not running")
        os.kill(pid, signal.SIGKILL)
        process = self.nodes[index]._process
        if process is not None:
            process.wait()
        log.info("redis.cluster_master_killed", index=index, pid=pid)

    def restart(self, index: int) -> None:
        """Start master ``index`` again on its ports and folder; wait until the cluster is ok."""
        node = self.nodes[index]
        node.stop()  # reaps and unlocks what a kill left
        node.start()
        self.wait_ok()
        log.info("redis.cluster_master_restarted", index=index, port=node.port)

    # ---- forming

    def _formed(self) -> bool:
        client = _client(self.ports[0], 2.0, self.admin)
        try:
            info = client.cluster("INFO")
        finally:
            client.close()
        known = int(_cluster_info(info).get("cluster_known_nodes", "1"))
        return known >= self.masters

    def _form(self) -> None:
        for index, (first, last) in enumerate(slot_ranges(self.masters)):
            client = _client(self.ports[index], 2.0, self.admin)
            try:
                _cluster(client, "ADDSLOTSRANGE", first, last)
                _cluster(client, "SET-CONFIG-EPOCH", index + 1)
            finally:
                client.close()
        first_client = _client(self.ports[0], 2.0, self.admin)
        try:
            for index, node in enumerate(self.nodes[1:], start=1):
                bus = int(node.extra_args["cluster-port"])
                _cluster(first_client, "MEET", "127.0.0.1", self.ports[index], bus)
        finally:
            first_client.close()

    def wait_ok(self, timeout: float | None = None) -> None:
        """Wait until every master says ``cluster_state:ok`` and knows every other."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        while True:
            states = [self._state(port) for port in self.ports]
            if all(state == ("ok", self.masters) for state in states):
                return
            if time.monotonic() > deadline:
                raise RedisLauncherError(f"the cluster did not become ok: {states}")
            time.sleep(0.05)

    def _state(self, port: int) -> tuple[str, int]:
        client = _client(port, 1.0, self.admin)
        try:
            with contextlib.suppress(redis.RedisError):
                info = _cluster_info(client.cluster("INFO"))
                return info.get("cluster_state", "?"), int(info.get("cluster_known_nodes", "0"))
            return "down", 0
        finally:
            client.close()


def _cluster_info(reply: object) -> dict[str, str]:
    """CLUSTER INFO as a dict of strings, whichever shape redis-py gave it."""
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _cluster(client: redis.Redis, *args: str | int) -> object:
    """Send ``CLUSTER <args>`` (redis-py types no method for these subcommands)."""
    return client.execute_command("CLUSTER", *args)  # type: ignore[no-untyped-call]
