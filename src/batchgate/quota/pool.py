"""The quota pool of one provider key: admission against token buckets, FIFO and event-driven.

A request reserves its estimated cost on every limited dimension before it is sent (providers
charge prompt + max_tokens at admission; the prompt part as the pool's charge model says this
provider charges, `batchgate.quota.charge`) and the reservation is settled after: `reconcile`
with real usage, `refund` when the provider never admitted it. Buckets hold only the burst the
provider has shown it tolerates (`batchgate.quota.learning.BurstLearner`; none at first), so requests leave
evenly spaced at the rate; a window log (`batchgate.quota.window`) keeps every window of a second
within the limit. Waiters queue in FIFO order, so a big request at the head is never starved by
small ones behind it; urgent ones (live requests, hedges) in a lane of their own served first
(`batchgate.quota.queue`); one timer (`clock.call_at`) is armed for the head's deadline and the
queue is also re-examined whenever capacity comes back, limits change or a pause ends — no
polling. Rates: declared (or header-reported, if lower; none declared: learned, `quota.probe`)
limits × safety × the AIMD factor; 429s cut it, clean periods restore it, hints pause all.
An attempt ends its reservation with one call, `settle(res, Outcome)`, that carries what it
learned (`batchgate.quota.limits.Outcome`). Over a whole limit: NeverFitsError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchgate.clock import Clock
from batchgate.logs import INFO, event, get_logger
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.policy.aimd import AimdSettings
from batchgate.quota import dimension as dim_
from batchgate.quota.bucket import TokenBucket
from batchgate.quota.charge import bare_refusal
from batchgate.quota.dimension import TIMER_SLACK, Dimension
from batchgate.quota.learning import Learning
from batchgate.quota.limits import POOL_EVENTS, Outcome, QuotaLimits, QuotaStats, Reservation, cost_amounts
from batchgate.quota.probe import Probe
from batchgate.quota.queue import FifoGate
from batchgate.quota.reservations import Reservations
from batchgate.quota.shared import SHARED_LEAD, SharedQuota
from batchgate.quota.store.protocol import Pace

__all__ = ["TIMER_SLACK", "Outcome", "QuotaLimits", "QuotaPool", "QuotaStats", "Reservation"]
_log = get_logger("provider")


@dataclass(slots=True)
class _Request:
    cost: Cost
    amounts: dict[str, float]
    count: int | None  # our prompt count: the prompt parts are re-priced when it reaches the head


class QuotaPool:
    """Admission control for one provider key; see the module docstring."""

    def __init__(
        self,
        name: str,
        limits: QuotaLimits,
        clock: Clock,
        aimd: AimdSettings | None = None,
        *,
        learn: bool = False,
    ) -> None:
        self.name = name
        self.limits = limits
        self._clock = clock
        now = clock.now()
        self._dims: dict[str, Dimension] = {
            name_: Dimension(name_, limit, TokenBucket(0.0, 0.0, now))
            for name_, limit in limits.declared().items()
        }
        self.learning = Learning(name, limits, clock, self._dims, aimd)
        self.learning.learned = learn and not self._dims  # nothing declared: from the headers
        self._probe = Probe(self.learning.learned)  # ... so until an attempt ends, slowly
        self.learning.pace(now, fill=True)
        self._gate: FifoGate[_Request, Reservation] = FifoGate(
            clock,
            lambda r, now: self._wait_for(self._reprice(r).amounts, now),
            lambda r, now: self._admit(r.cost, r.amounts, now, r.count),
            self.refund,
        )
        self._paused_until = -math.inf
        self.shared: SharedQuota | None = None  # set by `share`
        self._counts = dict.fromkeys(POOL_EVENTS, 0)
        self._book = Reservations(name, self._dims, clock, self._counts, self.learning)

    def settles_output(self, adjusted: bool, *, learnable: bool = False) -> None:
        """The provider gives unused output back at an answer's end (or not): see `Dimension.hold`;
        `learnable`: only assumed (from its kind), so answers that show otherwise unlearn it."""
        self.learning.output_learnable = learnable
        self.learning.settles_output(adjusted, self._clock.now(), fill=self._counts["admitted"] == 0)

    def share(self, shared: SharedQuota) -> None:
        """Share the key's quota through `shared`'s store, which paces every process; this bucket
        runs SHARED_LEAD ahead, so all wait at the store and take turns (in step, one wins all)."""
        self.shared = self._book.shared = shared
        self.learning.lead = SHARED_LEAD
        self.learning.pace(self._clock.now())

    # -- admission ---------------------------------------------------------------------------

    def check_fits(self, cost: Cost) -> None:
        """Raise NeverFitsError if `cost` exceeds a whole per-minute limit on any dimension."""
        self._prepare(cost, None)

    def priced(self, cost: Cost, count: int) -> Cost:
        """`cost` with its prompt parts priced from our `count` as the charge model says this
        provider charges it now (`ChargeModel.priced`)."""
        return self.learning.charges.priced(cost, count)

    async def acquire(self, cost: Cost, *, count: int | None = None, urgent: bool = False) -> Reservation:
        """Wait (FIFO) until `cost` is admissible, then reserve it; `urgent` (a live request, a
        hedge) queues in the urgent lane, ahead of every ordinary waiter and behind earlier urgent
        ones — still paced at the rate, it only passes the ordinary queue. With `count` (our prompt
        count) the prompt parts of `cost` are priced by the charge model as it stands when the
        request is admitted, not when it queued: `Reservation.cost` says what."""
        cost, amounts = self._prepare(cost, count)
        now = self._clock.now()
        if not self._gate.busy() and self._wait_for(amounts, now) <= 0.0:
            return self._admit(cost, amounts, now, count, idle=True)
        return await self._gate.wait(_Request(cost, amounts, count), urgent=urgent)

    def observe_usage(self, count: int, reported: int, now: float | None = None) -> None:
        """An answer's prompt (our `count`, the provider's `reported` tokens) for the charge model;
        if it now charges more, open reservations take what they are short at once, so nothing
        more is admitted into what they already used (`batchgate.quota.reservations`)."""
        now = self._clock.now() if now is None else now
        excused = self.learning.usage(count, reported, now)
        self._book.reprice()
        if excused:
            self.learning.pace(now)  # the 429s before it were short reservations, not the pace
            self._gate.wake()

    def charge_raised(self, dim: str, ratio: float) -> None:
        """`dim`'s prompts are now believed charged `ratio` × more: open reservations are re-priced
        (their answers settle against that), answered ones' window entries scaled."""
        if self._book.raise_margin(dim, ratio):
            self._gate.wake()

    def paces(self) -> dict[str, Pace]:
        """Each dimension's pace now (rate, burst, slack, window allowance) for a shared store."""
        return {n: d.shared_pace() for n, d in self._dims.items()}

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
        return self._admit(cost, amounts, now, count, idle=True)

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

    def settle(self, res: Reservation, outcome: Outcome) -> bool:
        """End `res` with what its attempt learned — the one call an attempt makes: an answer is
        reconciled with its usage and teaches the charge model, the headers and the AIMD; a 429
        teaches whichever limit said no; a request that never left is refunded; one abandoned
        after the provider admitted it, or sent with its cost unknown, is kept as charged. True
        only for a 429 no rate is at fault for (the server's in-flight cap turned it away: nothing
        was charged). A reservation already settled is left as it is: a no-op, counted in
        `QuotaStats.settled_twice` (`batchgate.quota.held` makes sure none is, on any path)."""
        if not self._book.is_open(res):
            self._counts["settled_twice"] += 1
            return False
        if self._probe.first_ending():  # the queue held while its headers name the limits
            bare = self.settle(res, outcome)
            self._probe.end()
            self._gate.wake()
            return bare
        if outcome.ending == "answered":
            self._answered(res, outcome)
        elif outcome.ending == "refused":
            return self._refused(res, outcome)
        elif outcome.ending == "unsent":
            self.refund(res)
        else:  # abandoned after an answer (charged), or sent with its cost unknown: kept as charged
            self._book.keep(res, answered=outcome.ending == "abandoned")
        return False

    def reconcile(
        self,
        res: Reservation,
        usage: Usage,
        *,
        prompt_estimate: int | None = None,
        count: int | None = None,
        output_adjusted: bool | None = None,
        now: float | None = None,
    ) -> bool:
        """Correct a reservation with the provider's real usage; False if already settled. What
        is corrected and why: `batchgate.quota.reservations` (the estimate is `prompt_estimate`, default
        `res.cost.input_tokens`; `count` is our own count of the prompt). A shared store gets the
        same."""
        if not self._book.is_open(res):
            return False
        self._book.reconcile(res, usage, prompt_estimate, count, output_adjusted, now)
        self._gate.wake()
        return True

    def sent(self, res: Reservation) -> None:
        """`res`'s request leaves now (it may have waited): its window counts from now, here and shared."""
        if res.logged:
            now = self._clock.now()
            for name, entry in res.logged.items():
                self._dims[name].window.restamp(entry, now)
        if self.shared is not None:
            self.shared.sent(res)

    def refund(self, res: Reservation) -> bool:
        """Give a reservation back entirely (the provider never admitted it); False if settled."""
        if not self._book.is_open(res):
            return False
        self._book.give_back(res)
        self._gate.wake()
        return True

    # -- adaptation --------------------------------------------------------------------------

    def pause(self, seconds: float) -> None:
        """A retry hint: admit nobody until now + `seconds` (extends, never shortens, a pause; one
        that starts is an event)."""
        if not math.isfinite(seconds) or seconds <= 0:
            return
        self._counts["pauses"] += 1
        now = self._clock.now()
        if self._paused_until <= now:
            event(_log, INFO, "paused", provider=self.name, seconds=round(seconds, 3), source="retry_hint")
        self._paused_until = max(self._paused_until, now + seconds)
        if self.shared is not None:
            self.shared.pause(seconds)
        self._gate.wake()

    def on_rate_limited(
        self,
        res: Reservation | None = None,
        *,
        rate_at_fault: bool = True,
        dim: str | None = None,
        refuted: bool = False,
    ) -> bool:
        """A 429 (on `dim`): refund `res` if given, empty the buckets (one average request into
        debt), cut the rates (damped; not when otherwise explained, e.g. by charges; from `res`'s
        admission; never noise when its headers `refuted` the limit they report). True if cut."""
        now = self._clock.now()
        if res is not None and self._book.is_open(res):
            self._book.give_back(res)
        admitted = res.admitted_at if res is not None else -math.inf
        cut = self.learning.rate_limited(now, admitted, at_fault=rate_at_fault, dim=dim, refuted=refuted)
        if self.shared is not None:
            self.shared.drain()
        self._gate.wake()
        return cut

    def on_success(self, now: float | None = None) -> bool:
        """A clean answer; True when a clean period earned a rate increase."""
        if not self.learning.success(self._clock.now() if now is None else now):
            return False
        self._gate.wake()
        return True

    def calibrate(self, snapshot: RateLimitSnapshot) -> bool:
        """Follow a provider's rate-limit headers (`Learning.calibrate`); True if a limit, level or
        rate changed. Requests queued that a lower limit makes never fit fail."""
        learned = self.learning.learn_limits(snapshot, self._clock.now())
        ratio, changed = self.learning.calibrate(snapshot, self._clock.now(), busy=self._gate.busy())
        changed = changed or learned
        if ratio is not None:
            self._counts["calibrations"] += 1
            never = lambda r: dim_.never_fits(self.name, self._dims, r.amounts)  # noqa: E731
            self._counts["never_fit"] += self._gate.fail(never)
        if ratio is not None or changed:
            self._gate.wake()
        return changed or ratio is not None

    def _answered(self, res: Reservation, o: Outcome) -> None:
        """An answer, learned from at one instant (the clock read once): its prompt's charge, its
        usage reconciled, its headers (when read), a clean answer for the AIMD."""
        usage = o.usage
        assert usage is not None
        cost, now = res.cost, self._clock.now()
        if o.count is not None:
            self.observe_usage(o.count, usage.prompt_tokens, now)
        self._book.reconcile(res, usage, cost.tokens - cost.output_tokens, o.count, None, now)  # `reconcile`
        self._gate.wake()
        if o.snapshot is not None:
            self.calibrate(o.snapshot)
        if self.learning.success(now):  # `on_success`
            self._gate.wake()

    def _refused(self, res: Reservation, o: Outcome) -> bool:
        """A 429: at the door (True: refunded, the caller learns its in-flight cap: `bare_refusal`),
        or a rate's (`Learning.refused` says which and whether the AIMD is spared; with no limit
        known yet, only its hint and headers teach)."""
        if o.snapshot is not None:
            self.learning.learn_limits(o.snapshot, self._clock.now())  # a 429 may name them first
        bare = bare_refusal(o, rates=bool(self._dims))
        blame = None if bare or not self._dims else self.learning.refused(res, o)
        if blame is None:
            self.refund(res)  # turned away at the door, or no rate known to cut: nothing charged
        else:
            if blame.dim is not None:
                self.charge_raised(blame.dim, blame.ratio)
            self.on_rate_limited(res, rate_at_fault=not blame.explained, dim=blame.dim, refuted=blame.refuted)
        if o.hint:  # `retry-after: 0` is "again now": no pause
            self.pause(o.hint)
        if blame is not None and o.snapshot is not None:
            self.calibrate(o.snapshot)
        return bare

    # -- introspection -----------------------------------------------------------------------

    def statistics(self) -> QuotaStats:
        now = self._clock.now()
        paused = self._paused_until if self._paused_until > now else None
        aimd, learned = self.learning.aimd, self.learning.learned
        return dim_.statistics(
            self.name, self._dims, now, len(self._gate), paused, aimd, self._counts, learned=learned
        )

    def close(self) -> None:
        """Cancel the timer and every waiter (shutdown)."""
        self._gate.close()

    def __repr__(self) -> str:
        now = self._clock.now()
        paused = f", paused={self._paused_until - now:.3g}s" if self._paused_until > now else ""
        dims = dim_.describe(self._dims, now) or "unlimited"
        factor = f"factor={self.learning.aimd.factor:.3g}"
        return f"QuotaPool({self.name!r}, {dims}, waiters={len(self._gate)}, {factor}{paused})"

    # -- internals ---------------------------------------------------------------------------

    def _prepare(self, cost: Cost, count: int | None) -> tuple[Cost, dict[str, float]]:
        """`cost` checked to fit, priced from `count` (if given), and its amounts per dimension
        (worked out once when the pricing leaves it as it was: the scheduler priced it just now)."""
        amounts = cost_amounts(cost, self._dims)
        if (problem := dim_.never_fits(self.name, self._dims, amounts)) is not None:
            self._counts["never_fit"] += 1
            raise problem
        if count is not None and (priced := self.learning.charges.priced(cost, count)) is not cost:
            return priced, cost_amounts(priced, self._dims)
        return cost, amounts

    def _wait_for(self, amounts: dict[str, float], now: float) -> float:
        wait = max(0.0, self._paused_until - now, self._probe.wait(now))
        for name, amount in amounts.items():
            wait = max(wait, self._dims[name].wait(amount, now))
        return wait

    def _reprice(self, request: _Request) -> _Request:
        if request.count is not None:
            request.cost = self.learning.charges.priced(request.cost, request.count)
            request.amounts = cost_amounts(request.cost, self._dims)
        return request

    def _admit(
        self, cost: Cost, amounts: dict[str, float], now: float, count: int | None, *, idle: bool = False
    ) -> Reservation:
        """Reserve `amounts` now; `idle`: the request found nobody waiting, and if every bucket was
        full it tries the burst (`BurstLearner.on_full_burst_spent`)."""
        cold = self._counts["reconciled"] == 0  # before any answer
        res = Reservation(self.name, cost, dict(amounts), now)
        if idle:
            for name in amounts:
                bucket = self._dims[name].bucket
                if bucket.level(now) < bucket.capacity:
                    break
            else:
                self.learning.burst.on_full_burst_spent(now)
        for name, amount in amounts.items():
            dim = self._dims[name]
            if (entry := dim.take(amount, now, cold=cold)) is not None:
                res.logged[name] = entry
            dim.note(amount)
        self._counts["admitted"] += 1
        self._probe.note(now)
        self._book.add(res, count)
        return res
