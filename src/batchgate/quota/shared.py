"""One provider key's quota shared with other processes: the gate a request passes after its
own pool admitted it, and the channel its settlements go back through.

`take(res)` waits, in this process's FIFO order (urgent takes — live requests, hedges — first),
until the quota store admits the reservation's amounts at the shared pace (the pool's own pace:
the provider's limit × safety × its AIMD factor) and within every dimension's shared window log
(the pool's window allowance: what one second may hold, whoever sent it); the store logs them
under a key of this take's own, for as long as the pool's own log counts them. On a refusal it
waits on a clock timer for the moment the store computed, then asks again — the store's answer,
not polling. Refunds, reconcile deltas, retry-hint pauses and 429 drains (`give_back`, `adjust`,
`pause`, `drain`, called by the pool) collect in one `Settle` that rides on the next `apply`,
each refund and delta on the bucket and on the take's log entry alike: pauses and drains are
delivered at once (the other processes must stop), and so is a restamp (`sent`: a request that
left well after its take counts in the window from then); refunds and reconcile deltas within
`SETTLE_WITHIN` seconds (a clock timer) when no take carries them sooner — one store call per
request, not three.
A store that cannot be reached raises QuotaStoreUnavailable from `take`: nothing is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Callable, Mapping

from batchgate.clock import Clock, TimerHandle
from batchgate.errors import QuotaStoreUnavailable
from batchgate.lanes import Lanes
from batchgate.quota.limits import Reservation, SharedEntry
from batchgate.quota.store.protocol import Pace, QuotaStore, Restamp, Settle, Take

SETTLE_WITHIN = 0.25  # seconds a refund or a reconcile delta may wait for a take to carry it
SHARED_LEAD = 1.05  # a shared pool's own bucket runs this much ahead of the store's pace (`QuotaPool.share`)
RESTAMP_AFTER = 0.005  # seconds between take and send past which the store is told the send time
LONGEST_WAIT = 60.0  # a store that says "never" (a zero rate) is asked again after this long


class _Turns:
    """One holder at a time; waiters in FIFO order, urgent ones before all others."""

    __slots__ = ("_held", "_lanes")

    def __init__(self) -> None:
        self._held = False
        self._lanes: Lanes[asyncio.Future[None]] = Lanes()

    async def acquire(self, urgent: bool) -> None:
        if not self._held:
            self._held = True
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lanes.append(future, urgent=urgent)
        try:
            await future
        except asyncio.CancelledError:
            if self._lanes.leave(future):
                self.release()  # handed the turn as the caller went away
            raise

    def release(self) -> None:
        future = self._lanes.popleft()
        if future is None:
            self._held = False
        else:
            future.set_result(None)  # the turn passes on: still held


class SharedQuota:
    """See the module docstring."""

    def __init__(
        self, store: QuotaStore, quota: str, paces: Callable[[], Mapping[str, Pace]], clock: Clock
    ) -> None:
        self.store = store
        self.quota = quota
        self._paces = paces
        self._clock = clock
        self._turns = _Turns()  # FIFO: one request of this process at a time asks the store
        self._pending = Settle()
        self._flush: asyncio.Task[None] | None = None
        self._timer: TimerHandle | None = None
        self.takes = 0  # store calls that admitted
        self.waits = 0  # store calls that answered "wait"
        self.failure: QuotaStoreUnavailable | None = None
        self._prefix = f"{os.getpid():x}.{secrets.token_hex(4)}."  # this process's take keys
        self._serial = 0

    async def take(self, res: Reservation, *, urgent: bool = False) -> None:
        """Wait until the store admits `res`'s amounts; they are then recorded on `res.shared`.
        `urgent` asks before every non-urgent take of this process still waiting its turn."""
        self._serial += 1
        hold = max((entry.hold for entry in res.logged.values()), default=0.0)
        request = Take(f"{self._prefix}{self._serial:x}", dict(res.charged), hold)
        await self._turns.acquire(urgent)
        try:
            while True:
                wait = await self._apply(request)
                if wait <= 0.0:
                    break
                self.waits += 1
                await self._clock.sleep(min(wait, LONGEST_WAIT))
        finally:
            self._turns.release()
        self.takes += 1
        res.shared = SharedEntry(request.key, dict(request.amounts), hold, self._clock.now())

    # -- settlements (synchronous: called by the pool) ------------------------------------------

    def give_back(self, res: Reservation) -> None:
        """A refund: the provider never admitted what the store holds for `res`."""
        if (entry := res.shared) is not None:
            for name, amount in entry.amounts.items():
                if amount > 0:
                    self._add(entry, name, -amount)

    def adjust(self, res: Reservation, name: str, delta: float) -> None:
        """A reconcile: `res` is charged `delta` more of dimension `name` (less if negative)."""
        if (entry := res.shared) is not None and delta != 0:
            self._add(entry, name, delta)

    def sent(self, res: Reservation) -> None:
        """`res`'s request leaves now: if that is well after its take, its log entries count
        from now (delivered at once, before they could leave the store's window too early)."""
        entry = res.shared
        if entry is not None and entry.hold > 0 and self._clock.now() - entry.taken_at > RESTAMP_AFTER:
            self._pending.restamps[entry.key] = Restamp(entry.hold, dict(entry.amounts))
            self._schedule()

    def pause(self, seconds: float) -> None:
        self._pending.pause = max(self._pending.pause, seconds)
        self._schedule()

    def drain(self) -> None:
        self._pending.drain = True
        self._schedule()

    async def close(self) -> None:
        """Deliver what is pending (best effort), then stop."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flush is not None:
            with contextlib.suppress(asyncio.CancelledError, QuotaStoreUnavailable):
                await self._flush
        if not self._pending.empty():
            with contextlib.suppress(QuotaStoreUnavailable):
                await self._apply(None)

    # -- internals -------------------------------------------------------------------------------

    def _add(self, entry: SharedEntry, name: str, delta: float) -> None:
        entry.amounts[name] = entry.amounts.get(name, 0.0) + delta
        pending = self._pending
        pending.deltas[name] = pending.deltas.get(name, 0.0) + delta
        pending.add_entry(entry.key, name, delta)
        if self._timer is None:
            self._timer = self._clock.call_at(self._clock.now() + SETTLE_WITHIN, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self._pending.empty():
            self._schedule()

    async def _apply(self, take: Take | None) -> float:
        settle, self._pending = self._pending, Settle()
        try:
            wait = await self.store.apply(self.quota, self._paces(), take, settle)
        except QuotaStoreUnavailable as exc:
            settle.merge(self._pending)  # keep them for when the store is back
            self._pending = settle
            self.failure = exc
            raise
        self.failure = None
        return wait

    def _schedule(self) -> None:
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._deliver())

    async def _deliver(self) -> None:
        while not self._pending.empty():
            try:
                await self._apply(None)
            except QuotaStoreUnavailable:
                return  # kept pending; the next take reports the failure

    def __repr__(self) -> str:
        return f"SharedQuota({self.store.describe()!r}, takes={self.takes}, waits={self.waits})"
