"""Time, injected: every policy and wait in batchgate asks a Clock, never the wall clock directly.

`LoopClock` is the production clock (the running event loop's monotonic time and `call_at`).
`FakeClock` is for tests: time moves only when the test calls `advance`, timers fire in order,
and `sleep` waits on a timer, so nothing in a test really sleeps. `wall_time` is the wall clock
itself, the default of what takes a `wall` callable outside a loop (the job stores, `keys create`):
this module is the only one that reads it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


def wall_time() -> float:
    """Seconds since the Unix epoch, from the system's wall clock."""
    return time.time()


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch (for HTTP dates and reports)."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run `callback` once `now()` reaches `when`."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's clock: asyncio's loops keep `time.monotonic()` (`now` reads it
    directly, without looking the loop up: it is read many times per request); a loop that keeps
    another time (uvloop, say) has each `call_at` translated into its own."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return wall_time()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        loop = asyncio.get_running_loop()
        if type(loop).time is not _MONOTONIC_LOOP_TIME:
            when += loop.time() - time.monotonic()
        return loop.call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "LoopClock()"


_MONOTONIC_LOOP_TIME = asyncio.BaseEventLoop.time  # `time.monotonic()`: what `LoopClock.now` reads


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to; records every sleep it was asked for."""

    def __init__(self, start: float = 1000.0, wall_offset: float = 1_800_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_offset
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        timer = _FakeTimer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not fut.done():
                fut.set_result(None)

        self.call_at(self._now + max(0.0, seconds), wake)
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward, firing due timers in order (each sees `now()` at its own deadline)."""
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            self._now = max(self._now, when)
            if not timer.cancelled:
                timer.callback()
        self._now = target

    def next_deadline(self) -> float | None:
        """When the earliest pending timer fires (None when there is none)."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def __repr__(self) -> str:
        return f"FakeClock(now={self._now:.3f}, timers={self.pending_timers()})"
