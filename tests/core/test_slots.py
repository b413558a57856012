"""The fair global concurrency cap: shares are kept for active providers, lent by idle ones."""

from __future__ import annotations

import asyncio

from batchgate.clock import FakeClock
from batchgate.slots import FairSlots


async def test_a_busy_provider_cannot_take_the_share_of_an_active_one() -> None:
    clock = FakeClock()
    slots = FairSlots(4, ["slow", "fast"], clock)
    for _ in range(2):
        await slots.acquire("slow")
    blocked = asyncio.ensure_future(slots.acquire("slow"))
    await asyncio.sleep(0)
    assert not blocked.done(), "slow has its share; fast's share is kept for it"
    await slots.acquire("fast")
    await slots.acquire("fast")
    assert slots.in_use == {"slow": 2, "fast": 2}
    slots.release("fast")
    await asyncio.sleep(0)
    assert not blocked.done(), "fast is still active, so its freed slot stays its own"
    blocked.cancel()
    await asyncio.gather(blocked, return_exceptions=True)
    assert slots.used == 3


async def test_an_idle_provider_lends_its_share() -> None:
    clock = FakeClock()
    slots = FairSlots(4, ["a", "b"], clock, idle_after=10.0)
    clock.advance(11.0)
    for _ in range(4):
        await slots.acquire("a")
    assert slots.in_use["a"] == 4


async def test_waiters_of_one_provider_do_not_block_another() -> None:
    clock = FakeClock()
    slots = FairSlots(2, ["a", "b"], clock)
    await slots.acquire("a")
    waiting_a = asyncio.ensure_future(slots.acquire("a"))
    await asyncio.sleep(0)
    assert not waiting_a.done()
    await asyncio.wait_for(slots.acquire("b"), 1.0)
    slots.release("a")
    await asyncio.sleep(0)
    assert waiting_a.done()
    assert slots.in_use == {"a": 1, "b": 1}


async def test_cancelled_waiter_leaves_no_trace() -> None:
    clock = FakeClock()
    slots = FairSlots(1, ["a"], clock)
    await slots.acquire("a")
    waiter = asyncio.ensure_future(slots.acquire("a"))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    slots.release("a")
    assert slots.used == 0
    await asyncio.wait_for(slots.acquire("a"), 1.0)
    assert slots.used == 1


async def test_a_release_between_a_waiters_cancel_and_its_resumption_skips_it() -> None:
    # The waiter's future is cancelled at once, but its task only resumes on a later loop turn:
    # a release in between must pass the slot to the next live waiter, not crash on the dead one.
    clock = FakeClock()
    slots = FairSlots(1, ["a"], clock)
    await slots.acquire("a")
    gone = asyncio.ensure_future(slots.acquire("a"))
    nxt = asyncio.ensure_future(slots.acquire("a"))
    await asyncio.sleep(0)
    gone.cancel()
    slots.release("a")  # same loop turn: `gone` has not run its cancellation handler yet
    results = await asyncio.gather(gone, nxt, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1] is None
    assert slots.used == 1
    assert "waiting=0" in repr(slots)
    slots.release("a")
    assert slots.used == 0


async def test_slot_context_releases_on_error() -> None:
    slots = FairSlots(1, ["a"], FakeClock())
    try:
        async with slots.slot("a"):
            assert slots.used == 1
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert slots.used == 0


async def test_a_providers_urgent_waiters_get_its_slots_before_its_ordinary_ones() -> None:
    clock = FakeClock()
    slots = FairSlots(1, ["p"], clock)
    await slots.acquire("p")
    order: list[str] = []

    async def take(name: str, urgent: bool) -> None:
        async with slots.slot("p", urgent=urgent):
            order.append(name)

    tasks = [asyncio.ensure_future(take("batch", False))]
    await asyncio.sleep(0)
    tasks.append(asyncio.ensure_future(take("live", True)))
    await asyncio.sleep(0)
    slots.release("p")
    await asyncio.gather(*tasks)
    assert order == ["live", "batch"]
    assert slots.used == 0
