"""Keeping a chunk's lease: a clock timer renews it every third of its length (no polling), and
the worker hears once when the store refuses a renewal, so it stops the chunk's work at once
(its commits would be refused by the fencing check anyway)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from batchgate.clock import Clock, TimerHandle
from batchgate.errors import LeaseLostError, StoreError
from batchgate.jobs.store.protocol import Chunk, JobStore


class LeaseKeeper:
    """Renews a chunk's lease every third of its length from a clock timer; calls `lost` once
    when the store refuses a renewal (the lease expired or was taken over)."""

    def __init__(
        self, store: JobStore, chunk: Chunk, seconds: float, clock: Clock, lost: Callable[[], None]
    ) -> None:
        self._store = store
        self._chunk = chunk
        self._seconds = seconds
        self._clock = clock
        self._lost = lost
        self._renewing: asyncio.Task[None] | None = None
        self._timer: TimerHandle | None = None
        self._schedule()

    def _schedule(self) -> None:
        self._timer = self._clock.call_at(self._clock.now() + self._seconds / 3, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._renewing = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        try:
            await self._store.renew_lease(self._chunk.job_id, self._chunk.token, self._seconds)
        except LeaseLostError:
            self._lost()
            return
        except StoreError:
            pass  # a store hiccup: try again at the next beat (expiry, if it comes, is final)
        self._schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._renewing is not None:
            self._renewing.cancel()
