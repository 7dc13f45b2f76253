"""``conquian loadtest`` against the real service: ``conquian serve`` (Redis, an engine worker,
projector, bots runner, turn clock and gateway as processes), the tool as a process too.

Each run is bounded (a handful of tables, one or two deals, a few seconds) and its report is
checked for consistency: every command sent has its result, every table of a run by deals
finished, latencies are non-negative and ordered, rejections counted by their code, the time
series adds up to the totals, and the plot is a PNG.
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.services.serve_run import serving

ROOT = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SHARDS = 4


@dataclass(frozen=True)
class Service:
    url: str
    redis_url: str
    namespace: str


@pytest.fixture(scope="module")
def service(redis_url: str) -> Iterator[Service]:
    """``conquian serve`` with one engine worker on a free port, in a namespace of its own."""
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    with serving(redis_url, namespace, shards=SHARDS) as base:
        yield Service(base, redis_url, namespace)


def loadtest(service: Service, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run ``conquian loadtest`` against the service; return its status, report and output."""
    report = tmp_path / "report.json"
    argv = [
        sys.executable,
        "-m",
        "services.cli",
        "loadtest",
        "--url",
        service.url,
        "--redis-url",
        service.redis_url,
        "--namespace",
        service.namespace,
        "--shards",
        str(SHARDS),
        "--report",
        str(report),
        "--timeout",
        "60",
        *args,
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert report.exists(), output
    return done.returncode, json.loads(report.read_text()), output


def check_latencies(report: dict[str, Any]) -> None:
    for kind in ("result", "view"):
        summary = report["latency_ms"][kind]
        assert summary["count"] > 0, kind
        assert 0 <= summary["p50"] <= summary["p95"] <= summary["p99"] <= summary["max"], kind


def check_series(report: dict[str, Any]) -> None:
    series = report["series"]
    assert series and [row["t"] for row in series] == sorted(row["t"] for row in series)
    assert sum(row["results"] for row in series) == report["commands"]["results"]
    assert sum(row["sent"] for row in series) == report["commands"]["sent"]
    assert sum(row["rejected"] for row in series) == report["commands"]["rejected"]
    assert sum(row["tables_finished"] for row in series) == report["tables"]["finished"]


@pytest.mark.parametrize("via", ["gateway", "streams"])
def test_scripted_tables_by_deals_finish_with_a_result_for_every_command(
    service: Service, tmp_path: Path, via: str
) -> None:
    plot = tmp_path / "run.png"
    status, report, output = loadtest(
        service, tmp_path, "--via", via, "--tables", "3", "--deals", "2", "--plot", str(plot)
    )
    assert status == 0, output
    commands = report["commands"]
    assert commands["sent"] == commands["results"] == commands["accepted"] > 3 * 20
    assert commands["unanswered"] == 0 and commands["rejected"] == 0
    assert report["tables"] == {"started": 3, "finished": 3, "deals_finished": 6}
    assert report["errors"] == {} and report["rejections"] == {}
    assert report["settings"]["via"] == via and report["settings"]["tables"] == 3
    assert report["setup_latency_ms"]["create"]["count"] == 3
    assert report["setup_latency_ms"]["join"]["count"] == 6
    assert report["commands_per_s"] > 0
    check_latencies(report)
    check_series(report)
    generator = report["generator"]
    assert generator["cpu_seconds"] > 0 and generator["loop_lag_ms"]["count"] > 0
    assert plot.read_bytes().startswith(PNG_SIGNATURE)
    assert "commands/s over" in output  # the summary at the end


@pytest.mark.parametrize("via", ["gateway", "streams"])
def test_moves_sent_out_of_turn_are_counted_as_rejections_by_their_code(
    service: Service, tmp_path: Path, via: str
) -> None:
    status, report, output = loadtest(
        service, tmp_path, "--via", via, "--tables", "2", "--bad-share", "0.3", "--seed", "11"
    )
    assert status == 0, output
    commands = report["commands"]
    refused = commands["refused_on_purpose"]
    assert refused > 0
    assert report["rejections"] == {"move/not_your_turn": refused}
    assert commands["rejected"] == refused
    assert commands["sent"] == commands["results"] == commands["accepted"] + refused
    assert report["tables"]["finished"] == 2 and report["errors"] == {}
    check_series(report)


def test_a_paced_run_for_a_duration_keeps_to_its_rate(service: Service, tmp_path: Path) -> None:
    status, report, output = loadtest(
        service,
        tmp_path,
        "--via",
        "streams",
        "--tables",
        "4",
        "--duration",
        "3",
        "--rate",
        "40",
        "--interval",
        "0.5",
    )
    assert status == 0, output
    commands = report["commands"]
    assert 0 < commands["sent"] <= 40 * 3 + 1  # the pacer's slots, the first one at once
    assert commands["results"] == commands["sent"] - commands["unanswered"]
    assert report["seconds"] < 3 + 10 + 5  # the duration, the grace, start and stop
    assert report["tables"]["started"] >= 4
    assert len(report["series"]) >= 5
    check_series(report)


def test_ctrl_c_ends_the_run_with_its_report(service: Service, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    argv = [
        sys.executable,
        "-m",
        "services.cli",
        "loadtest",
        "--url",
        service.url,
        "--tables",
        "3",
        "--duration",
        "120",
        "--report",
        str(report),
    ]
    run = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert run.stdout is not None
        first = run.stdout.readline()  # the first interval's line: tables are playing
        assert "cmd/s" in first
        run.send_signal(signal.SIGINT)
        output, errors = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, output + errors
    data = json.loads(report.read_text())
    assert data["interrupted"] is True and data["seconds"] < 60
    assert data["commands"]["sent"] > 0
    assert data["commands"]["results"] == data["commands"]["sent"] - data["commands"]["unanswered"]


@pytest.mark.parametrize("via", ["gateway", "streams"])
def test_bot_tables_are_created_and_watched_to_their_end(
    service: Service, tmp_path: Path, via: str
) -> None:
    status, report, output = loadtest(
        service, tmp_path, "--via", via, "--players", "bots", "--tables", "3"
    )
    assert status == 0, output
    assert report["tables"] == {"started": 3, "finished": 3, "deals_finished": 3}
    assert report["moves_seen"] > 3 * 10  # every move of every deal, by the bots
    assert report["commands"]["sent"] == 0  # the tool only created the tables
    assert report["setup_latency_ms"]["create"]["count"] == 3


def test_a_service_that_does_not_answer_fails_the_run_at_once(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "services.cli", "loadtest", "--url", "http://127.0.0.1:9"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "does not answer" in done.stderr


def test_the_locustfile_plays_tables_headless_without_failures(
    service: Service, tmp_path: Path
) -> None:
    locust = Path(sys.executable).parent / "locust"
    argv = [
        str(locust),
        "-f",
        str(ROOT / "services" / "loadtest" / "locustfile.py"),
        "--headless",
        "-u",
        "2",
        "-r",
        "2",
        "-t",
        "5s",
        "--host",
        service.url,
        "--csv",
        str(tmp_path / "locust"),
        "--only-summary",
        "--conquian-seed",
        "3",
    ]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with (tmp_path / "locust_stats.csv").open() as stats:
        rows = {row["Name"]: row for row in csv.DictReader(stats)}
    total = rows["Aggregated"]
    assert int(total["Request Count"]) > 0 and int(total["Failure Count"]) == 0
    for name in ("/tables", "/tables/[id]/join", "/tables/[id]/view", "/tables/[id]/commands"):
        assert int(rows[name]["Request Count"]) > 0, name
