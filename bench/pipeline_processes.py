"""The processes of the pipeline benchmark (``bench/pipeline.py``): the engine workers and the
projectors as subprocesses, the CPU seconds of each (and of the machine), and the wait until
they share the shards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis.asyncio

from services.store.keys import KeySpace
from services.store.shard_leases import lease_key

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(pid: int, system: bool = False) -> float:
    """User + system CPU seconds of a process (and its reaped children), from /proc; with
    ``system`` the system part only."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            parts = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    fields = (12, 14) if system else (11, 12, 13, 14)
    return sum(int(parts[i]) for i in fields) / ticks


class Services:
    """The engine workers and projectors as subprocesses, logs in the run folder."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.others: dict[str, int] = {}
        """Other processes whose CPU is counted (the Redis server)."""

    def start(self, name: str, module: str, *args: str) -> None:
        log = (self.folder / f"{name}.log").open("wb")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()

    def check(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")

    def tail(self, name: str, lines: int = 15) -> str:
        path = self.folder / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def cpu(self) -> dict[str, float]:
        out = {name: cpu_seconds(p.pid) for name, p in self.procs.items()}
        out.update((name, cpu_seconds(pid)) for name, pid in self.others.items())
        out.update((f"{name}_sys", cpu_seconds(p.pid, True)) for name, p in self.procs.items())
        out["driver"] = time.process_time()
        busy, total = machine_busy()
        out["machine"] = busy
        out["machine_total"] = total
        return out

    def profile(self, folder: Path, seconds: float) -> list[subprocess.Popen[bytes]]:
        """py-spy (collapsed stacks, 100 Hz) of every service process for ``seconds``."""
        spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        if spy is None:
            raise RuntimeError("--profile needs py-spy (pip install py-spy)")
        folder.mkdir(parents=True, exist_ok=True)
        return [
            subprocess.Popen(
                [
                    spy,
                    "record",
                    "-p",
                    str(proc.pid),
                    "-f",
                    "raw",
                    "-r",
                    "100",
                    "-d",
                    str(int(seconds)),
                    "-o",
                    str(folder / f"{name}.txt"),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name, proc in self.procs.items()
        ]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        values = [int(x) for x in fh.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]
    return (sum(values) - idle) / ticks, sum(values) / ticks


async def wait_ready(
    client: redis.asyncio.Redis,
    keys: KeySpace,
    workers: int,
    projectors: int,
    services: Services,
    timeout: float,
) -> None:
    """Until every shard has an engine lease and a projector lease, the shards split among the
    ``workers`` workers and the ``projectors`` projectors."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        services.check()
        async with client.pipeline(transaction=False) as pipe:
            for s in range(keys.shards):
                pipe.get(lease_key(keys, s))
                pipe.get(keys.shard_key(s, "projlease"))
            replies = await pipe.execute()
        engine = replies[0::2]
        projector = replies[1::2]
        if (
            all(engine)
            and all(projector)
            and len(set(engine)) == workers
            and len(set(projector)) == min(projectors, keys.shards)
        ):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the workers or the projectors did not share the shards in time")
