"""The load tool's pacing and statistics."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.loadtest.pacing import Pacer
from services.loadtest.stats import Stats, percentile, summary_ms


def test_the_pacer_hands_out_slots_one_step_apart_and_never_in_the_past() -> None:
    pacer = Pacer(4)
    assert [pacer.slot(10.0) for _ in range(3)] == [10.0, 10.25, 10.5]
    assert pacer.slot(20.0) == 20.0  # an idle spell is not made up for by a burst
    with pytest.raises(ValueError, match="positive"):
        Pacer(0)


async def test_a_paced_sender_keeps_to_the_rate() -> None:
    pacer = Pacer(200)
    started = time.perf_counter()
    await asyncio.gather(*(pacer.wait() for _ in range(41)))
    assert time.perf_counter() - started >= 0.19  # 40 steps of 5 ms after the first slot


def test_percentiles_are_nearest_rank_and_ordered() -> None:
    values = [i / 1000 for i in range(1, 101)]
    assert percentile(values, 0.5) == 0.05
    assert percentile([], 0.5) is None
    summary = summary_ms(values)
    assert summary["count"] == 100
    assert summary["p50"] == 50 and summary["p95"] == 95 and summary["p99"] == 99
    assert summary["max"] == 100
    assert summary_ms([])["p50"] is None


def test_stats_count_rejections_by_code_and_cut_intervals() -> None:
    stats = Stats()
    for _ in range(3):
        stats.command_sent()
    stats.command_sent(bad=True)
    stats.result(0.01, None)
    stats.result(0.02, None)
    stats.result(0.03, "move/not_your_turn")
    stats.view(0.015)
    stats.error("result/timeout")
    interval = stats.cut()
    assert (interval.sent, interval.results, interval.rejected, interval.errors) == (4, 3, 1, 1)
    assert stats.cut().sent == 0
    totals = stats.totals()
    assert totals["commands"] == {
        "sent": 4,
        "results": 3,
        "unanswered": 1,
        "accepted": 2,
        "rejected": 1,
        "refused_on_purpose": 1,
    }
    assert totals["rejections"] == {"move/not_your_turn": 1}
    assert totals["errors"] == {"result/timeout": 1}
    assert totals["latency_ms"]["view"]["count"] == 1
