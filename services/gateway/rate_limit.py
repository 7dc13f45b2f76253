"""How fast one seat, or one client address, may send commands and create tables.

Token buckets in the gateway process (``docs/api.md``, "Rate limits"): each seat (table and
seat of its token) has one for its commands, HTTP and WebSocket alike; each client address has
one for everything it sends (creates, joins, commands) and a smaller one for creates.  A
request over a bucket's rate is refused with 429 ``rate/limited`` and ``Retry-After`` (on a
WebSocket: a ``result`` with the same body, the socket stays open), before it is queued; the
bucket that refused it loses nothing.  The rates are settings (``CONQUIAN_RATE_*``); addresses in
``CONQUIAN_RATE_EXEMPT`` (loopback by default) are not limited.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from services.gateway import metrics
from services.gateway.errors import ApiError
from services.lru import Lru

__all__ = ["Bucket", "Buckets", "RateLimits", "exempt_networks", "take_all"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_BUCKETS = 50_000
"""Buckets kept per kind, about 13-17 MB each when full; the least recently used goes first (a
new bucket starts full, as an idle one would be once refilled: at the default rates, after
2 s idle for a seat, 10 s for an address's creates)."""


@dataclass(slots=True)
class Bucket:
    """``burst`` tokens at most, refilled at ``rate`` a second; a request takes one."""

    rate: float
    burst: float
    tokens: float
    stamp: float

    def wait(self, now: float) -> float:
        """Refill to ``now``; return 0.0 when a token is there, else the seconds until one is.

        >>> b = Bucket(rate=2.0, burst=2.0, tokens=2.0, stamp=0.0)
        >>> b.wait(0.0), b.take(), b.take(), b.wait(0.0), b.wait(0.5)
        (0.0, None, None, 0.5, 0.0)
        """
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self) -> None:
        """Take one token (after :meth:`wait` said one is there)."""
        self.tokens -= 1.0


class Buckets:
    """One kind of bucket (``name``), one a key, all of the same rate and burst; a rate of 0
    (or less) turns this kind of limit off."""

    def __init__(self, name: str, rate: float, burst: float, clock: Callable[[], float]) -> None:
        self.name = name
        self.rate = rate
        self.burst = max(1.0, burst)
        self.clock = clock
        self._buckets: Lru[Hashable, Bucket] = Lru(MAX_BUCKETS)

    def bucket(self, key: Hashable) -> Bucket | None:
        """The bucket of ``key`` (a new one starts full); None when this limit is off."""
        if self.rate <= 0:
            return None
        bucket = self._buckets.recall(key)
        if bucket is None:
            bucket = Bucket(self.rate, self.burst, self.burst, self.clock())
            self._buckets.remember(key, bucket)
        return bucket


def take_all(*wanted: tuple[Buckets, Hashable]) -> None:
    """Take a token from each ``(buckets, key)``'s bucket, or from none of them: raise
    ``rate/limited`` (naming the first limit that is short) when one has no token."""
    taking: list[Bucket] = []
    for buckets, key in wanted:
        bucket = buckets.bucket(key)
        if bucket is None:
            continue
        wait = bucket.wait(buckets.clock())
        if wait > 0:
            metrics.RATE_LIMITED.labels(buckets.name).inc()
            raise limited(buckets.name, buckets.rate, wait)
        taking.append(bucket)
    for bucket in taking:
        bucket.take()


def limited(kind: str, rate: float, wait: float) -> ApiError:
    """The 429 of a request over the ``kind`` limit, to be sent again after ``wait`` s."""
    seconds = max(1, math.ceil(wait))
    return ApiError(
        "rate/limited",
        f"more than {rate:g} a second ({kind}); send it again in {seconds} s",
        headers={"Retry-After": str(seconds)},
        extra={"limit": kind, "retry_after": seconds},
    )


def exempt_networks(text: str) -> tuple[Network, ...]:
    """Parse ``CONQUIAN_RATE_EXEMPT``: addresses or networks separated by commas.

    >>> exempt_networks("127.0.0.0/8, ::1")
    (IPv4Network('127.0.0.0/8'), IPv6Network('::1/128'))
    """
    return tuple(ipaddress.ip_network(part.strip()) for part in text.split(",") if part.strip())


class RateLimits:
    """The gateway's limits: commands a seat, and commands, joins and creates an address."""

    def __init__(
        self,
        *,
        seat: tuple[float, float],
        address: tuple[float, float],
        create: tuple[float, float],
        exempt: Sequence[Network] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seat = Buckets("seat", *seat, clock)
        self.address = Buckets("address", *address, clock)
        self.create = Buckets("create", *create, clock)
        self.exempt = tuple(exempt)

    def _counted(self, address: str | None) -> bool:
        """Whether requests from ``address`` are limited (not when it is exempt or unknown)."""
        if address is None or not self.exempt:
            return address is not None
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:  # not an IP (a Unix socket's peer, a test client's name)
            return True
        return not any(ip in network for network in self.exempt)

    def request(self, address: str | None, *, creates: bool = False) -> None:
        """Count a create, join or command from ``address`` (raise ``rate/limited``)."""
        if not self._counted(address):
            return
        if creates:
            take_all((self.create, address), (self.address, address))
        else:
            take_all((self.address, address))

    def command(self, table_id: str, seat: int, address: str | None) -> None:
        """Count a command of a seat sent from ``address`` (raise ``rate/limited``)."""
        if self._counted(address):
            take_all((self.seat, (table_id, seat)))
