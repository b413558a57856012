"""The quota pool of one provider key: admission against token buckets, FIFO and event-driven.

A request reserves its estimated cost on every limited dimension before it is sent (providers
charge prompt + max_tokens at admission; the prompt part as the pool's charge model says this
provider charges, `batchgate.quota.charge`) and the reservation is settled after: `reconcile`
with real usage, `refund` when the provider never admitted it. Buckets hold only the burst the
provider has shown it tolerates (`batchgate.quota.burst`; none at first), so requests leave
evenly spaced at the rate; a window log (`batchgate.quota.window`) keeps every window of a second
within the limit. Waiters queue in FIFO order, so a big request at the head is never starved by
small ones behind it; urgent ones (live requests, hedges) in a lane of their own served first
(`batchgate.quota.queue`); one timer (`clock.call_at`) is armed for the head's deadline and the
queue is also re-examined whenever capacity comes back, limits change or a pause ends — no
polling. Rates: declared (or header-reported, if lower) limits × safety × the AIMD factor; 429s
cut the factor, clean periods restore it, retry hints pause all. Over a whole limit: NeverFitsError.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from batchgate.clock import Clock
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.policy.aimd import AimdController, AimdSettings
from batchgate.quota import dimension as dim_
from batchgate.quota.bucket import TokenBucket
from batchgate.quota.burst import BurstLearner
from batchgate.quota.charge import ChargeModel
from batchgate.quota.dimension import TIMER_SLACK, Dimension
from batchgate.quota.header_style import HeaderStyle
from batchgate.quota.limits import QuotaLimits, QuotaStats, Reservation, cost_amounts
from batchgate.quota.queue import FifoGate
from batchgate.quota.reprice import OpenReservations
from batchgate.quota.settle import reconcile_deltas
from batchgate.quota.shared import SHARED_LEAD, SharedQuota
from batchgate.quota.store.protocol import Pace

_EVENTS = ("admitted", "refunded", "reconciled", "never_fit", "pauses", "calibrations")  # counted
__all__ = ["TIMER_SLACK", "QuotaLimits", "QuotaPool", "QuotaStats", "Reservation"]


class _Request:
    __slots__ = ("amounts", "cost", "count")

    def __init__(self, cost: Cost, amounts: dict[str, float], count: int | None) -> None:
        self.cost = cost
        self.amounts = amounts
        self.count = count  # our prompt count: the prompt parts are re-priced when it reaches the head


class QuotaPool:
    """Admission control for one provider key; see the module docstring."""

    def __init__(
        self, name: str, limits: QuotaLimits, clock: Clock, aimd: AimdSettings | None = None
    ) -> None:
        self.name = name
        self.limits = limits
        self._clock = clock
        self.aimd = AimdController(aimd)
        self.burst = BurstLearner()
        self.charges = ChargeModel()
        self._unsettled = OpenReservations()
        self.headers = HeaderStyle()
        now = clock.now()
        self._lead = 1.0
        self._dims: dict[str, Dimension] = {
            name_: Dimension(name_, limit, TokenBucket(0.0, 0.0, now))
            for name_, limit in limits.declared().items()
        }
        self._apply_rates(now, fill=True)
        self._gate: FifoGate[_Request, Reservation] = FifoGate(
            clock,
            lambda r, now: self._wait_for(self._reprice(r).amounts, now),
            lambda r, now: self._admit(r.cost, r.amounts, now, r.count),
            self.refund,
        )
        self._paused_until = -math.inf
        self.shared: SharedQuota | None = None  # set by `share`
        self._counts = dict.fromkeys(_EVENTS, 0)
        self.output_adjusted = False  # the provider settles output to the real output (`settle.py`)

    def settles_output(self, adjusted: bool) -> None:
        """The provider gives unused output back at an answer's end (or not): see `Dimension.hold`."""
        self.output_adjusted = adjusted
        if (out := self._dims.get("output_tokens")) is not None:
            out.hold = dim_.MIN_WINDOW if adjusted else 0.0
        self._apply_rates(self._clock.now(), fill=self._counts["admitted"] == 0)

    def share(self, shared: SharedQuota) -> None:
        """Share the key's quota through `shared`'s store, which paces every process; this bucket
        runs SHARED_LEAD ahead, so all wait at the store and take turns (in step, one wins all)."""
        self.shared, self._lead = shared, SHARED_LEAD
        self._apply_rates(self._clock.now())

    # -- admission ---------------------------------------------------------------------------

    def check_fits(self, cost: Cost) -> None:
        """Raise NeverFitsError if `cost` exceeds a whole per-minute limit on any dimension."""
        if (problem := dim_.never_fits(self.name, self._dims, cost_amounts(cost, self._dims))) is not None:
            self._counts["never_fit"] += 1
            raise problem

    async def acquire(self, cost: Cost, *, count: int | None = None, urgent: bool = False) -> Reservation:
        """Wait (FIFO) until `cost` is admissible, then reserve it; `urgent` (a live request, a
        hedge) queues in the urgent lane, ahead of every ordinary waiter and behind earlier urgent
        ones — still paced at the rate, it only passes the ordinary queue. With `count` (our prompt
        count) the prompt parts of `cost` are priced by the charge model as it stands when the
        request is admitted, not when it queued: `Reservation.cost` says what."""
        cost, amounts = self._prepare(cost, count)
        now = self._clock.now()
        if not self._gate.busy() and self._wait_for(amounts, now) <= 0.0:
            return self._admit_idle(cost, amounts, now, count)
        return await self._gate.wait(_Request(cost, amounts, count), urgent=urgent)

    def observe_usage(self, count: int, reported: int) -> None:
        """An answer's prompt (our `count`, the provider's `reported` tokens) for the charge model;
        if it now charges more, open reservations take what they are short at once, so nothing
        more is admitted into what they already used (`batchgate.quota.reprice`)."""
        first, now = self.charges.samples == 0, self._clock.now()
        self.charges.observe_usage(count, reported, now)
        self._take_short(self._unsettled.shortfalls(self.charges))
        if first and self.charges.explains_blind() and self.aimd.excuse_blind():
            self._apply_rates(now)  # the 429s before it were short reservations, not the pace
            self._dispatch()

    def charge_raised(self, dim: str, ratio: float) -> None:
        """`dim`'s prompts are now believed charged `ratio` × more: open reservations are re-priced
        (their answers settle against that), answered ones' window entries scaled."""
        if (d := self._dims.get(dim)) is not None and ratio > 1.0:
            skip = frozenset(id(r.logged.get(dim)) for r in self._unsettled)
            self._take_short(self._unsettled.raised(dim, ratio))
            d.window.scale(ratio, self._clock.now(), skip=skip)
            self._dispatch()

    def _take_short(self, shortfalls: Iterator[tuple[Reservation, str, float]]) -> None:
        for res, name, short in shortfalls:
            self._charge(res, name, short, self._clock.now())
            res.repriced[name] = res.repriced.get(name, 0.0) + short

    def paces(self) -> dict[str, Pace]:
        """Each dimension's pace now (rate, burst, slack, window allowance) for a shared store."""
        return {n: d.shared_pace() for n, d in self._dims.items()}

    def limited(self) -> bool:
        """Whether any dimension is rate-limited here."""
        return bool(self._dims)

    def busy(self) -> bool:
        """Whether requests are queued here (a newcomer could not be admitted at once)."""
        return self._gate.busy()

    async def drained(self) -> None:
        """Return once no request is queued here (at once if none is)."""
        await self._gate.drained()

    def try_acquire(self, cost: Cost, *, count: int | None = None) -> Reservation | None:
        """Reserve `cost` (priced from `count`, as in `acquire`) now if nobody is queued and it
        is admissible; else None."""
        cost, amounts = self._prepare(cost, count)
        now = self._clock.now()
        if self._gate.busy() or self._wait_for(amounts, now) > 0.0:
            return None
        return self._admit_idle(cost, amounts, now, count)

    def wait_estimate(self, cost: Cost) -> float:
        """Rough seconds until `cost` would be admitted if queued now (inf if it never fits)."""
        now, amounts = self._clock.now(), cost_amounts(cost, self._dims)
        queued = [r.amounts for r in self._gate.waiting()]
        return max(self._paused_until - now, dim_.queued_wait(self.name, self._dims, queued, amounts, now))

    def headroom(self) -> float:
        """How much could be admitted right now, as the emptiest bucket's fill fraction (0..1)."""
        now = self._clock.now()
        return 0.0 if now < self._paused_until or self._gate.busy() else dim_.headroom(self._dims, now)

    # -- settling ----------------------------------------------------------------------------

    def reconcile(
        self,
        res: Reservation,
        usage: Usage,
        *,
        prompt_estimate: int | None = None,
        count: int | None = None,
        output_adjusted: bool | None = None,
    ) -> bool:
        """Correct a reservation with the provider's real usage; False if already settled. What
        is corrected and why: `batchgate.quota.settle` (the estimate is `prompt_estimate`, default
        `res.cost.input_tokens`; `count` is our own count of the prompt). A shared store gets the
        same."""
        if not self._open(res):
            return False
        estimate = res.cost.input_tokens if prompt_estimate is None else prompt_estimate
        deltas = reconcile_deltas(
            res,
            usage,
            self.charges,
            estimate=estimate + round(res.repriced.get("tokens", 0.0)),
            count=count,
            known=self.limits.burst_seconds is not None,
            output_adjusted=self.output_adjusted if output_adjusted is None else output_adjusted,
        )
        now = self._clock.now()
        for name, delta in deltas.items():
            self._charge(res, name, delta, now)
        res.settled = True
        self._unsettled.discard(res)
        self._counts["reconciled"] += 1
        self._dispatch()
        return True

    def sent(self, res: Reservation) -> None:
        """`res`'s request leaves now (it may have waited): its window counts from now, here and shared."""
        for name, entry in res.logged.items():
            self._dims[name].window.restamp(entry, self._clock.now())
        if self.shared is not None:
            self.shared.sent(res)

    def settle(self, res: Reservation) -> bool:
        """Keep a reservation as charged (an answer abandoned after the provider admitted it)."""
        if not self._open(res):
            return False
        res.settled = True
        self._unsettled.discard(res)
        self._counts["reconciled"] += 1
        return True

    def refund(self, res: Reservation) -> bool:
        """Give a reservation back entirely (the provider never admitted it); False if settled."""
        if not self._open(res):
            return False
        self._give_back(res)
        self._dispatch()
        return True

    # -- adaptation --------------------------------------------------------------------------

    def pause(self, seconds: float) -> None:
        """A retry hint: admit nobody until now + `seconds` (extends, never shortens, a pause)."""
        if not math.isfinite(seconds) or seconds <= 0:
            return
        self._counts["pauses"] += 1
        self._paused_until = max(self._paused_until, self._clock.now() + seconds)
        if self.shared is not None:
            self.shared.pause(seconds)
        self._dispatch()

    def on_rate_limited(self, res: Reservation | None = None, *, rate_at_fault: bool = True) -> bool:
        """A 429: refund `res` if given, empty the buckets (one average request into debt), cut the
        rates (damped; not when otherwise explained, e.g. by charges; from `res`'s admission). True if cut."""
        now = self._clock.now()
        if res is not None and self._open(res):
            self._give_back(res)
        admitted = res.admitted_at if res is not None else -math.inf
        blind = self.charges.samples == 0
        cut = self.aimd.on_rate_limited(now, admitted, blind=blind) if rate_at_fault else False
        if self.burst.on_rate_limited(now) or cut:
            self._apply_rates(now)
        for dim in self._dims.values():  # empty at the provider: the next leaves one request later
            dim.bucket.set_level(min(-dim.avg_cost, dim.bucket.level(now)), now)
        if self.shared is not None:
            self.shared.drain()
        self._dispatch()
        return cut

    def on_success(self) -> bool:
        """A clean answer; True when a clean period earned a rate increase."""
        now = self._clock.now()
        grew = self.burst.on_success(now)
        if not self.aimd.on_success(now) and not grew:
            return False
        self._apply_rates(now)
        self._dispatch()
        return True

    def calibrate(self, snapshot: RateLimitSnapshot) -> bool:
        """Follow a provider's rate-limit headers; True if a limit, level or rate changed. A
        reported limit below the declared one (but above a tenth of it) is adopted × safety,
        undoing the AIMD cuts it explains; a later higher one restores up to the declared limit.
        What `remaining` means depends on the header style (`header_style`); minute-style room
        moves the AIMD factor (`AimdController.on_room`)."""
        now = self._clock.now()
        ratio = dim_.adopt_reported_limits(self._dims, snapshot)
        if ratio is not None:
            self._counts["calibrations"] += 1
            self.aimd.rescale(max(1.0, ratio))  # undo the cuts a lower limit explains
            self._apply_rates(now)
            never = lambda r: dim_.never_fits(self.name, self._dims, r.amounts)  # noqa: E731
            self._counts["never_fit"] += self._gate.fail(never)
        changed = self.headers.follow(self._dims, snapshot, now)
        style, busy = self.headers.style, self._gate.busy()
        if room := dim_.follow_room(self.aimd, self.charges, self._dims, snapshot, now, style, busy):
            self._apply_rates(now)
        if ratio is not None or changed or room:
            self._dispatch()
        return changed or room or ratio is not None

    # -- introspection -----------------------------------------------------------------------

    def count(self, name: str) -> int:
        """One event counter of `statistics()` (admitted, calibrations, pauses, ...), cheaply."""
        return self._counts[name]

    def statistics(self) -> QuotaStats:
        now = self._clock.now()
        paused = self._paused_until if self._paused_until > now else None
        return dim_.statistics(self.name, self._dims, now, len(self._gate), paused, self.aimd, self._counts)

    def close(self) -> None:
        """Cancel the timer and every waiter (shutdown)."""
        self._gate.close()

    def __repr__(self) -> str:
        now = self._clock.now()
        paused = f", paused={self._paused_until - now:.3g}s" if self._paused_until > now else ""
        dims, factor = dim_.describe(self._dims, now) or "unlimited", f"factor={self.aimd.factor:.3g}"
        return f"QuotaPool({self.name!r}, {dims}, waiters={len(self._gate)}, {factor}{paused})"

    # -- internals ---------------------------------------------------------------------------

    def _prepare(self, cost: Cost, count: int | None) -> tuple[Cost, dict[str, float]]:
        """`cost` checked to fit, priced from `count` (if given), and its amounts per dimension."""
        self.check_fits(cost)
        if count is not None:
            cost = self.charges.priced(cost, count)
        return cost, cost_amounts(cost, self._dims)

    def _wait_for(self, amounts: dict[str, float], now: float) -> float:
        wait = max(0.0, self._paused_until - now)
        for name, amount in amounts.items():
            wait = max(wait, self._dims[name].wait(amount, now))
        return wait

    def _reprice(self, request: _Request) -> _Request:
        if request.count is not None:
            request.cost = self.charges.priced(request.cost, request.count)
            request.amounts = cost_amounts(request.cost, self._dims)
        return request

    def _admit_idle(
        self, cost: Cost, amounts: dict[str, float], now: float, count: int | None
    ) -> Reservation:
        """Admit a request that found nobody waiting: if every bucket was full, it tries the burst."""
        if all(self._dims[n].bucket.level(now) >= self._dims[n].bucket.capacity for n in amounts):
            self.burst.on_full_burst_spent(now)
        return self._admit(cost, amounts, now, count)

    def _admit(self, cost: Cost, amounts: dict[str, float], now: float, count: int | None) -> Reservation:
        cold = self._counts["reconciled"] == 0  # before any answer
        res = Reservation(self.name, cost, dict(amounts), now)
        for name, amount in amounts.items():
            dim = self._dims[name]
            if (entry := dim.take(amount, now, cold=cold)) is not None:
                res.logged[name] = entry
            dim.note(amount)
        self._counts["admitted"] += 1
        self._unsettled.add(res, count)
        return res

    def _charge(self, res: Reservation, name: str, delta: float, now: float) -> None:
        """`res` holds `delta` more of dimension `name` (less if negative), here and in a shared store."""
        if (dim := self._dims.get(name)) is not None:
            dim.correct(res.logged.get(name), delta, now)
        res.charged[name] += delta
        if self.shared is not None:
            self.shared.adjust(res, name, delta)

    def _open(self, res: Reservation) -> bool:
        if res.pool != self.name:
            raise ValueError(f"reservation of pool {res.pool!r} settled on pool {self.name!r}")
        return not res.settled

    def _give_back(self, res: Reservation) -> None:
        now = self._clock.now()
        for name, amount in res.charged.items():
            if (dim := self._dims.get(name)) is not None:
                dim.correct(res.logged.get(name), -amount, now)
        if self.shared is not None:
            self.shared.give_back(res)
        res.settled = True
        self._unsettled.discard(res)
        self._counts["refunded"] += 1

    def _apply_rates(self, now: float, *, fill: bool = False) -> None:
        burst = self.limits.burst_seconds
        seconds = self.burst.seconds if burst is None else burst
        for dim in self._dims.values():
            dim.pace(
                self.aimd.factor, self.limits.safety, seconds, now, windowed=burst is None, lead=self._lead
            )
            if fill:
                dim.bucket.set_level(dim.bucket.capacity, now)

    def _dispatch(self) -> None:
        self._gate.wake()
