"""Priorities as weighted shares of the shared gateway, by key first (issue 40): each running job
may have `ceil(C / K * w / W)` tasks (so at least one) in flight or waiting for quota at once,
where C is the gateway's concurrency, K the keys running jobs, w the job's weight (high 6, normal
3, low 1) and W the weights of its key's running jobs summed: one key's many jobs share what one
job of another key gets. The quota pool serves its waiters in turn, so on a constrained provider each
job's share of the answers follows its share of the waiting tasks; a low job always has one, so
it never starves, and a job running alone has the whole gateway. The limits are set again
whenever a job starts or ends (no polling).

Which waiting job starts next is an order, not a share: `Places` hands a freed place to the key
running the fewest jobs (a key holds at most `--max-jobs-per-key` places), and within it to the
highest priority waiting (first come first among equals)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import Counter
from typing import Protocol

WEIGHTS = {"high": 6, "normal": 3, "low": 1}


class Limited(Protocol):
    def set_concurrency(self, limit: int) -> None: ...


class PriorityShares:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._running: dict[str, tuple[Limited, int, str]] = {}  # job -> (engine, weight, key)

    def limits(self) -> dict[str, int]:
        """Each running job's limit now: the gateway split evenly between the keys running jobs,
        each key's part split between its jobs by weight (one key alone: by weight, as before)."""
        weights: Counter[str] = Counter()
        for _, weight, owner in self._running.values():
            weights[owner] += weight
        per_key = self.concurrency / len(weights) if weights else 0.0
        return {
            job: max(1, math.ceil(per_key * weight / weights[owner]))
            for job, (_, weight, owner) in self._running.items()
        }

    def started(self, job_id: str, engine: Limited, priority: str, owner: str = "") -> None:
        self._running[job_id] = (engine, WEIGHTS.get(priority, WEIGHTS["normal"]), owner)
        self._apply()

    def ended(self, job_id: str) -> None:
        if self._running.pop(job_id, None) is not None:
            self._apply()

    def _apply(self) -> None:
        for job, limit in self.limits().items():
            self._running[job][0].set_concurrency(limit)


class Places:
    """At most `count` jobs run at once, at most `per_owner` of them one key's (issue 40: six long
    batches of one tenant held every place while another's one-line batch waited). A place that
    frees goes to the key running the fewest jobs among those with a job waiting and room left,
    and within that key to its waiting job of the highest priority, first come first among equals
    (a later HIGH starts before an earlier NORMAL); a waiter cancelled after it was handed a place
    passes it on."""

    def __init__(self, count: int, per_owner: int | None = None) -> None:
        self._free = count
        self._per_owner = per_owner or count
        self._held: Counter[str] = Counter()
        self._waiting: dict[str, list[tuple[int, int, asyncio.Future[None]]]] = {}
        self._seq = itertools.count()

    def held(self, owner: str) -> int:
        return self._held[owner]

    async def acquire(self, priority: str, owner: str = "") -> None:
        if self._free > 0 and self._held[owner] < self._per_owner:
            self._take(owner)  # nobody who could take it is waiting: `_grant` runs at every change
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        rank = -WEIGHTS.get(priority, WEIGHTS["normal"])
        heapq.heappush(self._waiting.setdefault(owner, []), (rank, next(self._seq), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(owner)  # handed a place as it was cancelled: the next waiter gets it
            raise

    def release(self, owner: str = "") -> None:
        self._held[owner] -= 1
        if self._held[owner] <= 0:
            del self._held[owner]
        self._free += 1
        self._grant()

    def _take(self, owner: str) -> None:
        self._free -= 1
        self._held[owner] += 1

    def _grant(self) -> None:
        while self._free > 0 and (owner := self._next_owner()) is not None:
            queue = self._waiting[owner]
            _, _, turn = heapq.heappop(queue)
            if not queue:
                del self._waiting[owner]
            if not turn.done():
                self._take(owner)
                turn.set_result(None)

    def _next_owner(self) -> str | None:
        """The key with a waiter and room that runs the fewest jobs (the earliest waiter first)."""
        for owner in [o for o, q in self._waiting.items() if all(t.done() for _, _, t in q)]:
            del self._waiting[owner]  # only cancelled waiters left
        ready = [o for o in self._waiting if self._held[o] < self._per_owner]
        return min(ready, key=lambda o: (self._held[o], self._waiting[o][0][1]), default=None)
