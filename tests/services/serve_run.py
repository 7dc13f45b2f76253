"""A ``conquian serve`` process for the tests: its log lines, its pids, HTTP calls.

:func:`serving` runs one on a free port in a key namespace of its own (the browser and load
tool tests).  :class:`ServeRun` starts ``conquian serve`` in a session of its own, reads its
stderr (the JSON log lines of the supervisor and of every service, which share it) in a thread,
and answers which process runs as which service (the supervisor's ``service_started`` lines).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from services.redis_server.local import free_port
from services.store.keys import KeySpace
from services.store.shard_leases import lease_key

ROOT = Path(__file__).resolve().parents[2]
STOP_BOUND_S = 8.0
"""The longest a ``conquian serve`` of the tests may take to stop after Ctrl-C: about half a
second when every service ends by itself; 10 or more when the gateway's shutdown has to cancel
what it still runs."""


def delete_namespace(redis_url: str, namespace: str) -> None:
    """Unlink every key under ``namespace`` (a test's own, never another's)."""
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match=f"{namespace}*", count=1000))
        for start in range(0, len(keys), 500):
            client.unlink(*keys[start : start + 500])
    finally:
        client.close()


@contextmanager
def serving(redis_url: str, namespace: str, shards: int = 2, workers: int = 1) -> Iterator[str]:
    """Run ``conquian serve`` (what ``make run`` starts) on ``redis_url`` in ``namespace``, on a
    free port; yield its base URL once the gateway is ready; stop it and unlink its keys.

    Stopped with Ctrl-C, every service must end by itself, and soon: ``serve`` kills one that
    has not after 15 s, and the gateway cancels what it still runs after 10 (a socket's task
    that waited for a room that never ended kept it there, after the browser tests)."""
    env = {
        **os.environ,
        "REDIS_URL": redis_url,
        "CONQUIAN_NAMESPACE": namespace,
        "CONQUIAN_SHARDS": str(shards),
        "CONQUIAN_LOG_LEVEL": "WARNING",
    }
    try:
        with ServeRun(env, free_port(), "--workers", str(workers)) as run:
            run.wait_ready()
            yield run.base
        run.finish_reading()
        killed = run.events("service did not stop; killing it")
        assert killed == [], f"conquian serve had to kill {[k.get('service') for k in killed]}"
        assert run.stop_seconds < STOP_BOUND_S, f"Ctrl-C took {run.stop_seconds:.1f} s"
    finally:
        delete_namespace(redis_url, namespace)


class ServeRun:
    """``conquian serve`` with ``args`` in ``env``; a context manager that kills it at the end."""

    def __init__(self, env: dict[str, str], port: int, *args: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "services.cli", "serve", "--port", str(port), *args]
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[dict[str, Any]] = []
        self.stop_seconds = 0.0
        """How long the process took to end after Ctrl-C (``__exit__``)."""
        self.stdout: list[str] = []
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def __enter__(self) -> ServeRun:
        return self

    def __exit__(self, *exc: object) -> None:
        dump = os.environ.get("CONQUIAN_TEST_SERVE_LOG")  # a file for the log lines, to debug
        if dump:
            with self._lock, open(dump, "a") as sink:
                sink.writelines(json.dumps(line) + "\n" for line in self.lines)
        if self.process.poll() is None:
            started = time.monotonic()
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(60)
                self.stop_seconds = time.monotonic() - started
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def finish_reading(self, timeout: float = 10) -> None:
        """Once the process has ended, wait until its last output has been read."""
        for thread in self._threads:
            thread.join(timeout)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if not line.startswith("{"):
                continue
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            parsed["_at"] = time.monotonic()
            with self._lock:
                self.lines.append(parsed)

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self.stdout.append(line)

    # -- the log --------------------------------------------------------------------------------
    def events(self, event: str, **match: Any) -> list[dict[str, Any]]:
        """The log lines of ``event`` whose fields include ``match``."""
        with self._lock:
            return [
                line
                for line in self.lines
                if line.get("event") == event and all(line.get(k) == v for k, v in match.items())
            ]

    def wait_event(
        self, event: str, timeout: float, after: int = 0, **match: Any
    ) -> dict[str, Any]:
        """Wait for the ``after``-th (0: first) line of ``event`` matching ``match``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.events(event, **match)
            if len(found) > after:
                return found[after]
            assert self.process.poll() is None, self.tail()
            time.sleep(0.02)
        raise AssertionError(f"no {event} {match} within {timeout}s:\n{self.tail()}")

    def wait_ready(self, timeout: float = 120) -> None:
        """Wait for the banner that says the gateway is ready."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if any("Conquian is running at" in line for line in self.stdout):
                    return
            assert self.process.poll() is None, self.tail()
            time.sleep(0.05)
        raise AssertionError(f"conquian serve never became ready:\n{self.tail()}")

    def pids(self) -> dict[str, int]:
        """Each service's current pid, from the supervisor's ``service_started`` lines."""
        return {line["service"]: line["pid"] for line in self.events("service_started")}

    def tail(self, count: int = 40) -> str:
        with self._lock:
            return "\n".join(json.dumps(line) for line in self.lines[-count:])

    def version(self, table: str) -> int:
        """The version of a table's public view (-1 when it cannot be read)."""
        status, view, _ = self.http("GET", f"/tables/{table}")
        return int(view["version"]) if status == 200 else -1

    # -- HTTP -----------------------------------------------------------------------------------
    def http(
        self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 10
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """One request: the status, the JSON body and the headers (an error status too)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method,
            headers={"content-type": "application/json"},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read()), dict(response.headers)
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = {"raw": raw.decode(errors="replace")}
            return error.code, parsed, dict(error.headers)


class Creates:
    """Threads that create tables through the gateway, one request at a time each, and keep a
    ledger: (sent, answered, status, table id)."""

    def __init__(self, serve: ServeRun, keys: KeySpace, threads: int = 2) -> None:
        self.serve = serve
        self.keys = keys
        self.ledger: list[tuple[float, float, int, str | None]] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                status, body, _ = self.serve.http("POST", "/tables", {"deals": 1})
            except OSError:  # the gateway restarting: nothing was sent
                status, body = 0, {}
            with self._lock:
                self.ledger.append((sent, time.monotonic(), status, body.get("table_id")))
            time.sleep(0.02 if status in (201, 202) else 0.05)  # a steady load, not a flood

    def finish(self) -> list[tuple[float, float, int, str | None]]:
        self.stop.set()
        for thread in self._threads:
            thread.join(30)
        return list(self.ledger)

    def first_accepted_after(self, moment: float, shards: set[int] | None = None) -> float:
        """Seconds from ``moment`` to the first create sent after it that was answered 201
        (of a table on one of ``shards``, when given)."""
        keys = self.keys
        with self._lock:
            done = [
                answered
                for sent, answered, status, table in self.ledger
                if sent >= moment and status == 201 and table is not None
                and (shards is None or keys.shard_of(table) in shards)
            ]  # fmt: skip
        return min(done) - moment if done else float("inf")


def worker_shards(redis_url: str, ns: str, shards: int, suffix: str) -> set[int]:
    """The shards whose lease holds a worker id ending in ``suffix``."""
    keys = KeySpace(ns=ns, shards=shards)
    client = redis.Redis.from_url(redis_url)
    try:
        holders = [client.get(lease_key(keys, s)) for s in range(shards)]
    finally:
        client.close()
    return {s for s, h in enumerate(holders) if h is not None and h.decode().endswith(suffix)}


def until(predicate: Callable[[], bool], timeout: float, step: float = 0.02) -> float:
    """Poll ``predicate`` until it holds; return the seconds it took (raise after ``timeout``)."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout}s")
        time.sleep(step)
    return time.monotonic() - start


def zombie(pid: int) -> bool:
    """Whether ``pid`` is a process that has ended and was never reaped."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" in status
