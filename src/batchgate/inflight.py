"""A provider's in-flight cap whose size can change: the mechanism under the learned concurrency.

`async with limit:` (or `async with limit.place(urgent=True)`) holds one place while a request is
out. Waiters are served in FIFO order, urgent ones (live requests) before all others, woken when a
place is released or the limit grows (no polling); lowering the limit takes effect
as places come back (nobody already in flight is interrupted). A limit of None admits everybody.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from batchgate.lanes import Lanes


class InflightLimit:
    """An adjustable semaphore; see the module docstring."""

    __slots__ = ("_lanes", "_limit", "in_use")

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self.in_use = 0
        self._lanes: Lanes[asyncio.Future[None]] = Lanes()

    @property
    def limit(self) -> int | None:
        return self._limit

    def set_limit(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self._limit = limit
        self._wake()

    def _free(self) -> bool:
        return self._limit is None or self.in_use < self._limit

    def try_acquire(self, *, urgent: bool = False) -> bool:
        """Take a place now if one is free and nobody waits ahead (no future, no await)."""
        if not self._lanes.ahead_of(urgent) and self._free():
            self.in_use += 1
            return True
        return False

    async def acquire(self, *, urgent: bool = False) -> None:
        """Take a place; `urgent` waits ahead of every ordinary waiter (FIFO among the urgent)."""
        if self.try_acquire(urgent=urgent):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lanes.append(fut, urgent=urgent)
        try:
            await fut
        except asyncio.CancelledError:
            if self._lanes.leave(fut):
                self.release()  # handed a place as the caller went away
            raise

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    def _wake(self) -> None:
        while self._free() and (fut := self._lanes.popleft()) is not None:
            self.in_use += 1
            fut.set_result(None)

    def locked(self) -> bool:
        """Whether a newcomer would have to wait."""
        return bool(self._lanes) or not self._free()

    def waiting(self) -> int:
        return self._lanes.pending()

    def place(self, *, urgent: bool = False) -> Place:
        """`async with limit.place(urgent=...):` holds one place for the block."""
        return Place(self, urgent)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"InflightLimit({self.in_use}/{self._limit}, waiting={self.waiting()})"


class Place:
    """One place of an `InflightLimit` held for an `async with` block."""

    __slots__ = ("_limit", "_urgent")

    def __init__(self, limit: InflightLimit, urgent: bool) -> None:
        self._limit = limit
        self._urgent = urgent

    async def __aenter__(self) -> None:
        await self._limit.acquire(urgent=self._urgent)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._limit.release()
