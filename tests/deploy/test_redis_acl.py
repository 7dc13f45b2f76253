"""Every service under the Redis users of ``deploy/redis/users.acl``, each as its own user.

A private Redis (loopback, a free port) loads the ACL file that ``deploy/redis/render-acl.sh``
renders from the template; the engine worker, projector, bots runner, turn clock and gateway
run as processes, each with its own ``REDIS_URL``; a bot table is played to its end through the
gateway; ``conquian project --rebuild`` (projector), ``conquian audit``/``replay`` (audit) and
``conquian archive`` (archiver) run as the operator would.  Redis's ACL log must then be empty:
no service was refused anything it needed.  The same again on a three-master Redis Cluster whose
every node loads the file.  Then the users are tried at what they must not do: the gateway
cannot run the append script, delete a key or write a table (NOPERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import yaml

from services.followers.turn_clock import clock_command_id
from services.redis_server import LocalRedis
from services.redis_server.cluster import LocalCluster
from services.redis_server.local import free_port
from services.store.keys import KeySpace
from services.store.scripts import APPEND_LUA
from tests.services.sentinels import SERVICE as SENTINEL_SERVICE
from tests.services.sentinels import Sentinels

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "deploy" / "redis" / "users.acl"
RENDER = ROOT / "deploy" / "redis" / "render-acl.sh"
USERS = tuple(
    line.split()[1]
    for line in TEMPLATE.read_text().splitlines()
    if line.startswith("user ") and line.split()[1] != "default"
)
"""The users of the template that have a password: the deploy files must give each one."""
SHARDS = 4
pytestmark = pytest.mark.timeout(300)


def render(out: Path, passwords: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the deploy script that renders the ACL file, with ``passwords`` in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONQUIAN_REDIS_PASSWORD_")}
    env.update({f"CONQUIAN_REDIS_PASSWORD_{u.upper()}": p for u, p in passwords.items()})
    return subprocess.run(
        ["sh", str(RENDER), str(TEMPLATE), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


class Deployment:
    """A private Redis with the rendered ACL file, and a URL for each user."""

    def __init__(self, tmp: Path) -> None:
        self.passwords = {u: secrets.token_hex(16) for u in USERS}
        acl = tmp / "users.acl"
        done = render(acl, self.passwords)
        assert done.returncode == 0, done.stderr
        self.acl = acl
        self.ports = self._start(tmp)
        self.port = self.ports[0]

    def _start(self, tmp: Path) -> list[int]:
        server = LocalRedis(tmp / "redis", extra_args={"aclfile": str(self.acl)}, stop_timeout=10)
        self.server: LocalRedis | LocalCluster = server
        server.start()
        return [server.port]

    def __enter__(self) -> Deployment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for port in self.ports:
            admin = self.client("admin", port)
            with contextlib.suppress(redis.RedisError):
                admin.shutdown()  # the launcher's anonymous SHUTDOWN is refused: as the operator
            admin.close()
        self.server.stop()

    def url(self, user: str) -> str:
        return f"redis://{user}:{self.passwords[user]}@127.0.0.1:{self.port}/0"

    def client(self, user: str, port: int | None = None) -> redis.Redis:
        url = f"redis://{user}:{self.passwords[user]}@127.0.0.1:{port or self.port}/0"
        return redis.Redis.from_url(url, socket_timeout=10)

    def acl_log(self) -> list[dict[str, Any]]:
        """The ACL log of every server."""
        entries: list[dict[str, Any]] = []
        for port in self.ports:
            admin = self.client("admin", port)
            try:
                entries += admin.acl_log(count=100)
            finally:
                admin.close()
        return entries


class ClusterDeployment(Deployment):
    """A private three-master Redis Cluster, every node with the rendered ACL file; a user's
    URL names the first node (the services find the others)."""

    def _start(self, tmp: Path) -> list[int]:
        cluster = LocalCluster(
            tmp / "cluster",
            masters=3,
            extra_args={"aclfile": str(self.acl)},
            admin=("admin", self.passwords["admin"]),
        )
        self.server = cluster
        cluster.start()
        return cluster.ports


class SentinelDeployment(Deployment):
    """A primary and its replica, each with the rendered ACL file, and a Sentinel with a
    password of its own watching them as the user ``sentinel``; every node follows as the user
    ``replica`` once it is a replica.  A user's URL names the Sentinel (``redis+sentinel://``)."""

    def _start(self, tmp: Path) -> list[int]:
        self.sentinels = Sentinels(
            tmp,
            node_args={
                "aclfile": str(self.acl),
                "masteruser": "replica",  # the primary too: it follows once it is demoted
                "masterauth": self.passwords["replica"],
            },
            sentinel_lines=[
                f"sentinel auth-user {SENTINEL_SERVICE} sentinel",
                f"sentinel auth-pass {SENTINEL_SERVICE} {self.passwords['sentinel']}",
            ],
            password=secrets.token_hex(16),
        )
        self.server = self.sentinels.primary
        assert self.server.port is not None and self.sentinels.replica.port is not None
        return [self.server.port, self.sentinels.replica.port]

    def url(self, user: str) -> str:
        return self.sentinels.url(f"{user}:{self.passwords[user]}")

    def stop(self) -> None:
        for port in self.ports:
            admin = self.client("admin", port)
            with contextlib.suppress(redis.RedisError):
                admin.shutdown(nosave=True)  # the launcher's anonymous SHUTDOWN is refused
            admin.close()
        self.sentinels.stop()


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    with Deployment(tmp_path) as running:
        yield running


