"""``conquian serve`` (what ``make run`` starts): every service up, a table played, clean stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from services.redis_server.local import free_port

ROOT = Path(__file__).resolve().parents[2]


def http(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
        return result


def wait_for_line(stream: Any, needle: str, deadline: float) -> str:
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        if needle in line:
            return str(line)
    raise AssertionError(f"conquian serve never printed {needle!r}")


def start_serve(
    env: dict[str, str], port: int, *args: str, stderr: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """``conquian serve`` with one worker on ``port``, in a process group of its own (so that a
    test can send it what Ctrl-C sends); its stdout is piped."""
    argv = [sys.executable, "-m", "services.cli", "serve", "--port", str(port), "--workers", "1"]
    return subprocess.Popen(
        [*argv, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        start_new_session=True,
    )


def test_serve_runs_every_service_plays_a_bot_table_and_stops_on_ctrl_c(
    redis_url: str, redis_ns: str, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "CONQUIAN_NAMESPACE": redis_ns,
        "CONQUIAN_SHARDS": "4",
        "CONQUIAN_LOG_LEVEL": "WARNING",
    }
    with log.open("w") as errors:
        serve = start_serve(env, port, stderr=errors.fileno())
    try:
        banner = wait_for_line(serve.stdout, "Conquian is running at", time.monotonic() + 120)
        base = f"http://127.0.0.1:{port}"
        assert base in banner
        created = http("POST", f"{base}/tables", {"bots": {"0": "greedy", "1": "random"}})
        table = created["table_id"]
        deadline = time.monotonic() + 90
        view: dict[str, Any] = {}
        while time.monotonic() < deadline:
            view = http("GET", f"{base}/tables/{table}")
            if view.get("status") == "over":
                break
            time.sleep(0.5)
        assert view.get("status") == "over", view
        assert view["deal"]["outcome"] is not None
        os.killpg(serve.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's process group
        assert serve.wait(timeout=60) == 0
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    # CONQUIAN_LOG_LEVEL reaches every service, the gateway too (uvicorn's factory)
    records = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert not [r for r in records if r.get("level") in ("debug", "info")]
    audit = subprocess.run(
        [sys.executable, "-m", "services.cli", "audit", table, "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_ctrl_c_with_the_embedded_redis_stops_the_services_before_the_server(
    tmp_path: Path,
) -> None:
    """``make run`` without REDIS_URL: a Ctrl-C reaches every service, which stop cleanly (no
    traceback from a server that went away under them), and then the private server stops."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update({"CONQUIAN_NAMESPACE": "serve-ctrl-c", "CONQUIAN_SHARDS": "2"})
    serve = start_serve(env, free_port(), "--data-dir", str(tmp_path / "redis"))
    try:
        wait_for_line(serve.stdout, "Conquian is running at", time.monotonic() + 120)
        time.sleep(2)  # every service past its start-up and following the feeds
        os.killpg(serve.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's process group
        _, stderr = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    assert serve.returncode == 0
    assert "Traceback" not in stderr, stderr[-3000:]
    events = [json.loads(line)["event"] for line in stderr.splitlines() if line.startswith("{")]
    assert events.index("redis.stopped") > events.index("projector_stopped")
    assert events[-1] == "stopped"
