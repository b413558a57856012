"""A FIFO admission queue woken by one timer: the waiting mechanism under the quota pool.

Waiters are served strictly in arrival order within two lanes: every urgent waiter (a live
request, a hedge) is served before every ordinary one, FIFO among the urgent ones too. The head
— the first urgent waiter, else the first ordinary one — is admitted as soon as `wait_for(head)`
says 0, and nobody behind it passes it. One timer (`clock.call_at`) is armed for the head's
deadline; the owner calls `wake()` whenever the answer may have changed earlier (capacity given
back, limits changed). A cancelled waiter leaves the queue and the next one is examined; a waiter
admitted in the same instant it was cancelled has its admission released again.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from batchgate.clock import Clock, TimerHandle

T = TypeVar("T")
R = TypeVar("R")


class _Waiter(Generic[T, R]):
    __slots__ = ("future", "item")

    def __init__(self, item: T, future: asyncio.Future[R]) -> None:
        self.item = item
        self.future = future


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
        self._urgent: deque[_Waiter[T, R]] = deque()
        self._queue: deque[_Waiter[T, R]] = deque()
        self._timer: TimerHandle | None = None
        self._timer_when = math.inf

    def busy(self) -> bool:
        """Whether anybody is waiting (a newcomer must queue behind them)."""
        return self._head() is not None

    def waiting(self) -> Iterator[T]:
        """The items still waiting, head first (the urgent lane, then the ordinary one)."""
        return (w.item for lane in (self._urgent, self._queue) for w in lane if not w.future.done())

    def __len__(self) -> int:
        return sum(1 for _ in self.waiting())

    async def wait(self, item: T, *, urgent: bool = False) -> R:
        """Queue `item` (in the urgent lane: ahead of every ordinary waiter, behind earlier urgent
        ones) and wait for its admission."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(item, future)
        lane = self._urgent if urgent else self._queue
        lane.append(waiter)
        self.wake()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._release(future.result())  # admitted, but the caller is gone
            else:
                with contextlib.suppress(ValueError):
                    lane.remove(waiter)
            self.wake()
            raise

    def fail(self, reason: Callable[[T], BaseException | None]) -> int:
        """Fail every waiter for which `reason(item)` gives an exception; how many failed."""
        failed = 0
        for lane in (self._urgent, self._queue):
            for waiter in list(lane):
                error = None if waiter.future.done() else reason(waiter.item)
                if error is not None:
                    lane.remove(waiter)
                    waiter.future.set_exception(error)
                    failed += 1
        if failed:
            self.wake()
        return failed

    def wake(self) -> None:
        """Admit every head that may go now, then arm the one timer for the next head's deadline."""
        now = self._clock.now()
        wait = math.inf
        while (head := self._head()) is not None:
            wait = self._wait_for(head.item, now)
            if wait > 0.0:
                break
            (self._urgent if self._urgent else self._queue).popleft()
            head.future.set_result(self._admit(head.item, now))
        if self._head() is None or math.isinf(wait):
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
        for lane in (self._urgent, self._queue):
            while lane:
                lane.popleft().future.cancel()

    def _head(self) -> _Waiter[T, R] | None:
        for lane in (self._urgent, self._queue):
            while lane and lane[0].future.done():
                lane.popleft()
            if lane:
                return lane[0]
        return None

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
