"""deploy/redis/cluster-init.sh and cluster-node.sh run for real, on local Redis servers.

Three nodes on free loopback ports, each started through cluster-node.sh with
deploy/redis/redis.conf (only its ``dir`` moved into a temporary folder) and the cluster
settings of deploy/compose.cluster.yaml: cluster-init.sh forms the cluster, and a second run
finds it formed and changes nothing. Then every node is stopped and the peer addresses in each
nodes.conf made stale (what a container or pod created again sees): started plainly, the nodes
never meet again; started through cluster-node.sh, which looks up each peer's announced name,
they do.  Last, nodes started with the Redis users of Conquian (``CLUSTER_ACL_TEMPLATE``): the
cluster is formed as the admin user (``CLUSTER_USER``, ``REDISCLI_AUTH``), and a service user
reaches every node; with a replica a master, each replica follows its master as the user
``replica`` and takes over when its master is killed.
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from services.redis_server.local import free_port
from tests.deploy.test_redis_acl import USERS

pytestmark = pytest.mark.redis

REDIS = Path(__file__).resolve().parents[2] / "deploy" / "redis"
NAME = "localhost"
"""What each node announces (cluster-announce-hostname); getent resolves it to 127.0.0.1."""


class Nodes:
    def __init__(
        self, folder: Path, count: int = 3, passwords: dict[str, str] | None = None
    ) -> None:
        self.folder = folder
        self.passwords = passwords
        """With passwords, the nodes load deploy/redis/users.acl and the launcher is admin."""
        self.ports = [free_port() for _ in range(count)]
        self.buses = [free_port() for _ in range(count)]
        self.procs: list[subprocess.Popen[bytes]] = []
        conf = (REDIS / "redis.conf").read_text()
        self.conf = folder / "redis.conf"
        self.conf.write_text(re.sub(r"(?m)^dir /data$", f"dir {folder}", conf))

    def nodes_conf(self, i: int) -> Path:
        return self.folder / f"n{i}" / "nodes.conf"

    def start(self, *, through_script: bool) -> None:
        for i, (port, bus) in enumerate(zip(self.ports, self.buses, strict=True)):
            (self.folder / f"n{i}").mkdir(exist_ok=True)
            runner = ["sh", str(REDIS / "cluster-node.sh")] if through_script else ["redis-server"]
            self.procs.append(
                subprocess.Popen(
                    [
                        *runner,
                        str(self.conf),
                        *("--port", str(port), "--bind", "127.0.0.1"),
                        *("--dir", str(self.folder / f"n{i}"), "--cluster-port", str(bus)),
                        *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
                        *("--cluster-node-timeout", "2000"),
                        *("--cluster-require-full-coverage", "no"),
                        *("--cluster-preferred-endpoint-type", "hostname"),
                        *("--cluster-announce-hostname", NAME),
                    ],
                    env={
                        "PATH": "/usr/local/bin:/usr/bin:/bin",
                        "CLUSTER_NODES_CONF": str(self.nodes_conf(i)),
                        **self._acl_env(),
                    },
                    stdout=subprocess.DEVNULL,
                )
            )
        for port in self.ports:
            deadline = time.monotonic() + 20
            while not self._pong(port):
                assert time.monotonic() < deadline, f"node on {port} does not answer"
                time.sleep(0.1)

    def _acl_env(self) -> dict[str, str]:
        if self.passwords is None:
            return {}
        env = {f"CONQUIAN_REDIS_PASSWORD_{u.upper()}": p for u, p in self.passwords.items()}
        return {**env, "CLUSTER_ACL_TEMPLATE": str(REDIS / "users.acl")}

    def client(self, port: int, user: str = "admin") -> redis.Redis:
        """A client of one node, as ``user`` where the nodes have users."""
        if self.passwords is None:
            return redis.Redis(port=port, decode_responses=True)
        password = self.passwords[user]
        return redis.Redis(port=port, username=user, password=password, decode_responses=True)

    def _pong(self, port: int) -> bool:
        try:
            with redis.Redis(port=port, socket_timeout=1) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(timeout=30)
        self.procs = []

    def states(self) -> list[str]:
        out = []
        for port in self.ports:
            with self.client(port) as client:
                out.append(client.cluster("INFO")["cluster_state"])
        return out

    def init(self, admin: bool = True, replicas: int = 0) -> subprocess.CompletedProcess[str]:
        # One node by address, the others by name: the script resolves names itself.
        addresses = [f"127.0.0.1:{self.ports[0]}", *(f"{NAME}:{p}" for p in self.ports[1:])]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "CLUSTER_WAIT_SECONDS": "30"}
        env["CLUSTER_REPLICAS"] = str(replicas)
        if self.passwords is not None and admin:
            env.update(CLUSTER_USER="admin", REDISCLI_AUTH=self.passwords["admin"])
        return subprocess.run(
            ["sh", str(REDIS / "cluster-init.sh"), *addresses],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[Nodes]:
    for program in ("redis-server", "redis-cli", "getent"):
        assert shutil.which(program), f"{program} is needed"
    running = Nodes(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def linked(nodes: Nodes) -> bool:
    """Whether every node is connected to every peer at its present address, none failing."""
    for port in nodes.ports:
        with nodes.client(port) as client:
            lines = client.execute_command("CLUSTER", "NODES").splitlines()
        peers = [line.split() for line in lines if "myself" not in line]
        if len(peers) != len(nodes.ports) - 1:
            return False
        for peer in peers:
            address, flags, link = peer[1], peer[2], peer[7]
            if not address.startswith("127.0.0.1:") or "fail" in flags or link != "connected":
                return False
    return True


def settle(nodes: Nodes, within: float) -> bool:
    """Whether the nodes are linked within ``within`` seconds (and stay so past the node
    timeout, when a node that cannot reach its peers would have turned its state to fail)."""
    deadline = time.monotonic() + within
    while not linked(nodes):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    time.sleep(2.5)  # cluster-node-timeout 2000
    return linked(nodes) and nodes.states() == ["ok"] * len(nodes.ports)


def test_init_forms_once_and_a_node_finds_its_moved_peers_by_name(nodes: Nodes) -> None:
    nodes.start(through_script=True)
    formed = nodes.init()
    assert formed.returncode == 0, formed.stdout + formed.stderr
    assert "creating the cluster" in formed.stdout
    assert nodes.states() == ["ok"] * 3
    again = nodes.init()
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already formed" in again.stdout and "creating" not in again.stdout

    def make_stale() -> None:
        for i in range(3):
            text = nodes.nodes_conf(i).read_text()
            stale = re.sub(r"(?m)^(\w+ )127\.0\.0\.1:", r"\g<1>127.0.0.9:", text)
            assert "127.0.0.1:" not in stale and f",{NAME}" in stale
            nodes.nodes_conf(i).write_text(stale)

    nodes.stop()
    make_stale()
    nodes.start(through_script=False)  # the control: plain redis-server
    assert not settle(nodes, within=5)
    assert nodes.states() == ["fail"] * 3
    nodes.stop()
    make_stale()
    nodes.start(through_script=True)
    assert settle(nodes, within=20)
    assert "127.0.0.9" not in nodes.nodes_conf(1).read_text()


@pytest.fixture
def nodes_with_users(tmp_path: Path) -> Iterator[Nodes]:
    running = Nodes(tmp_path, passwords={u: secrets.token_hex(16) for u in USERS})
    try:
        yield running
    finally:
        running.stop()


def test_nodes_with_the_users_of_conquian_are_formed_as_admin(nodes_with_users: Nodes) -> None:
    nodes = nodes_with_users
    nodes.start(through_script=True)
    anonymous = nodes.init(admin=False)  # the default user may PING, not run CLUSTER
    assert anonymous.returncode == 1, anonymous.stdout + anonymous.stderr
    formed = nodes.init()
    assert formed.returncode == 0, formed.stdout + formed.stderr
    assert nodes.states() == ["ok"] * 3
    with (
        redis.Redis(port=nodes.ports[0]) as default,
        pytest.raises(redis.exceptions.NoPermissionError),
    ):
        default.get("cq:{s00}:view:t-1:public")
    passwords = nodes.passwords
    assert passwords is not None
    gateway = redis.cluster.RedisCluster(
        host="127.0.0.1", port=nodes.ports[0], username="gateway", password=passwords["gateway"]
    )
    try:  # the slot map and the command table, then a read on every master
        keys = [f"cq:{{s{shard:02d}}}:view:t-1:public" for shard in range(16)]
        assert {gateway.keyslot(k) // 5462 for k in keys} == {0, 1, 2}
        assert [gateway.get(k) for k in keys] == [None] * 16
        with pytest.raises(redis.exceptions.NoPermissionError):
            gateway.set(keys[0], "{}")
    finally:
        gateway.close()


def test_replicas_follow_and_take_over_as_the_replica_user(tmp_path: Path) -> None:
    """Six nodes with the users of Conquian, a replica a master: every replica's link to its
    master is up (it authenticates as ``replica``, which may only replicate), a write reaches
    the replica, and when a master is killed its replica takes over with the write."""
    passwords = {u: secrets.token_hex(16) for u in USERS}
    nodes = Nodes(tmp_path, count=6, passwords=passwords)
    try:
        nodes.start(through_script=True)
        formed = nodes.init(replicas=1)
        assert formed.returncode == 0, formed.stdout + formed.stderr
        roles = {port: _replication(nodes, port) for port in nodes.ports}
        replicas = [port for port, info in roles.items() if info["role"] == "slave"]
        assert len(replicas) == 3
        deadline = time.monotonic() + 30
        while not all(_replication(nodes, p)["master_link_status"] == "up" for p in replicas):
            assert time.monotonic() < deadline, [_replication(nodes, p) for p in replicas]
            time.sleep(0.2)
        key = "cq:{s00}:view:t-1:public"
        admin = redis.cluster.RedisCluster(
            host="127.0.0.1", port=nodes.ports[0], username="admin", password=passwords["admin"]
        )
        try:  # the master that holds the key, as the slot map says, and its replica
            master = admin.get_node_from_key(key).port
        finally:
            admin.close()
        (replica,) = [p for p in replicas if int(roles[p]["master_port"]) == master]
        with nodes.client(master) as client:
            client.set(key, "kept")
            assert client.wait(1, 5000) == 1  # the replica has it
        with nodes.client(replica) as client:
            client.execute_command("READONLY")
            assert client.get(key) == "kept"
        for port in nodes.ports:
            with nodes.client(port) as client:
                assert client.acl_log() == [], port  # nothing the replicas did was refused
        nodes.procs[nodes.ports.index(master)].kill()
        deadline = time.monotonic() + 30
        while _replication(nodes, replica)["role"] != "master":
            assert time.monotonic() < deadline, "the replica did not take over"
            time.sleep(0.2)
        with nodes.client(replica) as client:
            assert client.get(key) == "kept"
    finally:
        nodes.stop()


def _replication(nodes: Nodes, port: int) -> dict[str, str]:
    with nodes.client(port) as client:
        return {k: str(v) for k, v in client.info("replication").items()}
