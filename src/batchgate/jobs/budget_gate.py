"""Reserving a run's spending against the budget before it happens: each live call (and each batch
a run submits) reserves its worst case, then settles with what it was really billed.

A reservation that does not fit waits while others are outstanding (they usually cost less than
their worst case); when nothing is outstanding and it still does not fit, the budget is spent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from batchgate.jobs.guards import BudgetGuard

Amount = tuple[float, int]  # USD, tokens
FREE: Amount = (0.0, 0)


class BudgetGate:
    """The run's reservations over one `BudgetGuard`; `stop(reason)` is called when it is spent."""

    def __init__(self, guard: BudgetGuard, stop: Callable[[str], None], stopping: Callable[[], bool]) -> None:
        self.guard = guard
        self._stop = stop
        self._stopping = stopping
        self._outstanding = 0
        self._settled: asyncio.Future[None] | None = None  # resolved at the next settlement

    @property
    def limited(self) -> bool:
        return self.guard.limited

    async def reserve(self, amount: Amount) -> Amount | None:
        """Reserve `amount`, waiting for outstanding reservations to settle when it does not fit;
        None when the run must stop instead (the budget is spent, or it is stopping already)."""
        if not self.limited:
            return FREE
        while not self.guard.admit(*amount):
            if self._outstanding == 0:
                self._stop(self.guard.reason())
                return None
            if self._settled is None:
                self._settled = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._settled)
            if self._stopping():
                return None
        self._take(amount)
        return amount

    def try_reserve(self, amount: Amount) -> bool:
        """Reserve `amount` only if it fits now (no waiting, no stop)."""
        if not self.limited:
            return True
        if not self.guard.admit(*amount):
            return False
        self._take(amount)
        return True

    def settle(self, reserved: Amount, billed: Amount) -> None:
        """End one reservation with what was really billed (`reserved` FREE: nothing was reserved)."""
        if not self.limited:
            return
        self.guard.settle(reserved[0], reserved[1], billed[0], billed[1])
        if reserved != FREE:
            self._outstanding -= 1
        waiters, self._settled = self._settled, None
        if waiters is not None and not waiters.done():
            waiters.set_result(None)

    def _take(self, amount: Amount) -> None:
        if amount == FREE:
            return
        self.guard.reserve(*amount)
        self._outstanding += 1
