"""The race of one attempt on a fake clock: when both legs of a hedged attempt are given up, and
that every leg that ends is reported (its error retrieved, never left to the garbage collector)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.racing import Leg, RaceTimeout, race


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def _run_until_done(clock: FakeClock, task: asyncio.Future[Any], step: float = 0.5) -> None:
    while not task.done():
        await _settle()
        clock.advance(step)
    await _settle()


async def test_a_hedge_that_hangs_too_ends_at_the_deadline_asked_when_it_was_sent() -> None:
    """The primary was sent under a long deadline (the configured maximum, its provider's
    latencies unknown then); by the time it is hedged they are known, and the race ends at the
    deadline asked for then, not at the primary's."""
    clock = FakeClock(start=0.0)
    loop = asyncio.get_running_loop()
    hung: list[asyncio.Future[str]] = [loop.create_future(), loop.create_future()]
    asked: list[float] = []

    async def start_hedge() -> Leg[str] | None:
        return Leg(1, hung[1], None)

    def hedge_deadline() -> float:
        asked.append(clock.now())
        return clock.now() + 2.0

    cancelled: list[tuple[int, bool]] = []
    task = asyncio.ensure_future(
        race(
            clock,
            Leg(0, hung[0], None),
            deadline=600.0,
            hedge_at=5.0,
            hedge_deadline=hedge_deadline,
            start_hedge=start_hedge,
            on_failed=lambda leg, exc: None,
            on_cancelled=lambda leg, won: cancelled.append((leg.index, won)),
        )
    )
    await _run_until_done(clock, task)
    with pytest.raises(RaceTimeout):
        task.result()
    assert asked == [5.0]  # asked once, when the hedge was sent
    assert clock.now() <= 7.5  # ended 2 s after the hedge, not at the primary's 600 s
    assert sorted(cancelled) == [(0, False), (1, False)]  # both legs given up, neither won


async def test_a_hedge_sent_late_keeps_its_own_timeout_past_the_primarys_deadline() -> None:
    clock = FakeClock(start=0.0)
    loop = asyncio.get_running_loop()
    primary: asyncio.Future[str] = loop.create_future()
    hedge: asyncio.Future[str] = loop.create_future()

    async def start_hedge() -> Leg[str] | None:
        return Leg(1, hedge, None)

    task = asyncio.ensure_future(
        race(
            clock,
            Leg(0, primary, None),
            deadline=3.0,
            hedge_at=2.0,
            hedge_deadline=lambda: clock.now() + 3.0,
            start_hedge=start_hedge,
            on_failed=lambda leg, exc: None,
            on_cancelled=lambda leg, won: None,
        )
    )
    while clock.now() < 4.0:  # past the primary's deadline: the hedge still runs
        await _settle()
        clock.advance(0.5)
    await _settle()
    assert not task.done()
    hedge.set_result("answer")
    await _settle()
    leg, value = task.result()
    assert (leg.index, value) == (1, "answer")
    assert primary.cancelled()


async def test_a_leg_that_fails_as_the_other_wins_is_reported_and_its_error_retrieved() -> None:
    """Both legs end in the same turn of the loop: the primary answers, the hedge fails. The
    hedge's failure is reported (its attempt recorded) and retrieved — not left for the garbage
    collector to log as "exception was never retrieved"."""
    clock = FakeClock(start=0.0)
    loop = asyncio.get_running_loop()
    unretrieved: list[str] = []
    loop.set_exception_handler(lambda _, context: unretrieved.append(str(context.get("message"))))
    primary: asyncio.Future[str] = loop.create_future()
    hedge: list[asyncio.Future[str]] = [loop.create_future()]  # dropped at the end, to be collected
    started = asyncio.Event()

    async def start_hedge() -> Leg[str] | None:
        started.set()
        return Leg(1, hedge[0], None)

    failed: list[int] = []
    task = asyncio.ensure_future(
        race(
            clock,
            Leg(0, primary, None),
            deadline=30.0,
            hedge_at=1.0,
            hedge_deadline=lambda: clock.now() + 30.0,
            start_hedge=start_hedge,
            on_failed=lambda leg, exc: failed.append(leg.index),
            on_cancelled=lambda leg, won: None,
        )
    )
    while not started.is_set():
        await _settle()
        clock.advance(0.5)
    await _settle()
    primary.set_result("answer")
    hedge[0].set_exception(RuntimeError("the hedge failed"))
    await _settle()
    leg, value = task.result()
    assert (leg.index, value) == (0, "answer")
    assert failed == [1]
    hedge.clear()
    del task, leg
    gc.collect()
    loop.set_exception_handler(None)
    assert unretrieved == []


