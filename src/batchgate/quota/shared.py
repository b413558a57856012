"""One provider key's quota shared with other processes: the gate a request passes after its
own pool admitted it, and the channel its settlements go back through.

Quota is taken from the store in leases: one `apply` admits a slice of the shared pace
(`LEASE_SECONDS` of each dimension's rate, or of its window allowance if less; never less than
the request asking), logged in the store's window log under the lease's own key; the process
then spends it request by request without asking again, and gives back what is left when the
next request does not fit (riding on the next lease's `apply`), when the lease is `LEASE_LIFE`
old (a clock timer), on a pause, a drain or `close`. A key whose slice is under one request (under
50 a second) leases one request at a time: a store call per request, cheap at that pace.

Why leases. Measured with bench/overhead.py (4,000 requests, a provider answering at once, a
limit declared far above the pace reached): one SQLite transaction per request made the default
run (`--quota local`) cost 2.2× the CPU of `--quota memory` (1.08 against 0.50 ms per request),
and the window log it rewrote grew with the rate (every admission of the last second, read and
written as JSON by every transaction). With leases that run makes 67 store calls in all, not
~4,000, and costs within the noise of `--quota memory`. The other options weighed: a lock-free
shared-memory ring would still synchronise every request across processes, and would be a second
implementation of the store's arithmetic beside `ledger.apply` (which Redis runs as Lua) with
none of its conformance; publishing only while another process is registered costs nothing alone,
but a lone process's unpublished sends reach a process joining mid-run late (after the joiner's
first sends) or not at all. Leases keep one store protocol and one conformance suite, help Redis
as much as SQLite, and a process joining mid-run shares at once: it asks the store, where each
other process holds at most one slice. What they cost in accuracy: a lease's log entry counts
from its take to its close plus the hold (restamped then), so a window may count
up to a slice more than was sent in it (never less); and a 429 or a pause in one process reaches
another's open lease at its next `apply`, within `LEASE_LIFE`.

`take(res)` spends from the current lease when the request fits and no other take of this
process is waiting; otherwise it waits, in this process's FIFO order (urgent takes — live
requests, hedges — first), until the store admits a new lease at the shared pace (the pool's
own pace: the provider's limit × safety × its AIMD factor) and within every dimension's shared
window log (the pool's window allowance: what one second may hold, whoever sent it). On a
refusal it waits on a clock timer for the moment the store computed, then asks again — the
store's answer, not polling. Refunds, reconcile deltas, retry-hint pauses and 429 drains
(`give_back`, `adjust`, `pause`, `drain`, called by the pool) collect in one `Settle` that rides
on the next `apply`, each refund and delta on the bucket and on the lease's log entry alike:
pauses and drains are delivered at once (the other processes must stop), and so is a restamp
(`sent`: a request that left well after its lease closed counts in the window from then);
refunds and reconcile deltas within `SETTLE_WITHIN` seconds (a clock timer) when no take carries
them sooner.
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
LEASE_SECONDS = 0.02  # a lease is this many seconds of each dimension's shared rate (or window allowance)
LEASE_LIFE = 0.05  # seconds after which a lease's unspent rest goes back to the store
_FITS = 1e-9  # relative room for floating-point sums when a request is matched to a lease


class _Turns:
    """One holder at a time; waiters in FIFO order, urgent ones before all others."""

    __slots__ = ("_held", "_lanes")

    def __init__(self) -> None:
        self._held = False
        self._lanes: Lanes[asyncio.Future[None]] = Lanes()

    def held(self) -> bool:
        return self._held

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


class _Lease:
    """A slice of the shared quota the store admitted in one `apply`: its log entry (`entry`:
    key, what the store holds for it, its hold, when taken), what is left to spend here, the
    longest hold of a request spent from it and when the last of them left (None: none yet)."""

    __slots__ = ("entry", "hold", "left", "sent", "timer")

    def __init__(self, entry: SharedEntry, timer: TimerHandle) -> None:
        self.entry = entry
        self.left = dict(entry.amounts)
        self.hold = entry.hold
        self.sent: float | None = None
        self.timer = timer

    def spend(self, amounts: Mapping[str, float]) -> bool:
        """Take `amounts` from what is left; False (nothing taken) if they do not fit."""
        left = self.left
        for name, amount in amounts.items():
            if amount > 0 and left.get(name, 0.0) < amount * (1.0 - _FITS):
                return False
        for name, amount in amounts.items():
            if amount > 0:
                left[name] -= amount
        return True


def lease_amounts(paces: Mapping[str, Pace], amounts: Mapping[str, float]) -> dict[str, float]:
    """What a lease asks of each dimension: `LEASE_SECONDS` of its rate (or of its window
    allowance per second, if less), and never less than the request asking."""
    out = dict(amounts)
    for name, pace in paces.items():
        out[name] = max(out.get(name, 0.0), min(pace.rate, pace.window) * LEASE_SECONDS)
    return out


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
        self._lease: _Lease | None = None
        self.takes = 0  # store calls that admitted (a lease each)
        self.waits = 0  # store calls that answered "wait"
        self.spent = 0  # requests admitted from leases
        self.failure: QuotaStoreUnavailable | None = None
        self._prefix = f"{os.getpid():x}.{secrets.token_hex(4)}."  # this process's lease keys
        self._serial = 0

    async def take(self, res: Reservation, *, urgent: bool = False) -> None:
        """Wait until the store admits `res`'s amounts (from this process's lease, or a new
        one); they are then recorded on `res.shared`. `urgent` asks before every non-urgent take
        of this process still waiting its turn."""
        if self.take_now(res):
            return
        hold = max((entry.hold for entry in res.logged.values()), default=0.0)
        await self._turns.acquire(urgent)
        try:
            while not self._spend(res, hold):
                await self._new_lease(res.charged, hold)
        finally:
            self._turns.release()

    def take_now(self, res: Reservation) -> bool:
        """`take` without waiting: True if `res` was admitted from this process's lease now (no
        other take waiting its turn), else False and nothing taken."""
        hold = max((entry.hold for entry in res.logged.values()), default=0.0)
        return not self._turns.held() and self._spend(res, hold)

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

    def credit(self, name: str, amount: float) -> None:
        """Dimension `name`'s bucket holds `amount` more: the pool learned it is deeper than it
        thought (`quota.output_hold`), so the store's level rises with the capacity, as ours did."""
        if amount > 0:
            self._pending.deltas[name] = self._pending.deltas.get(name, 0.0) - amount
            self._schedule()

    def sent(self, res: Reservation) -> None:
        """`res`'s request leaves now: its open lease's entry counts from when the lease closes
        (told the store then); sent well after its lease closed, it is told at once, before the
        entry could leave the store's window too early."""
        entry = res.shared
        if entry is None or entry.hold <= 0:
            return
        lease = self._lease
        if lease is not None and lease.entry.key == entry.key:
            lease.sent = self._clock.now()
            return
        if self._clock.now() - entry.taken_at > RESTAMP_AFTER:
            self._pending.restamps[entry.key] = Restamp(entry.hold, dict(entry.amounts))
            self._schedule()

    def pause(self, seconds: float) -> None:
        self._close_lease()
        self._pending.pause = max(self._pending.pause, seconds)
        self._schedule()

    def drain(self) -> None:
        self._close_lease()
        self._pending.drain = True
        self._schedule()

    async def close(self) -> None:
        """Return the lease's rest and deliver what is pending (best effort), then stop."""
        self._close_lease()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flush is not None:
            with contextlib.suppress(asyncio.CancelledError, QuotaStoreUnavailable):
                await self._flush
        if not self._pending.empty():
            with contextlib.suppress(QuotaStoreUnavailable):
                await self._apply(None)

    # -- leases ----------------------------------------------------------------------------------

    def _spend(self, res: Reservation, hold: float) -> bool:
        """Admit `res` from the current lease if it fits."""
        lease = self._lease
        if lease is None or not lease.spend(res.charged):
            return False
        lease.hold = max(lease.hold, hold)
        self.spent += 1
        res.shared = SharedEntry(lease.entry.key, dict(res.charged), hold, self._clock.now())
        return True

    async def _new_lease(self, amounts: Mapping[str, float], hold: float) -> None:
        """Return the current lease's rest and wait until the store admits a new one that
        `amounts` fits in."""
        self._close_lease()
        self._serial += 1
        request = Take(f"{self._prefix}{self._serial:x}", lease_amounts(self._paces(), amounts), hold)
        while (wait := await self._apply(request)) > 0.0:
            self.waits += 1
            await self._clock.sleep(min(wait, LONGEST_WAIT))
        self.takes += 1
        now = self._clock.now()
        timer = self._clock.call_at(now + LEASE_LIFE, self._on_lease_expiry)
        self._lease = _Lease(SharedEntry(request.key, dict(request.amounts), hold, now), timer)

    def _close_lease(self) -> None:
        """Give the lease's unspent rest back and restamp its entry from when its last request
        left — not from now: a lease of one request closes `LEASE_LIFE` after it left, and an
        entry counted from then held every window that much longer (issue 39: at a low rate the
        ledger paced at 0.96 of `--quota memory`)."""
        lease, self._lease = self._lease, None
        if lease is None:
            return
        lease.timer.cancel()
        entry = lease.entry
        for name, left in lease.left.items():
            if left != 0:
                self._add(entry, name, -left)
        sent = lease.sent
        if sent is not None and (sent - entry.taken_at > RESTAMP_AFTER or lease.hold > entry.hold):
            hold = max(0.0, lease.hold - (self._clock.now() - sent))  # counts from `sent`
            self._pending.restamps[entry.key] = Restamp(hold, dict(entry.amounts))

    def _on_lease_expiry(self) -> None:
        if self._lease is not None:  # a take waiting its turn to spend from it asks for another
            self._close_lease()
            self._schedule()

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
        return (
            f"SharedQuota({self.store.describe()!r}, takes={self.takes}, spent={self.spent}, "
            f"waits={self.waits})"
        )
