"""Never orphaned: ``atexit``, SIGTERM/SIGHUP handlers and the parent-death signal.

:data:`live` holds every :class:`~services.redis_server.local.LocalRedis` currently started by
this process; the hooks stop them all.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import platform
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from services.redis_server.local import LocalRedis

log = structlog.get_logger(__name__)

live: set[LocalRedis] = set()
live_lock = threading.RLock()  # re-entered by the signal handler
_saved_handlers: dict[int, Any] = {}
_atexit_registered = False
_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def stop_all() -> None:
    """Stop every live server, ignoring errors (an exit path)."""
    with live_lock:
        servers = list(live)
    for server in servers:
        with contextlib.suppress(Exception):
            server.stop()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """Stop our servers, then die of the same signal as if we had not caught it."""
    log.info("redis.signal", signal=signal.Signals(signum).name)
    stop_all()
    restore_handlers()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_guards() -> None:
    """Register the ``atexit`` hook once, and the signal handlers where they are still default."""
    global _atexit_registered
    if not _atexit_registered:
        atexit.register(stop_all)
        _atexit_registered = True
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in _HANDLED_SIGNALS:
        if sig in _saved_handlers:
            continue
        if signal.getsignal(sig) is signal.SIG_DFL:  # never override the application's own
            _saved_handlers[sig] = signal.signal(sig, _on_signal)


def restore_handlers() -> None:
    """Put back the signal handlers that :func:`install_guards` replaced."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, previous in list(_saved_handlers.items()):
        if signal.getsignal(sig) is _on_signal:
            signal.signal(sig, previous)
        del _saved_handlers[sig]


def parent_death_hook() -> Callable[[], None] | None:
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