@pytest.fixture
def cluster_deployment(tmp_path: Path) -> Iterator[Deployment]:
    with ClusterDeployment(tmp_path) as running:
        yield running


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONQUIAN_", "REDIS_"))}
    env.update(
        {
            "REDIS_URL": url,
            "CONQUIAN_SHARDS": str(SHARDS),
            "CONQUIAN_LOG_LEVEL": "WARNING",
            "CONQUIAN_TOKEN_SECRET": "acl-test-" + "0" * 32,
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _start(argv: list[str], url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, env=_env(url), stdout=out, stderr=out
        )


def _cli(deployment: Deployment, user: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *argv],
        cwd=ROOT,
        env=_env(deployment.url(user)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _http(
    method: str, url: str, body: dict[str, Any] | None = None, token: str | None = None
) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def _wait_ready(base: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("the gateway never became ready")


def _play_bot_table(base: str) -> str:
    table = _http("POST", f"{base}/tables", {"bots": {"0": "greedy", "1": "random"}, "deals": 1})
    table_id: str = table["table_id"]
    deadline = time.monotonic() + 150
    view: dict[str, Any] = {}
    while time.monotonic() < deadline:
        view = _http("GET", f"{base}/tables/{table_id}")
        if view.get("status") == "over":
            return table_id
        time.sleep(0.5)
    raise AssertionError(f"the bot table never ended: {view}")


def _play_as_a_human_until_the_clock_moves(base: str, port: int) -> None:
    """A human seat against a bot, with a turn clock of 5 s: join, read the view and events,
    open the WebSocket, send a command on it, then wait for the clock to act for the seat."""
    body = {"bots": {"1": "greedy"}, "deals": 1, "turn_seconds": 5}
    table_id = _http("POST", f"{base}/tables", body)["table_id"]
    lobby = _http("GET", f"{base}/tables")  # the lobby's page, as a player finds the table
    assert table_id in [row["table_id"] for row in lobby["tables"]], lobby
    seat = _http("POST", f"{base}/tables/{table_id}/join", {"name": "ana"})
    token = seat["token"]
    view = _http("GET", f"{base}/tables/{table_id}/view?min_version={seat['version']}", token=token)
    assert view["seat"] == 0, view  # the seat's own view, read with its token
    page = _http("GET", f"{base}/tables/{table_id}/events?after=0", token=token)
    assert page["events"], page
    url = f"ws://127.0.0.1:{port}/tables/{table_id}/ws?token={token}&after=0"
    asyncio.run(_command_on_the_socket(url, table_id))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        events = _http("GET", f"{base}/tables/{table_id}/events?after=0", token=token)["events"]
        if any(e["command_id"] == clock_command_id(e["version"] - 1) for e in events):
            return  # the clock played the seat's default action
        time.sleep(0.5)
    raise AssertionError("the turn clock never acted")


async def _command_on_the_socket(url: str, table_id: str) -> None:
    from websockets.asyncio.client import connect

    async with connect(url) as socket:
        hello = json.loads(await socket.recv())
        assert hello["kind"] == "hello", hello
        command = {"type": "leave", "command_id": "acl-test-leave", "table_id": table_id}
        await socket.send(json.dumps({"kind": "command", "command": command}))
        while (message := json.loads(await asyncio.wait_for(socket.recv(), 15)))[
            "kind"
        ] != "result":
            pass  # events and views before the command's result
        assert message["command_id"] == "acl-test-leave", message  # accepted or refused, answered


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_acl_file_refuses_a_missing_or_unsafe_password(tmp_path: Path) -> None:
    good = {u: secrets.token_hex(16) for u in USERS}
    assert render(tmp_path / "ok.acl", good).returncode == 0
    for user, bad in (("gateway", ""), ("engine", "short"), ("bots", "has space 0123456789")):
        done = render(tmp_path / "bad.acl", {**good, user: bad})
        assert done.returncode == 1, (user, bad)
        assert f"CONQUIAN_REDIS_PASSWORD_{user.upper()}" in done.stderr
        assert not (tmp_path / "bad.acl").exists()
    text = (tmp_path / "ok.acl").read_text()
    assert all(line.startswith("user ") for line in text.splitlines())  # no comment
    for user, password in good.items():  # a digest of each password, never the password
        assert f"user {user} reset #{hashlib.sha256(password.encode()).hexdigest()} " in text
        assert password not in text


def test_every_service_runs_as_its_own_user_and_needs_nothing_more(
    deployment: Deployment, tmp_path: Path
) -> None:
    _every_service_as_its_own_user(deployment, tmp_path)


def test_every_service_runs_as_its_own_user_on_a_cluster(
    cluster_deployment: Deployment, tmp_path: Path
) -> None:
    """The same users on a Redis Cluster: each service finds the cluster from one node's
    address, and no node refuses it anything (the slot map, the command table included)."""
    _every_service_as_its_own_user(cluster_deployment, tmp_path)


def test_every_service_runs_as_its_own_user_behind_sentinel(tmp_path: Path) -> None:
    """The same users behind Redis Sentinel: each service finds the primary through the
    Sentinel (which has a password of its own) and logs in to it as its own user; the Sentinel
    watches and fails over as the user ``sentinel``, the replica follows as ``replica``; after a
    failover the old primary, made a replica, follows the new one, and no server refused
    anything."""
    with SentinelDeployment(tmp_path) as deployment:
        _every_service_as_its_own_user(deployment, tmp_path, every_path=False)
        sentinels = deployment.sentinels
        old, new = sentinels.primary.port, sentinels.replica.port
        sentinels.client.execute_command("SENTINEL", "FAILOVER", SENTINEL_SERVICE)
        sentinels.wait(lambda: sentinels.master_port() == new)
        promoted, demoted = deployment.client("audit", new), deployment.client("audit", old)
        try:
            assert promoted.info("replication")["role"] == "master"
            feeds = [KeySpace(shards=SHARDS).feed(shard) for shard in range(SHARDS)]
            assert any(promoted.xrange(feed, count=1) for feed in feeds)  # the data, as audit
            # The old primary made a replica of the new one follows it as `replica`.  (The
            # Sentinel would make it so itself, but only 8 s after it sees it still a primary:
            # the operator's REPLICAOF does at once what its SLAVEOF, tried above, would do.)
            admin = deployment.client("admin", old)
            admin.replicaof("127.0.0.1", new)
            admin.close()
            following = {"role": "slave", "master_port": new, "master_link_status": "up"}
            sentinels.wait(lambda: following.items() <= demoted.info("replication").items())
        finally:
            promoted.close()
            demoted.close()
        refused = [{k: e.get(k) for k in ("username", "object")} for e in deployment.acl_log()]
        assert refused == []
        assert "-failover-abort" not in sentinels.log.read_text()


def _every_service_as_its_own_user(
    deployment: Deployment, tmp_path: Path, *, every_path: bool = True
) -> None:
    """Run every service as its own user, play a bot table to its end and audit it; with
    ``every_path``, also a human seat the clock acts for, a rebuild and the archiver."""
    port = free_port()
    gateway = [
        "-m",
        "uvicorn",
        "--factory",
        "services.gateway.app:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    services = {
        "engine": ["-m", "services.engine_worker"],
        "projector": ["-m", "services.projector"],
        "bots": ["-m", "services.followers.bots_runner"],
        "clock": ["-m", "services.followers.turn_clock"],
        "gateway": gateway,
    }
    processes = {
        user: _start(argv, deployment.url(user), tmp_path / f"{user}.log")
        for user, argv in services.items()
    }
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base, time.monotonic() + 60)
        table_id = _play_bot_table(base)
        if every_path:
            _every_path(deployment, tmp_path, base, port, processes, table_id)
        else:
            audit = _cli(deployment, "audit", "audit", table_id)
            assert audit.returncode == 0, audit.stdout + audit.stderr
    finally:
        for process in processes.values():
            _stop(process)
    logs = {user: (tmp_path / f"{user}.log").read_text() for user in services}
    for user, text in logs.items():
        assert "NOPERM" not in text and "NoPermission" not in text, (user, text[-3000:])
    refused = [{k: e.get(k) for k in ("username", "object")} for e in deployment.acl_log()]
    assert refused == []  # nothing any service did was refused


def _every_path(
    deployment: Deployment,
    tmp_path: Path,
    base: str,
    port: int,
    processes: dict[str, subprocess.Popen[bytes]],
    table_id: str,
) -> None:
    """A human seat the clock acts for, a rebuild of the views, an audit, a replay and the
    archiver, each as its own user."""
    _play_as_a_human_until_the_clock_moves(base, port)
    _stop(processes.pop("projector"))  # a rebuild wants the projector's leases free
    rebuild = _cli(deployment, "projector", "project", "--rebuild")
    assert rebuild.returncode == 0, rebuild.stdout + rebuild.stderr
    assert "rebuilt 2 tables" in rebuild.stdout, rebuild.stdout
    audit = _cli(deployment, "audit", "audit", "--all", "--json")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    replay = _cli(deployment, "audit", "replay", table_id)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    archive_dir = str(tmp_path / "archive")
    archived = _cli(
        deployment, "archiver", "archive", "--archive-dir", archive_dir, "--older-than", "0"
    )
    assert archived.returncode == 0, archived.stdout + archived.stderr
    assert "archived 1 tables" in archived.stdout, archived.stdout


def test_the_gateway_cannot_append_delete_or_write(deployment: Deployment) -> None:
    keys = KeySpace(shards=SHARDS)
    table = "t-acltest00001"
    engine, gateway = deployment.client("engine"), deployment.client("gateway")
    try:
        sha = engine.script_load(APPEND_LUA)
        engine.hset(keys.head(table), mapping={"version": 1, "hash": "0" * 64})
        engine.xadd(keys.events(table), {"b": "{}", "h": "x"}, id="1-1")
        shard = keys.shard_of(table)
        append_keys = [
            keys.head(table),
            keys.events(table),
            keys.feed(shard),
            keys.command_ids(table),
            keys.secret(table),
            keys.cmdids(shard),
            keys.sealed(shard),
            keys.tokens(table),
        ]
        refused = [
            lambda: gateway.evalsha(sha, len(append_keys), *append_keys, table, "c1", 1, "0" * 64),
            lambda: gateway.evalsha(sha, 0),  # no keys named: still no EVALSHA at all
            lambda: gateway.delete(keys.events(table)),
            lambda: gateway.unlink(keys.head(table)),
            lambda: gateway.delete(keys.cmd(shard)),
            lambda: gateway.xadd(keys.events(table), {"b": "{}", "h": "x"}, id="2-1"),
            lambda: gateway.hset(keys.head(table), "version", 9),
            lambda: gateway.set(keys.table_view(table, "public"), "{}"),
            lambda: gateway.xrange(keys.cmd(shard)),  # it queues commands, reads none
            lambda: gateway.publish("cq:results", "x"),
            lambda: gateway.flushall(),
            lambda: gateway.hgetall(keys.secret(table)),  # the seeds: never the gateway's
            lambda: gateway.hget(keys.secret(table), "seed:1"),
            lambda: gateway.hset(keys.tokens(table), "token:0", "x"),
        ]
        for attempt in refused:
            with pytest.raises(redis.exceptions.NoPermissionError):
                attempt()
        # ... and what it is there for still works
        assert gateway.xadd(keys.cmd(shard), {"c": "{}", "s": "", "r": "0"})
        assert gateway.hmget(keys.head(table), ["version"]) == [b"1"]
        assert gateway.hmget(keys.tokens(table), ["token:0", "token:1"]) == [None, None]
        assert len(engine.xrange(keys.events(table))) == 1  # nothing was written
        assert engine.hget(keys.head(table), "version") == b"1"
    finally:
        engine.close()
        gateway.close()


@pytest.mark.parametrize(
    ("user", "command"),
    [
        ("bots", ("EVALSHA", "0" * 40, "0")),
        ("bots", ("DEL", "cq:{s00}:t:x:ev")),
        ("bots", ("HGETALL", "cq:{s00}:t:x:tokens")),  # seat-token digests: not a bot's
        ("clock", ("HGET", "cq:{s00}:t:x:tokens", "token:0")),
        ("clock", ("XADD", "cq:{s00}:t:x:ev", "*", "b", "x")),
        ("projector", ("XADD", "cq:{s00}:t:x:ev", "*", "b", "x")),
        ("projector", ("HGETALL", "cq:{s00}:t:x:secret")),
        ("engine", ("DEL", "cq:{s00}:t:x:ev")),
        ("engine", ("FLUSHALL",)),
        ("archiver", ("XADD", "cq:{s00}:cmd", "*", "c", "x")),
        ("audit", ("SET", "cq:{s00}:view:x:public", "{}")),
        ("audit", ("DEL", "cq:{s00}:t:x:ev")),
        ("replica", ("GET", "cq:{s00}:t:x:head")),
        ("replica", ("KEYS", "*")),
        ("default", ("GET", "cq:{s00}:t:x:head")),
    ],
)
def test_each_user_is_refused_what_it_does_not_do(
    deployment: Deployment, user: str, command: tuple[str, ...]
) -> None:
    if user == "default":
        client = redis.Redis(port=deployment.port, socket_timeout=10)
    else:
        client = deployment.client(user)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.execute_command(*command)
    finally:
        client.close()


# --- the deploy files use these users ---------------------------------------------------------

SERVICE_USERS = {
    "gateway": "gateway",
    "engine-worker": "engine",
    "projector": "projector",
    "bots": "bots",
    "clock": "clock",
}
"""The Redis user of each compose service and Kubernetes Deployment."""


def _documents(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_each_compose_service_connects_as_its_own_user() -> None:
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    for name, user in SERVICE_USERS.items():
        url = urlsplit(services[name]["environment"]["REDIS_URL"])
        assert url.username == user, name
        assert url.password == f"${{CONQUIAN_REDIS_PASSWORD_{user.upper()}:-}}", name
    redis_env = services["redis"]["environment"]
    assert set(redis_env) == {f"CONQUIAN_REDIS_PASSWORD_{u.upper()}" for u in USERS}
    mounts = {v.split(":")[0] for v in services["redis"]["volumes"]}
    assert {"./redis/users.acl", "./redis/render-acl.sh", "./redis/acl-server.sh"} <= mounts


def test_each_k8s_deployment_connects_as_its_own_user() -> None:
    k8s = ROOT / "deploy" / "k8s"
    for name, user in SERVICE_USERS.items():
        [deployment] = [d for d in _documents(k8s / f"{name}.yaml") if d["kind"] == "Deployment"]
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        env = container["env"]
        names = [e["name"] for e in env]
        variable = f"CONQUIAN_REDIS_PASSWORD_{user.upper()}"
        assert names.index(variable) < names.index("REDIS_URL"), name  # $(...) needs it first
        [password] = [e for e in env if e["name"] == variable]
        assert password["valueFrom"]["secretKeyRef"] == {
            "name": "conquian-redis-users",
            "key": variable,
        }
        [url] = [e["value"] for e in env if e["name"] == "REDIS_URL"]
        assert url == f"redis://{user}:$({variable})@redis:6379/0", name
    [secret] = [
        d
        for d in _documents(k8s / "secret.example.yaml")
        if d["metadata"]["name"] == "conquian-redis-users"
    ]
    assert set(secret["stringData"]) == {f"CONQUIAN_REDIS_PASSWORD_{u.upper()}" for u in USERS}


@pytest.mark.parametrize("name", ["users.acl", "render-acl.sh", "acl-server.sh"])
def test_the_k8s_redis_config_copies_the_acl_files_verbatim(name: str) -> None:
    [config] = [
        d
        for d in _documents(ROOT / "deploy" / "k8s" / "redis.yaml")
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "redis-config"
    ]
    assert config["data"][name] == (ROOT / "deploy" / "redis" / name).read_text()


@pytest.mark.parametrize("script", ["render-acl.sh", "acl-server.sh", "passwords.sh"])
def test_the_acl_scripts_are_valid_sh(script: str) -> None:
    done = subprocess.run(
        ["sh", "-n", str(ROOT / "deploy" / "redis" / script)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_passwords_sh_gives_every_user_a_password_render_acl_takes(tmp_path: Path) -> None:
    made = subprocess.run(
        ["sh", str(ROOT / "deploy" / "redis" / "passwords.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    lines = dict(line.split("=", 1) for line in made.stdout.splitlines())
    assert set(lines) == {f"CONQUIAN_REDIS_PASSWORD_{u.upper()}" for u in USERS}
    passwords = {u: lines[f"CONQUIAN_REDIS_PASSWORD_{u.upper()}"] for u in USERS}
    assert len(set(passwords.values())) == len(USERS)
    assert render(tmp_path / "users.acl", passwords).returncode == 0


async def test_a_permission_the_gateway_lacks_gets_the_documented_shape(
    deployment: Deployment,
) -> None:
    """A gateway whose user cannot MGET (a deployment's mistake) answers a view with 500
    ``store/refused`` in the one JSON shape, not a plain-text 500."""
    from services.settings import load_settings
    from tests.services.gateway_stack import gateway_client

    admin = deployment.client("admin")
    try:
        rules = next(u for u in admin.acl_list() if u.startswith("user gateway "))
        narrow = [r for r in rules.split()[3:] if r not in ("+mget", "on") and r[0] != "#"]
        admin.execute_command("ACL", "SETUSER", "narrow", "reset", "on", ">narrow-password-01")
        admin.execute_command("ACL", "SETUSER", "narrow", *narrow)
        keys = KeySpace(shards=SHARDS)
        admin.hset(keys.head("t-narrow00001"), mapping={"version": 1, "hash": "0" * 64})
    finally:
        admin.close()
    url = f"redis://narrow:narrow-password-01@127.0.0.1:{deployment.port}/0"
    settings = load_settings(redis_url=url, shards=SHARDS, token_secret="narrow-" + "0" * 32)
    async with gateway_client(settings, raise_app_exceptions=False) as http:
        response = await http.get("/tables/t-narrow00001")
    assert response.status_code == 500, response.text
    assert response.json()["code"] == "store/refused"
    assert response.json()["ok"] is False
