"""FifoGate, the pool's waiting mechanism, on its own: order, one timer, failing, closing."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.quota.queue import FifoGate


def gate_at(clock: FakeClock, ready: dict[str, float], released: list[str]) -> FifoGate[str, str]:
    return FifoGate(
        clock,
        wait_for=lambda item, now: max(0.0, ready[item] - now),
        admit=lambda item, now: f"{item}@{now:g}",
        release=released.append,
    )


async def test_serves_in_order_even_when_a_later_item_is_ready_first() -> None:
    clock = FakeClock(start=0.0)
    ready = {"a": 2.0, "b": 1.0}
    gate = gate_at(clock, ready, [])
    a = asyncio.create_task(gate.wait("a"))
    b = asyncio.create_task(gate.wait("b"))
    await asyncio.sleep(0)
    assert len(gate) == 2
    assert list(gate.waiting()) == ["a", "b"]
    assert clock.pending_timers() == 1
    clock.advance(1.0)
    await asyncio.sleep(0)
    assert not b.done()
    clock.advance(1.0)
    assert await a == "a@2"
    assert await b == "b@2"
    assert clock.pending_timers() == 0
    assert not gate.busy()


async def test_fail_removes_matching_waiters() -> None:
    clock = FakeClock(start=0.0)
    gate = gate_at(clock, {"x": 5.0, "y": 5.0}, [])
    x = asyncio.create_task(gate.wait("x"))
    y = asyncio.create_task(gate.wait("y"))
    await asyncio.sleep(0)
    assert gate.fail(lambda item: ValueError(item) if item == "x" else None) == 1
    with pytest.raises(ValueError, match="x"):
        await x
    assert list(gate.waiting()) == ["y"]
    assert "waiting=1" in repr(gate)
    gate.close()
    await asyncio.sleep(0)
    assert y.cancelled()
    assert clock.pending_timers() == 0


async def test_admitted_then_cancelled_is_released() -> None:
    clock = FakeClock(start=0.0)
    released: list[str] = []
    gate = gate_at(clock, {"z": 1.0}, released)
    z = asyncio.create_task(gate.wait("z"))
    await asyncio.sleep(0)
    clock.advance(1.0)  # admitted by the timer callback
    z.cancel()
    await asyncio.sleep(0)
    assert z.cancelled()
    assert released == ["z@1"]


async def test_urgent_waiters_go_ahead_of_ordinary_ones_in_their_own_fifo_order() -> None:
    clock = FakeClock(start=0.0)
    ready = {"b1": 1.0, "b2": 1.0, "u1": 1.0, "u2": 1.0}
    gate = gate_at(clock, ready, [])
    order: list[str] = []

    async def wait(item: str, urgent: bool) -> None:
        await gate.wait(item, urgent=urgent)
        order.append(item)

    tasks = [asyncio.create_task(wait("b1", False)), asyncio.create_task(wait("b2", False))]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(wait("u1", True)), asyncio.create_task(wait("u2", True))]
    await asyncio.sleep(0)
    assert list(gate.waiting()) == ["u1", "u2", "b1", "b2"]
    clock.advance(1.0)
    await asyncio.gather(*tasks)
    assert order == ["u1", "u2", "b1", "b2"]


async def test_a_cancelled_urgent_waiter_leaves_its_lane_and_the_ordinary_head_goes_next() -> None:
    clock = FakeClock(start=0.0)
    gate = gate_at(clock, {"b": 1.0, "u": 1.0}, [])
    b = asyncio.create_task(gate.wait("b"))
    u = asyncio.create_task(gate.wait("u", urgent=True))
    await asyncio.sleep(0)
    u.cancel()
    await asyncio.gather(u, return_exceptions=True)
    assert list(gate.waiting()) == ["b"]
    clock.advance(1.0)
    assert await b == "b@1"


async def test_drained_returns_at_once_when_nobody_waits_and_else_when_the_last_one_leaves() -> None:
    clock = FakeClock(start=0.0)
    gate = gate_at(clock, {"a": 1.0, "b": 2.0, "c": 9.0}, [])
    idle = gate.drained()
    with pytest.raises(StopIteration):  # nobody waits: it returns without suspending
        idle.send(None)
    a = asyncio.create_task(gate.wait("a"))
    b = asyncio.create_task(gate.wait("b"))
    await asyncio.sleep(0)
    drained = asyncio.create_task(gate.drained())
    await asyncio.sleep(0)
    assert clock.pending_timers() == 1  # the head's timer only: drained() arms none of its own
    clock.advance(1.0)
    assert await a == "a@1"
    await asyncio.sleep(0)
    assert not drained.done()  # b still waits
    clock.advance(1.0)
    assert await b == "b@2"
    await asyncio.sleep(0)
    assert drained.done()
    # a waiter that gives up drains the queue too, and so does closing it
    c, after_cancel = await _started(gate.wait("c"), gate.drained())
    assert not after_cancel.done()
    c.cancel()
    await asyncio.gather(c, return_exceptions=True)
    await asyncio.sleep(0)
    assert after_cancel.done()
    d, after_close = await _started(gate.wait("c"), gate.drained())
    gate.close()
    await asyncio.sleep(0)
    assert after_close.done()
    assert d.cancelled()


async def _started(*steps: Coroutine[Any, Any, Any]) -> list[asyncio.Task[Any]]:
    """Each step as a task, started in order (each one a tick after the one before)."""
    tasks = []
    for step in steps:
        tasks.append(asyncio.create_task(step))
        await asyncio.sleep(0)
    return tasks


async def test_a_drained_wait_given_up_leaves_nothing_behind_in_a_queue_that_stays_busy() -> None:
    clock = FakeClock(start=0.0)
    gate = gate_at(clock, {"a": 100.0}, [])
    a = asyncio.create_task(gate.wait("a"))
    await asyncio.sleep(0)
    for _ in range(3):  # hedges that were due, then not needed: their primaries answered
        waiter = asyncio.create_task(gate.drained())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
    assert gate._drained == []
    gate.close()
    await asyncio.gather(a, return_exceptions=True)
