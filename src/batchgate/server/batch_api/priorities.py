"""Priorities as weighted shares of the shared gateway: each running job may have
`ceil(C * w / W)` tasks (so at least one) in flight or waiting for quota at once, where C is the
gateway's concurrency, w the job's weight (high 6, normal 3, low 1) and W the weights of every
running job summed. The quota pool serves its waiters in turn, so on a constrained provider each
job's share of the answers follows its share of the waiting tasks; a low job always has one, so
it never starves, and a job running alone has the whole gateway. The limits are set again
whenever a job starts or ends (no polling).

Which waiting job starts next is an order, not a share: `Places` hands a freed place to the
highest priority waiting (first come first among equals)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from typing import Protocol

WEIGHTS = {"high": 6, "normal": 3, "low": 1}


class Limited(Protocol):
    def set_concurrency(self, limit: int) -> None: ...


class PriorityShares:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._running: dict[str, tuple[Limited, int]] = {}

    def limits(self) -> dict[str, int]:
        """Each running job's limit now."""
        total = sum(w for _, w in self._running.values())
        share = self.concurrency / total if total else 0.0
        return {job: max(1, math.ceil(share * weight)) for job, (_, weight) in self._running.items()}

    def started(self, job_id: str, engine: Limited, priority: str) -> None:
        self._running[job_id] = (engine, WEIGHTS.get(priority, WEIGHTS["normal"]))
        self._apply()

    def ended(self, job_id: str) -> None:
        if self._running.pop(job_id, None) is not None:
            self._apply()

    def _apply(self) -> None:
        for job, limit in self.limits().items():
            self._running[job][0].set_concurrency(limit)


class Places:
    """At most `count` jobs run at once. A place that frees goes to the waiting job of the highest
    priority, first come first among equals (a later HIGH starts before an earlier NORMAL); a
    waiter cancelled after it was handed a place passes it on."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    async def acquire(self, priority: str) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rank = -WEIGHTS.get(priority, WEIGHTS["normal"])
        heapq.heappush(self._waiting, (rank, next(self._seq), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # handed a place as it was cancelled: the next waiter gets it
            raise

    def release(self) -> None:
        while self._waiting:
            _, _, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1
