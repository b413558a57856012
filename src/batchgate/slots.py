"""The global concurrency cap, shared fairly between providers.

Each provider is guaranteed an equal share of the global slots; beyond its share it may borrow
free slots, but never those that another *active* provider still needs to reach its share. A
provider counts as active while it has work in flight or waiting, and for `idle_after` seconds
after its last request (from the start, every provider is active), so its share is kept for it
even before its first request arrives. A slow or hung provider can therefore never take every
global slot from the others, while an idle one lends its share. Waiters are woken on release,
in FIFO order — no polling; a provider's urgent waiters (live requests) go before its others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from types import TracebackType

from batchgate.clock import Clock
from batchgate.lanes import Lanes


class FairSlots:
    def __init__(self, total: int, providers: Iterable[str], clock: Clock, idle_after: float = 10.0) -> None:
        names = list(providers)
        self._clock = clock
        self.idle_after = idle_after
        self._last_seen = dict.fromkeys(names, clock.now())
        if total < 1 or not names:
            raise ValueError("need at least one slot and one provider")
        self.total = total
        self.share = max(1, total // len(names))
        self.in_use = dict.fromkeys(names, 0)
        self.used = 0
        # each provider's waiters; a cancelled one counts as waiting until dropped from its lane
        self._lanes: dict[str, Lanes[asyncio.Future[None]]] = {n: Lanes() for n in names}

    def _may_take(self, name: str) -> bool:
        if self.used >= self.total:
            return False
        if self.in_use[name] < self.share:
            return True
        now = self._clock.now()
        owed = sum(
            max(0, self.share - used)
            for other, used in self.in_use.items()
            if other != name and (self._lanes[other] or now - self._last_seen[other] < self.idle_after)
        )
        return self.total - self.used > owed

    def _take(self, name: str) -> None:
        self.in_use[name] += 1
        self.used += 1

    def try_acquire(self, name: str, *, urgent: bool = False) -> bool:
        """Take one of `name`'s slots now if `acquire` would not wait (no future, no await)."""
        self._last_seen[name] = self._clock.now()
        if not self._lanes[name].ahead_of(urgent) and self._may_take(name):
            self._take(name)
            return True
        return False

    async def acquire(self, name: str, *, urgent: bool = False) -> None:
        """Take one of `name`'s slots; `urgent` waits ahead of that provider's other waiters."""
        if self.try_acquire(name, urgent=urgent):
            return
        lanes = self._lanes[name]
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lanes.append(fut, urgent=urgent)
        try:
            await fut
        except asyncio.CancelledError:
            if lanes.leave(fut):
                self.release(name)  # granted in the same instant the caller went away
            raise

    def release(self, name: str) -> None:
        self.in_use[name] -= 1
        self.used -= 1
        self._wake()

    def _wake(self) -> None:
        """Grant free slots to waiting providers in turn, each in its own FIFO order."""
        granted = True
        while granted and self.used < self.total:
            granted = False
            for name, lanes in self._lanes.items():
                if (fut := lanes.head()) is not None and self._may_take(name):
                    lanes.popleft()
                    self._take(name)
                    fut.set_result(None)
                    granted = True

    def slot(self, name: str, *, urgent: bool = False) -> Slot:
        """`async with slots.slot(name):` holds one of `name`'s slots for the block."""
        return Slot(self, name, urgent)

    def __repr__(self) -> str:
        waiting = sum(len(lanes) for lanes in self._lanes.values())
        return f"FairSlots(used={self.used}/{self.total}, share={self.share}, waiting={waiting})"


class Slot:
    """One slot held for an `async with` block (a plain class: a parked request keeps fewer
    objects alive than with a generator-based context manager)."""

    __slots__ = ("_name", "_slots", "_urgent")

    def __init__(self, slots: FairSlots, name: str, urgent: bool = False) -> None:
        self._slots = slots
        self._name = name
        self._urgent = urgent

    async def __aenter__(self) -> None:
        await self._slots.acquire(self._name, urgent=self._urgent)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._slots.release(self._name)
