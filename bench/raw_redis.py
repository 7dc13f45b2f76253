"""The benchmark driver's own Redis connections: RESP written and read by hand on a bare socket.

The driver shares the two cores with the services it measures, and redis-py spends tens of
microseconds of client CPU per command and per pipeline: that time is taken from the services
under test, which clients on other machines would not take.  So the driver's XADDs are encoded
once, before the clock starts (:func:`encode_command`), and written to a socket of their own
(:class:`RawSender`), whose replies a small parser counts; the view hints are read the same way
(``bench/pipeline.py``'s ``Hints`` with :func:`resp_array`).
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit


async def open_connection(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare connection to the Redis of ``url`` (``redis://host:port/db`` or ``unix://path``),
    with the database selected."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        reader, writer = await asyncio.open_unix_connection(parts.path)
    else:
        reader, writer = await asyncio.open_connection(
            parts.hostname or "127.0.0.1", parts.port or 6379
        )
    db = parts.path.strip("/") if parts.scheme != "unix" else ""
    if db and db != "0":
        writer.write(encode_command("SELECT", db))
        reply = await reader.readline()
        if reply != b"+OK\r\n":
            writer.close()
            raise RuntimeError(f"SELECT {db} answered {reply!r}")
    return reader, writer


async def close_connection(
    reader_task: asyncio.Task[None] | None, writer: asyncio.StreamWriter | None
) -> None:
    """Stop a connection's reading task, then close the connection."""
    if reader_task is not None:
        reader_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader_task
    if writer is not None:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def encode_command(*args: str | bytes) -> bytes:
    """The RESP2 request of one command.

    >>> encode_command("XADD", "s", "*", "c", "é")
    b'*5\\r\\n$4\\r\\nXADD\\r\\n$1\\r\\ns\\r\\n$1\\r\\n*\\r\\n$1\\r\\nc\\r\\n$2\\r\\n\\xc3\\xa9\\r\\n'
    """
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg.encode("utf-8") if isinstance(arg, str) else arg
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def resp_array(buf: bytes, pos: int) -> tuple[list[bytes | int], int] | None:
    """One RESP2 array of bulk strings and integers at ``pos``, and the position after it; None
    when it is not complete yet.

    >>> resp_array(b"*2\\r\\n$3\\r\\nabc\\r\\n:7\\r\\n", 0)
    ([b'abc', 7], 17)
    """
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return None
    if buf[pos : pos + 1] != b"*":
        raise ValueError(f"unexpected reply {buf[pos : pos + 40]!r}")
    count = int(buf[pos + 1 : end])
    pos = end + 2
    values: list[bytes | int] = []
    for _ in range(count):
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return None
        kind, text = buf[pos : pos + 1], buf[pos + 1 : end]
        if kind == b":":
            values.append(int(text))
            pos = end + 2
        elif kind == b"$":
            size = int(text)
            if len(buf) < end + 2 + size + 2:
                return None
            values.append(buf[end + 2 : end + 2 + size])
            pos = end + 2 + size + 2
        else:
            raise ValueError(f"unexpected reply {buf[pos : pos + 40]!r}")
    return values, pos


def count_replies(buf: bytes, pos: int) -> tuple[int, int, bytes | None]:
    """Count the complete replies from ``pos``, bulk strings (what XADD answers) or errors: their
    number, the position after the last, and the first error reply met (its text), if any.

    >>> count_replies(b"$3\\r\\n1-0\\r\\n-ERR no\\r\\n$3\\r\\n2-", 0)
    (2, 18, b'ERR no')
    """
    count = 0
    error: bytes | None = None
    while True:
        end = buf.find(b"\r\n", pos)
        if end < 0:
            return count, pos, error
        kind = buf[pos : pos + 1]
        if kind == b"-":  # an error is an answer too
            error = error or buf[pos + 1 : end]
            count += 1
            pos = end + 2
            continue
        if kind != b"$":
            raise ValueError(f"unexpected reply {buf[pos : pos + 40]!r}")
        size = int(buf[pos + 1 : end])
        if size < 0:  # a null reply: XADD refused to add (NOMKSTREAM); still an answer
            count += 1
            pos = end + 2
            continue
        if len(buf) < end + 2 + size + 2:
            return count, pos, error
        count += 1
        pos = end + 2 + size + 2


class RawSender:
    """Writes pre-encoded commands to one connection and counts their replies.

    ``send`` writes and returns at once (waiting only when the socket's buffer is full);
    ``settle`` waits until every command sent so far has its reply, and raises the first error
    reply.
    """

    def __init__(self) -> None:
        self.sent = 0
        self.answered = 0
        self.error: bytes | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._moved = asyncio.Event()

    async def start(self, url: str) -> None:
        self._reader, self._writer = await open_connection(url)
        self._task = asyncio.create_task(self._read())

    async def send(self, requests: list[bytes]) -> None:
        assert self._writer is not None, "start() first"
        self._writer.write(b"".join(requests))
        self.sent += len(requests)
        await self._writer.drain()

    async def settle(self, timeout: float = 60.0) -> None:
        """Wait for the replies of everything sent; raise on an error reply or a closed socket."""
        async with asyncio.timeout(timeout):
            while self.answered < self.sent:
                if self._task is not None and self._task.done():
                    raise RuntimeError("the driver's connection closed before every reply came")
                self._moved.clear()
                await self._moved.wait()
        if self.error is not None:
            raise RuntimeError(f"an XADD was refused: {self.error.decode(errors='replace')}")

    async def _read(self) -> None:
        assert self._reader is not None
        buf = b""
        try:
            while True:
                chunk = await self._reader.read(1 << 16)
                if not chunk:
                    return
                buf += chunk
                count, pos, error = count_replies(buf, 0)
                buf = buf[pos:]
                self.answered += count
                self.error = self.error or error
                if count or error:
                    self._moved.set()
        finally:
            self._moved.set()

    async def stop(self) -> None:
        await close_connection(self._task, self._writer)
