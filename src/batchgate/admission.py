"""Admission across a route's targets: one request's wait for quota at whichever of its targets
admits it first (and then for the key's shared quota), and the waits a stop ends.

The request waits in every candidate's queue at once and takes the first admission; a target
taken out or paused meanwhile has its queued waits cancelled (`requeue`), so they look again;
`stop` cancels every wait (the scheduler's `stop_sending`). Nothing here decides whether a target
is usable: the scheduler does (`policy/takeout.py`, `policy/circuit.py`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from batchgate.clock import Clock
from batchgate.errors import DispatchStopped
from batchgate.models import Cost
from batchgate.policy.routing import choose_target
from batchgate.quota.pool import QuotaPool, Reservation
from batchgate.runtime import ProviderRuntime


@dataclass(frozen=True, slots=True)
class Target:
    runtime: ProviderRuntime
    model: str


Candidate = tuple[Target, Cost, int, int]  # a target, the cost there, its prompt part, our count


class Admission:
    """One scheduler's waits for quota; see the module docstring."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.stopping = False
        self.acquiring: set[asyncio.Future[Any]] = set()  # every wait `stop` ends
        self.queued: dict[asyncio.Future[Any], QuotaPool] = {}  # waits for a pool's quota

    def stop(self) -> None:
        """No request waits any longer: every wait ends (the waiters raise `DispatchStopped`)."""
        self.stopping = True
        for wait in self.acquiring:
            wait.cancel()

    def requeue(self, pool: QuotaPool) -> None:
        """The requests queued for `pool`'s quota look again (its target was taken out or paused)."""
        for wait, queued_at in list(self.queued.items()):
            if queued_at is pool:
                wait.cancel()

    async def take_shared(self, pool: QuotaPool, reservation: Reservation, urgent: bool = False) -> None:
        """Pass the key's shared quota too (`pool.shared`: other processes' sends count) before
        sending; on any failure the reservation is left to its `Held`, which refunds it (nothing
        was sent)."""
        shared = pool.shared
        if shared is None or shared.take_now(reservation):  # most requests: the lease covers them
            return
        wait = asyncio.ensure_future(shared.take(reservation, urgent=urgent))
        self.acquiring.add(wait)
        try:
            await asyncio.wait({wait})
        except asyncio.CancelledError:
            wait.cancel()
            raise
        finally:
            self.acquiring.discard(wait)
        if wait.cancelled():  # stop_sending
            raise DispatchStopped()
        failure = wait.exception()
        if failure is not None:
            raise failure

    async def acquire_once(
        self, candidates: list[Candidate], urgent: bool = False
    ) -> tuple[Candidate, Reservation] | None:
        """Reserve quota at whichever healthy target admits the request first (None: its waits
        were at targets taken out meanwhile). The request waits in every candidate's queue at
        once and takes the first admission (the others are withdrawn, and refunded if they were
        admitted in the same instant). Binding a request to a target only when quota is really
        there keeps every target busy until the route's work runs out, so a route's throughput
        approaches the sum of its targets' quotas."""
        if self.stopping:
            raise DispatchStopped()
        now = self._clock.now()
        live = [c for c in candidates if c[0].runtime.breaker.available(now)] or candidates
        first = live[0] if len(live) == 1 else _soonest(live)
        if first is not None:
            res = first[0].runtime.pool.try_acquire(first[1], count=first[3])
            if res is not None:
                first[0].runtime.breaker.allow(now)
                return first, res
        waits = {
            asyncio.ensure_future(c[0].runtime.pool.acquire(c[1], count=c[3], urgent=urgent)): c for c in live
        }
        self.acquiring.update(waits)
        self.queued.update((w, c[0].runtime.pool) for w, c in waits.items())
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            for w, c in waits.items():
                if w.done() and not w.cancelled() and w.exception() is None:
                    c[0].runtime.pool.refund(w.result())
            raise
        finally:
            self.acquiring.difference_update(waits)
            for w in waits:
                self.queued.pop(w, None)
            pending = [w for w in waits if not w.done()]
            for w in pending:
                w.cancel()
            if pending:  # a waiter admitted as it is cancelled gives its admission back itself
                await asyncio.gather(*pending, return_exceptions=True)
        winner: tuple[Candidate, Reservation] | None = None
        failure: BaseException | None = None
        for w, c in waits.items():
            if w.cancelled():
                continue
            exc = w.exception()
            if exc is not None:
                failure = failure or exc
            elif winner is None and not self.stopping:
                winner = (c, w.result())
            else:
                c[0].runtime.pool.refund(w.result())  # admitted in the same instant: give it back
        if winner is None:
            if self.stopping:
                raise DispatchStopped()
            if failure is not None:
                raise failure
            return None  # every wait was cancelled by a take-out or a pause (`requeue`)
        winner[0][0].runtime.breaker.allow(self._clock.now())
        return winner


def _soonest(live: list[Candidate]) -> Candidate | None:
    """Among the targets with nobody queued (their wait estimate is cheap and any queued one
    could not admit at once anyway), the one that can serve soonest (`choose_target`)."""
    return choose_target(
        [c for c in live if not c[0].runtime.pool.busy()],
        wait_of=lambda c: c[0].runtime.pool.wait_estimate(c[1]),
        headroom_of=lambda c: c[0].runtime.pool.headroom(),
    )
