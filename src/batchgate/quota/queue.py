"""A FIFO admission queue woken by one timer: the waiting mechanism under the quota pool.

Waiters are served strictly in arrival order within two lanes (`batchgate.lanes`): every urgent
waiter (a live request, a hedge) is served before every ordinary one, FIFO among the urgent ones
too. The head — the first urgent waiter, else the first ordinary one — is admitted as soon as
`wait_for(head)` says 0, and nobody behind it passes it. One timer (`clock.call_at`) is armed for
the head's deadline; the owner calls `wake()` whenever the answer may have changed earlier
(capacity given back, limits changed). A cancelled waiter leaves the queue and the next one is
examined; a waiter admitted in the same instant it was cancelled has its admission released again.
`drained()` waits, without a timer, until nobody is left waiting (a hedge spends only what the
queue leaves idle).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from batchgate.clock import Clock, TimerHandle
from batchgate.lanes import Held, Lanes

T = TypeVar("T")
R = TypeVar("R")


class FifoGate(Generic[T, R]):
    """Admits items in FIFO order when `wait_for(item, now)` reaches 0; see the module docstring."""

    def __init__(
        self,
        clock: Clock,
        wait_for: Callable[[T, float], float],
        admit: Callable[[T, float], R],
        release: Callable[[R], object],
    ) -> None:
        self._clock = clock
        self._wait_for = wait_for
        self._admit = admit
        self._release = release
        self._lanes: Lanes[Held[T, R]] = Lanes()
        self._timer: TimerHandle | None = None
        self._timer_when = math.inf
        self._drained: list[asyncio.Future[None]] = []  # woken once nobody is waiting

    def busy(self) -> bool:
        """Whether anybody is waiting (a newcomer must queue behind them)."""
        return self._lanes.head() is not None

    def waiting(self) -> Iterator[T]:
        """The items still waiting, head first (the urgent lane, then the ordinary one)."""
        return (w.item for w in self._lanes if not w.done())

    def __len__(self) -> int:
        return self._lanes.pending()

    async def drained(self) -> None:
        """Return once nobody is waiting (at once if nobody is)."""
        if not self.busy():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._drained.append(future)
        try:
            await future
        finally:
            if future.cancelled():  # given up (its hedge was not needed): a busy queue keeps no trace
                self._drained = [f for f in self._drained if f is not future]

    def _signal_drained(self) -> None:
        drained, self._drained = self._drained, []
        for future in drained:
            if not future.done():
                future.set_result(None)

    async def wait(self, item: T, *, urgent: bool = False) -> R:
        """Queue `item` (in the urgent lane: ahead of every ordinary waiter, behind earlier urgent
        ones) and wait for its admission."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        waiter = Held(item, future)
        self._lanes.append(waiter, urgent=urgent)
        self.wake()
        try:
            return await future
        except asyncio.CancelledError:
            if self._lanes.leave(waiter):
                self._release(future.result())  # admitted, but the caller is gone
            self.wake()
            raise

    def fail(self, reason: Callable[[T], BaseException | None]) -> int:
        """Fail every waiter for which `reason(item)` gives an exception; how many failed."""
        failed = 0
        for waiter in list(self._lanes):
            error = None if waiter.done() else reason(waiter.item)
            if error is not None:
                self._lanes.remove(waiter)
                waiter.future.set_exception(error)
                failed += 1
        if failed:
            self.wake()
        return failed

    def wake(self) -> None:
        """Admit every head that may go now, then arm the one timer for the next head's deadline."""
        now = self._clock.now()
        wait = math.inf
        while (head := self._lanes.head()) is not None:
            wait = self._wait_for(head.item, now)
            if wait > 0.0:
                break
            self._lanes.popleft()
            head.future.set_result(self._admit(head.item, now))
        if self._lanes.head() is None:
            self._cancel_timer()
            self._signal_drained()
            return
        if math.isinf(wait):
            self._cancel_timer()
            return
        when = now + wait
        if self._timer is not None and abs(when - self._timer_when) <= 1e-9:
            return
        self._cancel_timer()
        self._timer_when = when
        self._timer = self._clock.call_at(when, self._on_timer)

    def close(self) -> None:
        """Cancel the timer and every waiter."""
        self._cancel_timer()
        for waiter in self._lanes.clear():
            waiter.future.cancel()
        self._signal_drained()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_when = math.inf
        self.wake()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_when = math.inf

    def __repr__(self) -> str:
        return f"FifoGate(waiting={len(self)}, timer_at={self._timer_when:.3f})"
