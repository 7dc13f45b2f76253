"""Scaling benchmark: ``conquian loadtest`` on one Redis and on a three-master Redis Cluster.

    .venv/bin/python bench/scaling.py [--tables 100,1000,10000] [--topologies single,cluster]
        [--via streams] [--workers 2] [--shards 16] [--deals 1] [--out bench/out/scaling]

What runs and what is read: ``docs/performance.md`` ("Scaling", "Module notes").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from services.redis_server import LocalRedis  # noqa: E402
from services.redis_server.cluster import LocalCluster  # noqa: E402
from services.redis_server.local import free_port  # noqa: E402
from services.store.client import connect  # noqa: E402
from services.store.keys import KeySpace  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
NAMESPACE = "scale"


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and of the children it waited for, such as
    Redis's AOF rewrites (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / TICKS


def children(pid: int) -> list[int]:
    """The child processes of ``pid``."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


def kind_of(pid: int) -> str:
    """A service process's kind from its command line (``engine_worker``, ``gateway``, …)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    text = b" ".join(argv).decode(errors="replace")
    for kind in ("engine_worker", "projector", "bots_runner", "turn_clock"):
        if f".{kind}" in text:
            return kind
    return "gateway" if "uvicorn" in text else "other"


def cpu_by_kind(pids: dict[int, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, kind in pids.items():
        out[kind] = out.get(kind, 0.0) + cpu_seconds(pid)
    return out


async def raw_xadd(url: str, shards: int, entries: int) -> float:
    """Pipelined XADD of ``entries`` 200-byte entries over the shard streams: entries/s."""
    keys = KeySpace("rawbase", shards)
    client = connect(url)
    payload = {"c": "x" * 180, "s": "0", "r": "1"}
    try:
        started = time.perf_counter()
        for start in range(0, entries, 1000):
            async with client.pipeline(transaction=False) as pipe:
                for i in range(start, min(start + 1000, entries)):
                    pipe.xadd(keys.cmd(i % shards), payload)
                await pipe.execute()
        rate = entries / (time.perf_counter() - started)
        for shard in range(shards):
            await client.delete(keys.cmd(shard))
        return rate
    finally:
        await client.aclose()


@contextlib.contextmanager
def redis_topology(
    kind: str, folder: Path, masters: int
) -> Iterator[tuple[str, list[int], list[str]]]:
    """Yield the URL, the server pids and every server's own URL of a private single Redis or
    cluster."""
    if kind == "single":
        with LocalRedis(folder / "single") as server:
            assert server.pid is not None
            yield server.url, [server.pid], [server.url]
        return
    with LocalCluster(folder / "cluster", masters=masters) as cluster:
        pids = [node.pid for node in cluster.nodes if node.pid is not None]
        yield cluster.url, pids, [node.url for node in cluster.nodes]


def command_stats(urls: list[str]) -> dict[str, tuple[int, int]]:
    """Calls and µs of Redis's own time by command (``INFO commandstats``), summed over the
    servers at ``urls`` (a script's inner commands are counted too, under their own names)."""
    totals: dict[str, tuple[int, int]] = {}
    for url in urls:
        with redis.Redis.from_url(url) as server:
            stats = server.info("commandstats")
        for name, row in stats.items():
            calls, usec = totals.get(name, (0, 0))
            totals[name] = (calls + int(row["calls"]), usec + int(row["usec"]))
    return totals


def command_stats_per_command(
    before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], answered: int
) -> dict[str, dict[str, float]]:
    """Per command answered, by Redis command: calls and µs of Redis's time, largest first."""
    rows = {}
    for name, (calls, usec) in after.items():
        calls -= before.get(name, (0, 0))[0]
        usec -= before.get(name, (0, 0))[1]
        if calls > 0:
            rows[name.removeprefix("cmdstat_")] = {
                "calls": round(calls / answered, 3),
                "usec": round(usec / answered, 2),
            }
    return dict(sorted(rows.items(), key=lambda item: -item[1]["usec"]))


