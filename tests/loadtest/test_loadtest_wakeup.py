"""The load tool's Wakeup: woken at once, or after its timeout, one waiter at a time."""

from __future__ import annotations

import asyncio

import pytest

from services.loadtest.wakeup import Wakeup


async def test_a_raised_flag_returns_at_once_and_a_set_wakes_the_waiter() -> None:
    wakeup = Wakeup()
    wakeup.set()
    assert await wakeup.wait(10) is True
    wakeup.clear()
    waiting = asyncio.create_task(wakeup.wait(10))
    await asyncio.sleep(0)
    wakeup.set()
    assert await asyncio.wait_for(waiting, 1) is True


async def test_the_wait_ends_false_after_its_timeout() -> None:
    wakeup = Wakeup()
    assert await wakeup.wait(0.01) is False
    assert await wakeup.wait(0.01) is False  # the waiter is gone with its timer


async def test_a_second_waiter_is_refused() -> None:
    wakeup = Wakeup()
    first = asyncio.create_task(wakeup.wait(10))
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="one waiter"):
        await wakeup.wait(1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await wakeup.wait(0) is False  # a cancelled wait leaves no waiter behind
