"""A FIFO admission queue woken by one timer: the waiting mechanism under the quota pool.

Waiters are served strictly in arrival order: the head is admitted as soon as `wait_for(head)`
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
        self._queue: deque[_Waiter[T, R]] = deque()
        self._timer: TimerHandle | None = None
        self._timer_when = math.inf

    def busy(self) -> bool:
        """Whether anybody is waiting (a newcomer must queue behind them)."""
        return self._head() is not None

    def waiting(self) -> Iterator[T]:
        """The items still waiting, head first."""
        return (w.item for w in self._queue if not w.future.done())

    def __len__(self) -> int:
        return sum(1 for _ in self.waiting())

    async def wait(self, item: T, *, front: bool = False) -> R:
        """Queue `item` (at the head with `front`: an urgent item) and wait for its admission."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        waiter = _Waiter(item, future)
        if front:
            self._queue.appendleft(waiter)
        else:
            self._queue.append(waiter)
        self.wake()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled() and future.exception() is None:
                self._release(future.result())  # admitted, but the caller is gone
            else:
                with contextlib.suppress(ValueError):
                    self._queue.remove(waiter)
            self.wake()
            raise

    def fail(self, reason: Callable[[T], BaseException | None]) -> int:
        """Fail every waiter for which `reason(item)` gives an exception; how many failed."""
        failed = 0
        for waiter in list(self._queue):
            error = None if waiter.future.done() else reason(waiter.item)
            if error is not None:
                self._queue.remove(waiter)
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
            self._queue.popleft()
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
        while self._queue:
            self._queue.popleft().future.cancel()

    def _head(self) -> _Waiter[T, R] | None:
        while self._queue and self._queue[0].future.done():
            self._queue.popleft()
        return self._queue[0] if self._queue else None

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