def start_serve(env: dict[str, str], port: int, workers: int, log: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "services.cli", "serve", "--port", str(port)]
    with log.open("w") as errors:
        serve = subprocess.Popen(
            [*argv, "--workers", str(workers)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    assert serve.stdout is not None
    while time.monotonic() < deadline:
        line = serve.stdout.readline()
        if not line:
            break
        if "Conquian is running at" in line:
            return serve
    stop_serve(serve)
    raise RuntimeError(f"conquian serve did not start; see {log}")


def stop_serve(serve: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(serve.pid, signal.SIGINT)
    try:
        serve.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()


def run_load(
    args: argparse.Namespace, env: dict[str, str], url: str, port: int, tables: int, name: str
) -> tuple[dict[str, Any], float]:
    """One ``conquian loadtest`` run; its report and its own CPU seconds."""
    out = Path(args.out)
    command = [
        sys.executable, "-m", "services.cli", "loadtest",
        "--via", args.via, "--url", f"http://127.0.0.1:{port}",
        "--redis-url", url, "--namespace", NAMESPACE, "--shards", str(args.shards),
        "--tables", str(tables), "--deals", str(args.deals), "--players", args.players,
        "--seed", str(args.seed), "--timeout", str(args.timeout), "--display", "none",
        "--report", str(out / f"{name}.json"), "--plot", str(out / f"{name}.png"),
    ]  # fmt: skip
    started = time.monotonic()
    tool = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    tool_cpu = 0.0
    while tool.poll() is None:  # its CPU, read while it runs (a reaped process has no /proc)
        tool_cpu = max(tool_cpu, cpu_seconds(tool.pid))
        time.sleep(0.2)
        if time.monotonic() - started > args.timeout + 120:
            tool.kill()
    output = tool.stdout.read() if tool.stdout else ""
    report_path = out / f"{name}.json"
    if not report_path.exists():
        raise RuntimeError(f"loadtest wrote no report (exit {tool.returncode}): {output[-2000:]}")
    report: dict[str, Any] = json.loads(report_path.read_text())
    report["exit_status"] = tool.returncode
    return report, tool_cpu


def one_topology(args: argparse.Namespace, kind: str, folder: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"topology": kind, "runs": []}
    with redis_topology(kind, folder, args.masters) as (url, redis_pids, node_urls):
        result["raw_xadd_per_s"] = round(asyncio.run(raw_xadd(url, args.shards, args.raw)))
        port = free_port()
        env = {
            **os.environ,
            "REDIS_URL": url,
            "CONQUIAN_NAMESPACE": NAMESPACE,
            "CONQUIAN_SHARDS": str(args.shards),
            "CONQUIAN_LOG_LEVEL": "WARNING",
        }
        serve = start_serve(env, port, args.workers, folder / f"serve-{kind}.log")
        try:
            for tables in args.tables:
                pids = {pid: kind_of(pid) for pid in children(serve.pid)}
                pids.update({pid: "redis" for pid in redis_pids})
                stats_before = command_stats(node_urls)
                before = cpu_by_kind(pids)
                report, tool_cpu = run_load(args, env, url, port, tables, f"{kind}-{tables}")
                after = cpu_by_kind(pids)
                stats_after = command_stats(node_urls)
                answered = max(report["commands"]["results"], 1)
                cpu = {k: round(after[k] - before.get(k, 0.0), 2) for k in after}
                cpu["loadtest"] = round(tool_cpu, 2)
                result["runs"].append(
                    {
                        "tables": tables,
                        "exit_status": report["exit_status"],
                        "seconds": report["seconds"],
                        "commands": report["commands"],
                        "commands_per_s": report["commands_per_s"],
                        "latency_ms": report["latency_ms"],
                        "tables_finished": report["tables"]["finished"],
                        "errors": report["errors"],
                        "rejections": report["rejections"],
                        "cpu_seconds": cpu,
                        "cpu_us_per_command": {
                            k: round(v * 1e6 / answered) for k, v in cpu.items() if v > 0
                        },
                        "redis_commands_per_command": command_stats_per_command(
                            stats_before, stats_after, answered
                        ),
                    }
                )
                sys.stderr.write(json.dumps(result["runs"][-1]["commands_per_s"]) + "\n")
        finally:
            stop_serve(serve)
    result["serve_log_events"] = log_events(folder / f"serve-{kind}.log")
    return result


def log_events(log: Path) -> dict[str, int]:
    """How many times each event was logged by the service (warnings and worse: the runs set
    ``CONQUIAN_LOG_LEVEL=WARNING``), e.g. ``lease lost``; lines that are not JSON are skipped."""
    counts: dict[str, int] = {}
    with contextlib.suppress(OSError), log.open() as lines:
        for line in lines:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                event = record.get("event") if isinstance(record, dict) else None
                if isinstance(event, str):
                    counts[event] = counts.get(event, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", default="100,1000,10000", help="table counts, commas")
    parser.add_argument("--topologies", default="single,cluster")
    parser.add_argument("--via", default="streams", choices=["streams", "gateway"])
    parser.add_argument("--players", default="scripted", choices=["scripted", "bots"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--masters", type=int, default=3)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--deals", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--raw", type=int, default=50_000, help="entries of the raw baseline")
    parser.add_argument("--timeout", type=float, default=900.0, help="per loadtest run, s")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "scaling"))
    args = parser.parse_args()
    args.tables = [int(n) for n in args.tables.split(",")]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
        },
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "topologies": [],
    }
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        for kind in args.topologies.split(","):
            summary["topologies"].append(one_topology(args, kind, Path(tmp)))
    text = json.dumps(summary)
    (Path(args.out) / "scaling.json").write_text(json.dumps(summary, indent=2) + "\n")
    sys.stdout.write(text + "\n")


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


if __name__ == "__main__":
    main()
