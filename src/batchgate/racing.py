"""One attempt on the wire: an adaptive deadline, and a hedge for a straggler — first answer wins.

`race` awaits the primary call. If it is still unanswered at `hedge_at`, `start_hedge` is asked
for a second, identical call (it reserves quota for it first and may decline, returning None);
the first of the two to *succeed* wins and the other is cancelled. A leg that fails is reported
through `on_failed` and the race goes on with the other; when every leg has failed, the primary's
error is raised. At `deadline` (once a hedge is sent, at `hedge_deadline()`, asked then: a deadline
set while the provider's latencies were unknown gives way to one from what was learned since) the
legs still running are cancelled (`on_cancelled(leg, won=False)`) and `RaceTimeout` is raised; the loser of
a won race is cancelled with `on_cancelled(leg, won=True)` — so is one that answered in the same
instant; every leg that ends is reported once (its error retrieved), even as the race ends.
Timers come from the injected clock (`call_at`), never a polling loop. Until the first timer the
primary is awaited alone, on one future and one timer (`_primary_alone`): most answers come
before it, and pay for nothing more.
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


def _due_at(clock: Clock, when: float, handles: list[TimerHandle]) -> asyncio.Future[None]:
    """A future done at `when`: at once if that passed while the primary was awaited alone, else
    on a timer (added to `handles`)."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if when <= clock.now():
        fut.set_result(None)
    else:
        handles.append(_timer(clock, when, fut))
    return fut


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
    first_timer = hedge_at if hedge_at is not None and hedge_at < deadline else deadline
    if await _primary_alone(clock, primary, first_timer, on_failed, on_cancelled):
        return primary, primary.task.result()  # the usual case: answered before any timer
    loop = asyncio.get_running_loop()
    legs = [primary]
    errors: dict[int, BaseException] = {}
    handles: list[TimerHandle] = []
    due = _due_at(clock, deadline, handles)
    hedge_due = _due_at(clock, hedge_at, handles) if hedge_at is not None and hedge_at < deadline else None
    starting: asyncio.Future[Leg[T] | None] | None = None
    won = False
    try:
        while True:
            # every leg not seen to fail: a hedge may have ended before the race first looks at it
            running = [leg for leg in legs if leg.index not in errors]
            if not running and starting is None:
                raise errors.get(primary.index) or next(iter(errors.values()))
            waits: set[asyncio.Future[Any]] = {leg.task for leg in running} | {due}
            for extra in (hedge_due, starting):
                if extra is not None:
                    waits.add(extra)
            if not any(f.done() for f in waits):  # (a timer passed while the primary was alone)
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if (winner := _ended(running, errors, on_failed, on_cancelled)) is not None:
                won = True
                return winner, winner.task.result()
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
    except BaseException:  # (cancelled from outside: a leg may have ended unseen)
        for leg in legs:
            if leg.task.done() and leg.index not in errors:
                _report_ended(leg, on_failed, on_cancelled)
        raise
    finally:
        await _finish(handles, starting, legs, won, on_cancelled)


async def _primary_alone(
    clock: Clock,
    primary: Leg[T],
    until: float,
    on_failed: Callable[[Leg[T], BaseException], None],
    on_cancelled: Callable[[Leg[T], bool], None],
) -> bool:
    """Wait for the primary alone until `until`, the race's first timer: True if it answered, False
    if the timer came first; its failure is reported and raised, as the full race would. One
    future and one timer, not the full race's (`asyncio.wait` over the legs and two timers): the
    live path's answers nearly all come before any timer."""
    woken: asyncio.Future[None] = primary.task.get_loop().create_future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    primary.task.add_done_callback(wake)
    timer = clock.call_at(until, wake)
    try:
        await woken
    except BaseException:  # the race itself cancelled: its leg with it
        if primary.task.done():
            _report_ended(primary, on_failed, on_cancelled)
        await _finish([], None, [primary], False, on_cancelled)
        raise
    finally:
        timer.cancel()
        primary.task.remove_done_callback(wake)
    task = primary.task
    if not task.done():
        return False
    exc = asyncio.CancelledError() if task.cancelled() else task.exception()
    if exc is not None:
        on_failed(primary, exc)
        raise exc
    return True


def _ended(
    running: list[Leg[T]],
    errors: dict[int, BaseException],
    on_failed: Callable[[Leg[T], BaseException], None],
    on_cancelled: Callable[[Leg[T], bool], None],
) -> Leg[T] | None:
    """The first of `running` that answered, if any; every other leg that ended is reported now
    (one failing or answering in the same instant as the winner too), failures kept in `errors`."""
    winner: Leg[T] | None = None
    for leg in running:
        if leg.task.done():
            exc = asyncio.CancelledError() if leg.task.cancelled() else leg.task.exception()
            if exc is None and winner is None:
                winner = leg
            elif exc is None:  # answered in the same instant: charged, not used
                on_cancelled(leg, True)
            else:
                errors[leg.index] = exc
                on_failed(leg, exc)
    return winner


def _report_ended(
    leg: Leg[T],
    on_failed: Callable[[Leg[T], BaseException], None],
    on_cancelled: Callable[[Leg[T], bool], None],
) -> None:
    """A leg that ended while the race was not looking: its failure reported (and so retrieved),
    its answer, if any, abandoned (the provider charged it; nobody uses it)."""
    if leg.task.cancelled():
        on_cancelled(leg, False)
    elif (exc := leg.task.exception()) is not None:
        on_failed(leg, exc)
    else:
        on_cancelled(leg, True)


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