async def test_a_leg_that_fails_as_the_race_is_cancelled_is_reported_and_its_error_retrieved() -> None:
    clock = FakeClock(start=0.0)
    loop = asyncio.get_running_loop()
    unretrieved: list[str] = []
    loop.set_exception_handler(lambda _, context: unretrieved.append(str(context.get("message"))))
    primary: list[asyncio.Future[str]] = [loop.create_future()]  # dropped at the end, to be collected
    failed: list[int] = []

    async def no_hedge() -> Leg[str] | None:
        return None

    task = asyncio.ensure_future(
        race(
            clock,
            Leg(0, primary[0], None),
            deadline=30.0,
            hedge_at=None,
            hedge_deadline=lambda: 30.0,
            start_hedge=no_hedge,
            on_failed=lambda leg, exc: failed.append(leg.index),
            on_cancelled=lambda leg, won: None,
        )
    )
    await _settle()
    primary[0].set_exception(RuntimeError("the call failed"))
    task.cancel()  # in the same turn: the race never looks at the primary again
    await _settle()
    assert task.cancelled()
    assert failed == [0]
    primary.clear()
    del task
    gc.collect()
    loop.set_exception_handler(None)
    assert unretrieved == []


@pytest.mark.parametrize("ending", ["answered", "failed"])
async def test_a_hedge_that_ended_before_the_race_looked_at_it_is_seen(ending: str) -> None:
    """A hedge leg already ended when its start returns (it answered, or failed, without waiting
    on anything): the race takes its answer at once, or reports its failure and waits for the
    primary, instead of missing it and waiting out the deadline."""
    clock = FakeClock(start=0.0)
    loop = asyncio.get_running_loop()
    primary: asyncio.Future[str] = loop.create_future()
    hedge: asyncio.Future[str] = loop.create_future()
    if ending == "answered":
        hedge.set_result("hedge")
    else:
        hedge.set_exception(ValueError("refused at once"))

    async def start_hedge() -> Leg[str] | None:
        return Leg(1, hedge, None)

    failed: list[int] = []
    cancelled: list[tuple[int, bool]] = []
    task = asyncio.ensure_future(
        race(
            clock,
            Leg(0, primary, None),
            deadline=600.0,
            hedge_at=5.0,
            hedge_deadline=lambda: clock.now() + 60.0,
            start_hedge=start_hedge,
            on_failed=lambda leg, exc: failed.append(leg.index),
            on_cancelled=lambda leg, won: cancelled.append((leg.index, won)),
        )
    )
    while clock.now() < 8.0 and not task.done():
        await _settle()
        clock.advance(0.5)
    if ending == "answered":
        assert task.done()
        leg, answer = task.result()
        assert (leg.index, answer) == (1, "hedge")
        assert clock.now() <= 6.0  # at the hedge, not at a deadline
        assert cancelled == [(0, True)]  # the primary abandoned: the hedge won
    else:
        assert failed == [1]  # reported (its error retrieved) ...
        assert not task.done()  # ... and the primary still awaited
        primary.set_result("primary")
        await _settle()
        assert task.result()[1] == "primary"
