"""``redis+sentinel://`` URLs: the primary that Redis Sentinel names, found again on failover.

    redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/<service>[/<db>]

``host:port`` are the Sentinels (port 26379 when left out), ``service`` the name they monitor
(``sentinel monitor <service> …``), ``db`` the database (0). The password is the primary's;
Sentinels with a password of their own take ``?sentinel_password=…``. ``connect`` gives the
services a client of redis-py's ``Sentinel(...).master_for(service)``, which asks the
Sentinels for the primary and asks again when a connection to it fails (a failover); the engine
worker's broker is FastStream's ``RedisSentinelBroker``. ``docs/deploy.md``, "Sentinel".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis.asyncio
from redis.asyncio.sentinel import Sentinel

__all__ = ["SCHEME", "SentinelUrl", "parse_sentinel_url"]

SCHEME = "redis+sentinel"
DEFAULT_PORT = 26379


@dataclass(frozen=True)
class SentinelUrl:
    """What a ``redis+sentinel://`` URL says."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None

    def master_options(self) -> dict[str, Any]:
        """The primary's connection options (database and credentials)."""
        options: dict[str, Any] = {"db": self.db}
        if self.username:
            options["username"] = self.username
        if self.password:
            options["password"] = self.password
        return options

    def sentinel_options(self) -> dict[str, Any]:
        """The options of the connections to the Sentinels themselves."""
        options: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}
        if self.sentinel_password:
            options["password"] = self.sentinel_password
        return options

    def client(self, **options: Any) -> redis.asyncio.Redis:
        """An asyncio client of the primary (``options`` are its connections')."""
        manager = Sentinel(list(self.sentinels), sentinel_kwargs=self.sentinel_options())
        client: redis.asyncio.Redis = manager.master_for(
            self.service, **{**self.master_options(), **options}
        )
        return client

    def broker_options(self) -> dict[str, Any]:
        """The keyword arguments of FastStream's ``RedisSentinelBroker`` besides the URL."""
        return {
            "sentinels": list(self.sentinels),
            "sentinel_master_name": self.service,
            "sentinel_kwargs": self.sentinel_options(),
            **self.master_options(),
        }


def parse_sentinel_url(url: str) -> SentinelUrl | None:
    """The Sentinel URL ``url`` says, or None for any other scheme.

    >>> parse_sentinel_url("redis+sentinel://:pw@s1,s2:26380/main/2").sentinels
    (('s1', 26379), ('s2', 26380))
    >>> parse_sentinel_url("redis://localhost:6379/0") is None
    True

    Raises ValueError for a Sentinel URL without a host or a service name.
    """
    parts = urlsplit(url)
    if parts.scheme != SCHEME:
        return None
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    sentinels = tuple(_host_port(h) for h in hosts.split(",") if h)
    path = [p for p in parts.path.split("/") if p]
    if not sentinels or not path:
        raise ValueError(f"a {SCHEME} URL names its Sentinels and service: {SCHEME}://h1,h2/name")
    query = parse_qs(parts.query)
    return SentinelUrl(
        sentinels=sentinels,
        service=unquote(path[0]),
        db=int(path[1]) if len(path) > 1 else 0,
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=query.get("sentinel_password", [None])[0],
    )


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    return (host or text), int(port) if port else DEFAULT_PORT
