"""What the Redis users of ``deploy/redis/users.acl`` cost Redis on the engine worker's appends.

Redis checks every key a command names, and every key a script's own calls name, against the
caller's key patterns, in order, until one matches: each check is a glob match per pattern
tried.  This starts a private Redis with the rendered ACL file plus users that differ only in
their key patterns, runs the same appends (one event and three view parts each, the engine's
typical shape) through ``RedisEventStore.append_many`` as each user, and reports the server's
own CPU (``INFO cpu``) per append.  Figures: ``docs/performance.md``, "Redis users".

    .venv/bin/python bench/redis_acl.py [--appends 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.redis_server import LocalRedis  # noqa: E402
from services.store import GENESIS_HASH, RedisEventStore  # noqa: E402
from services.store.base import AppendRequest  # noqa: E402
from services.store.client import connect  # noqa: E402
from services.store.keys import KeySpace  # noqa: E402

USERS = ("admin", "gateway", "engine", "projector", "bots", "clock", "archiver", "audit")
VARIANTS = {
    "all keys (~*)": "~*",
    "namespace (~cq:*)": "~cq:*",
}
"""Users beside ``engine`` with its commands and these key patterns instead of its own."""


def render(out: Path, passwords: dict[str, str]) -> None:
    env = {f"CONQUIAN_REDIS_PASSWORD_{u.upper()}": p for u, p in passwords.items()}
    template, script = ROOT / "deploy/redis/users.acl", ROOT / "deploy/redis/render-acl.sh"
    subprocess.run(["sh", str(script), str(template), str(out)], env=env, check=True)


def engine_commands(acl: Path) -> list[str]:
    line = next(x for x in acl.read_text().splitlines() if x.startswith("user engine "))
    rules = line.split()[4:]  # user engine reset #digest ...
    commands = [r for r in rules if r.startswith(("+", "-"))]
    return [c for c in commands if not c.startswith("(")]


def requests(count: int, round_no: int) -> list[AppendRequest]:
    view = '{"version":1,' + '"x":"' + "v" * 900 + '"}'
    body = {"type": "card_turned", "v": 1, "seat": 0, "card": "7H", "time": 1764480000000}
    return [
        AppendRequest(
            f"acl-{round_no}-{i}",
            0,
            GENESIS_HASH,
            f"cmd-{round_no}-{i:08d}",
            [{**body, "command_id": f"cmd-{round_no}-{i:08d}", "causation": "k" * 22}],
            b'{"ok":true}',
            views={"public": view, "seat0": view, "seat1": view},
        )
        for i in range(count)
    ]


def server_cpu(client: redis.Redis) -> float:
    info: dict[str, Any] = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def run(url: str, reqs: list[AppendRequest]) -> None:
    client = connect(url, cluster=False)
    store = RedisEventStore(client, KeySpace())
    try:
        for start in range(0, len(reqs), 100):
            await store.append_many(reqs[start : start + 100])
    finally:
        await client.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    passwords = {u: secrets.token_hex(16) for u in (*USERS, "variant0", "variant1")}
    with tempfile.TemporaryDirectory() as tmp:
        acl = Path(tmp) / "users.acl"
        render(acl, passwords)
        server = LocalRedis(Path(tmp) / "redis", extra_args={"aclfile": str(acl)}, stop_timeout=5)
        server.start()
        try:
            url = f"redis://{{}}:{{}}@127.0.0.1:{server.port}/0"
            admin = redis.Redis.from_url(url.format("admin", passwords["admin"]))
            users = {"engine (users.acl)": "engine", "admin (+@all ~*)": "admin"}
            for i, (name, pattern) in enumerate(VARIANTS.items()):
                user = f"variant{i}"
                admin.acl_setuser(user, enabled=True, reset=True, passwords=[f"+{passwords[user]}"])
                admin.execute_command("ACL", "SETUSER", user, pattern, "&*", *engine_commands(acl))
                users[f"engine's commands, {name}"] = user
            results: dict[str, list[float]] = {name: [] for name in users}
            for round_no in range(args.rounds):
                for name, user in users.items():
                    reqs = requests(args.appends, round_no)  # new tables: flushed after
                    before = server_cpu(admin)
                    asyncio.run(run(url.format(user, passwords[user]), reqs))
                    spent = server_cpu(admin) - before
                    results[name].append(spent / args.appends * 1e6)
                    admin.flushall()
            for name, per in results.items():
                best = min(per)
                print(f"{name:45s} {best:6.1f} µs of Redis CPU an append (best of {len(per)})")
            admin.shutdown(nosave=True)
        except redis.ConnectionError:
            pass
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
