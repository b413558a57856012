"""The adjustable in-flight limit: lowering and raising it, and a waiter cancelled in the same
moment a place comes back (the wake may already have dropped it from the queue)."""

from __future__ import annotations

import asyncio

import pytest

from batchgate.inflight import InflightLimit


async def test_a_waiter_cancelled_as_a_place_comes_back_leaves_the_limit_consistent() -> None:
    limit = InflightLimit(1)
    await limit.acquire()
    waiter = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)  # it waits in the queue
    waiter.cancel()
    limit.release()  # the wake meets the cancelled waiter first and drops it
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (limit.in_use, limit.waiting()) == (0, 0)
    await limit.acquire()  # the place is free again
    assert limit.in_use == 1


async def test_raising_the_limit_admits_waiters_and_lowering_it_waits_for_releases() -> None:
    limit = InflightLimit(1)
    await limit.acquire()
    waiters = [asyncio.ensure_future(limit.acquire()) for _ in range(2)]
    await asyncio.sleep(0)
    limit.set_limit(3)
    await asyncio.gather(*waiters)
    assert limit.in_use == 3
    limit.set_limit(1)
    limit.release()
    assert limit.locked()  # 2 in use, limit 1
    limit.release()
    limit.release()
    assert not limit.locked()


async def test_an_urgent_waiter_gets_the_next_place_before_earlier_ordinary_waiters() -> None:
    limit = InflightLimit(1)
    await limit.acquire()
    order: list[str] = []

    async def take(name: str, urgent: bool) -> None:
        async with limit.place(urgent=urgent):
            order.append(name)

    tasks = [asyncio.ensure_future(take("batch", False))]
    await asyncio.sleep(0)
    tasks += [asyncio.ensure_future(take("live1", True)), asyncio.ensure_future(take("live2", True))]
    await asyncio.sleep(0)
    assert limit.waiting() == 3
    limit.release()
    await asyncio.gather(*tasks)
    assert order == ["live1", "live2", "batch"]
    assert (limit.in_use, limit.waiting()) == (0, 0)
