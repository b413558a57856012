"""One attempt on the wire: an adaptive deadline, and a hedge for a straggler — first answer wins.

`race` awaits the primary call. If it is still unanswered at `hedge_at`, `start_hedge` is asked
for a second, identical call (it reserves quota for it first and may decline, returning None);
the first of the two to *succeed* wins and the other is cancelled. A leg that fails is reported
through `on_failed` and the race goes on with the other; when every leg has failed, the primary's
error is raised. At `deadline` (once a hedge is sent, at `hedge_deadline()`, asked then: a deadline
set while the provider's latencies were unknown gives way to one from what was learned since) the
legs still running are cancelled (`on_cancelled(leg, won=False)`) and `RaceTimeout` is raised; the loser of
a won race is cancelled with `on_cancelled(leg, won=True)`. Timers come from the injected clock
(`call_at`), never a polling loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from batchgate.clock import Clock, TimerHandle

T = TypeVar("T")


class Leg(Generic[T]):
    """One call in a race: its task and what the caller attached to it (e.g. its reservation)."""

    __slots__ = ("index", "tag", "task")

    def __init__(self, index: int, task: asyncio.Future[T], tag: object) -> None:
        self.index = index
        self.task = task
        self.tag = tag


class RaceTimeout(Exception):
    """Every leg ran past the deadline (the caller turns this into its own timeout error)."""


def _timer(clock: Clock, when: float, fut: asyncio.Future[None]) -> TimerHandle:
    def fire() -> None:
        if not fut.done():
            fut.set_result(None)

    return clock.call_at(when, fire)


async def race(
    clock: Clock,
    primary: Leg[T],
    *,
    deadline: float,
    hedge_at: float | None,
    hedge_deadline: Callable[[], float],
    start_hedge: Callable[[], Awaitable[Leg[T] | None]],
    on_failed: Callable[[Leg[T], BaseException], None],
    on_cancelled: Callable[[Leg[T], bool], None],
) -> tuple[Leg[T], T]:
    """The winning leg and its result; see the module docstring."""
    loop = asyncio.get_running_loop()
    legs = [primary]
    errors: dict[int, BaseException] = {}
    due: asyncio.Future[None] = loop.create_future()
    handles = [_timer(clock, deadline, due)]
    hedge_due: asyncio.Future[None] | None = None
    if hedge_at is not None and hedge_at < deadline:
        hedge_due = loop.create_future()
        handles.append(_timer(clock, hedge_at, hedge_due))
    starting: asyncio.Future[Leg[T] | None] | None = None
    won = False
    try:
        while True:
            running = [leg for leg in legs if not leg.task.done()]
            if not running and starting is None:
                raise errors.get(primary.index) or next(iter(errors.values()))
            waits: set[asyncio.Future[Any]] = {leg.task for leg in running} | {due}
            for extra in (hedge_due, starting):
                if extra is not None:
                    waits.add(extra)
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for leg in running:
                if leg.task.done():
                    exc = asyncio.CancelledError() if leg.task.cancelled() else leg.task.exception()
                    if exc is None:
                        won = True
                        return leg, leg.task.result()
                    errors[leg.index] = exc
                    on_failed(leg, exc)
            if hedge_due is not None and hedge_due.done():
                hedge_due = None
                if not primary.task.done():
                    starting = asyncio.ensure_future(start_hedge())
            if starting is not None and starting.done():
                hedge = starting.result()
                starting = None
                if hedge is not None:
                    legs.append(hedge)
                    due = loop.create_future()
                    handles.append(_timer(clock, hedge_deadline(), due))
            if due.done():
                raise RaceTimeout()
    finally:
        await _finish(handles, starting, legs, won, on_cancelled)


async def _finish(
    handles: list[TimerHandle],
    starting: asyncio.Future[Leg[T] | None] | None,
    legs: list[Leg[T]],
    won: bool,
    on_cancelled: Callable[[Leg[T], bool], None],
) -> None:
    """Cancel the timers, a hedge still being started and every leg still running."""
    for handle in handles:
        handle.cancel()
    if starting is not None:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        if not starting.cancelled() and starting.exception() is None:
            late = starting.result()
            if late is not None:
                legs.append(late)
    late_legs = [leg for leg in legs if not leg.task.done()]
    for leg in late_legs:
        leg.task.cancel()
    if late_legs:
        await asyncio.gather(*(leg.task for leg in late_legs), return_exceptions=True)
        for leg in late_legs:
            on_cancelled(leg, won)
