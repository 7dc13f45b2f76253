"""The load tool's watch of itself: a blocked event loop shows as lag, CPU time is counted."""

from __future__ import annotations

import asyncio
import time

from services.loadtest.selfwatch import SelfWatch


async def test_a_blocked_loop_shows_as_lag_and_its_cpu_is_counted() -> None:
    watch = SelfWatch(period=0.01)
    watch.start()
    await asyncio.sleep(0.05)
    busy_until = time.process_time() + 0.1
    while time.process_time() < busy_until:  # holds the loop for 0.1 s of CPU, longer by the wall
        pass
    await asyncio.sleep(0.03)
    lags, cpu = watch.cut()
    await watch.stop()
    assert max(lags) >= 0.09
    assert cpu >= 0.1
    assert watch.cpu_seconds() >= cpu
    assert list(watch.lags) == lags
    assert watch.cut()[0] == []  # the next interval starts empty
