"""What a quota pool learns from how its requests end, and the pace it sets from that.

An answer or a 429 reaches the pool in one call (`QuotaPool.settle` with an `Outcome`); the pool
settles the reservation and hands what was learned here: the charge model learns what the
provider charges per unit of our count (`batchgate.quota.charge`), the AIMD factor rises over
clean periods and is cut by 429s a rate is at fault for (`batchgate.policy.aimd`), the burst grows
while the provider tolerates it (`BurstLearner`, below), rate-limit headers report lower limits
and what is left (`batchgate.quota.header_style`) — or, where none was declared, what the limits
are (`learn_limits`) —, and how much output a provider that gives unused output back (Anthropic's
OTPM) lets be held in flight (`batchgate.quota.output_hold`), or that it keeps it after all. This
module owns that state and the pace it sets on each dimension (`pace`); the pool owns admission
(the queue, the reservations, their charges). What changes a provider's state is logged as an
event (`batchgate.logs`): a limit learned from headers, an AIMD cut or raise, a charge margin
raised, the output charge learned.

The burst. A pool starts with no burst beyond one request: its buckets hold nothing, so requests
leave evenly spaced at the rate (GCRA-style "pay after": each admission puts the bucket in debt
by its cost, the next waits until the debt is repaid). Whatever the provider enforces — a token
bucket, a sliding or a fixed window of any length — smooth sending at the rate never overruns it
by more than one request.

Burst is earned only where it was tried: when a request arrived at an idle pool whose bucket
held its whole (learned) burst, and no 429 followed for `clean_period` seconds, the provider has
shown it tolerates that burst, and the burst grows by `step` seconds (up to `max_seconds`). A 429
while a burst was being tried halves it and holds it for `hold` seconds. Saturated batch work
queues and never finds the bucket idle, so its burst stays where it is: it needs none.
`BurstLearner` is pure: the caller passes the time in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from batchgate.clock import Clock
from batchgate.logs import DEBUG, INFO, WARNING, enabled, event, get_logger
from batchgate.models import RateLimitSnapshot
from batchgate.policy.aimd import AimdController, AimdSettings
from batchgate.quota import dimension as dim_
from batchgate.quota.charge import PROMPT_DIMENSIONS, ChargeModel, binding_dimension
from batchgate.quota.dimension import Dimension
from batchgate.quota.header_style import HeaderStyle
from batchgate.quota.limits import Outcome, QuotaLimits, Reservation
from batchgate.quota.output_hold import OutputHold

OUTPUT_KEPT_AFTER = 3  # 429s on output tokens that show a provider keeps max_tokens charged
OUTPUT_EMPTY = 0.1  # ... or its headers showing at most this share of its output bucket left
_PLAUSIBLE = 0.1  # a reported limit below this share of the declared one is not a per-minute limit

_NOTHING = RateLimitSnapshot()
_log = get_logger("provider")


class Learning:
    """The rates of one pool's dimensions and what moves them; see the module docstring."""

    __slots__ = (
        "_clock",
        "_dims",
        "_refusals",
        "aimd",
        "burst",
        "charges",
        "headers",
        "lead",
        "learned",
        "limits",
        "name",
        "output_adjusted",
        "output_hold",
        "output_learnable",
    )

    def __init__(
        self,
        name: str,
        limits: QuotaLimits,
        clock: Clock,
        dims: dict[str, Dimension],
        aimd: AimdSettings | None,
    ) -> None:
        self.name = name
        self._clock = clock
        self.limits = limits
        self._dims = dims
        self.aimd = AimdController(aimd)
        self.burst = BurstLearner()
        self.charges = ChargeModel()
        self.headers = HeaderStyle()
        self.lead = 1.0  # how far this process's buckets run ahead of the pace (a shared store)
        self.learned = False  # no limit declared: those the headers report are the limits
        self.output_adjusted = False  # the provider gives unused output back (`reservations.py`)
        self.output_learnable = False  # ... as assumed from its kind, not configured: may be unlearned
        self.output_hold = OutputHold()  # how deep its output bucket is (what may be held in flight)
        self._refusals = 0  # 429s naming output tokens while the output charge is settled

    def pace(self, now: float, *, fill: bool = False) -> None:
        """Set every dimension's pace from the limits, the AIMD factor and the burst (`fill`: and
        fill its bucket, before any admission)."""
        burst = self.limits.burst_seconds
        seconds = self.burst.seconds if burst is None else burst
        for dim in self._dims.values():
            dim.pace(
                self.aimd.factor, self.limits.safety, seconds, now, windowed=burst is None, lead=self.lead
            )
            if fill:
                dim.bucket.set_level(dim.bucket.capacity, now)

    def settles_output(self, adjusted: bool, now: float, *, fill: bool) -> None:
        """The provider gives unused output back at an answer's end (or not): see `Dimension.hold`."""
        self.output_adjusted = adjusted
        if (out := self._dims.get("output_tokens")) is not None:
            out.hold = self.output_hold.depth if adjusted else 0.0
        self.pace(now, fill=fill)

    # -- what an answer teaches ----------------------------------------------------------------

    def usage(self, count: int, reported: int, now: float) -> bool:
        """An answer's prompt (our `count`, the provider's `reported` tokens) for the charge
        model; True if this first one explains the 429s before it as short reservations, not the
        pace (the AIMD excuses them: `pace` again)."""
        first = self.charges.samples == 0
        self.charges.observe_usage(count, reported, now)
        return first and self.charges.explains_blind() and self.aimd.excuse_blind()

    def success(self, now: float) -> bool:
        """A clean answer; True when a clean period earned a rate increase (paced again)."""
        grew = self.burst.on_success(now)
        if not self.aimd.on_success(now) and not grew:
            return False
        self.pace(now)
        if enabled(_log, DEBUG):
            event(_log, DEBUG, "aimd_raise", provider=self.name, factor=round(self.aimd.factor, 4))
        return True

    def calibrate(
        self, snapshot: RateLimitSnapshot, now: float, *, busy: bool = False
    ) -> tuple[float | None, bool]:
        """Follow a provider's rate-limit headers (`busy`: requests wait to be sent, so room is what
        our pace leaves unused): (the largest factor by which a reported limit fell — 1.0 if they
        only rose, None if none changed —, whether a level or the rate moved). A reported limit
        below the declared one (above a tenth of it) is adopted × safety, undoing the AIMD cuts
        it explains; a later higher one restores up to the declared limit. What `remaining` means
        depends on the header style (`header_style`); minute-style room moves the AIMD factor
        (`AimdController.on_room`), its trend read anew when the reported limits change."""
        raw, snapshot = snapshot, self._output_held(snapshot, now)  # its remaining counts our holds
        self._output_emptied(snapshot, now)
        ratio = self._adopt_reported_limits(snapshot)
        if ratio is not None:
            self.aimd.rescale(max(1.0, ratio))  # undo the cuts a lower limit explains
            self.pace(now)
            limits = {n: round(d.limit, 3) for n, d in self._dims.items()}
            event(_log, INFO, "limit_learned", provider=self.name, source="headers", limits_per_minute=limits)
        changed = self.headers.follow(self._dims, raw, now)
        if self.headers.rescaled(self._dims, raw):
            self.aimd.new_scale()
        if room := self._follow_room(snapshot, now, busy):
            self.pace(now)
        return ratio, changed or room

    def learn_limits(self, snapshot: RateLimitSnapshot, now: float) -> bool:
        """No limit declared (`learned`): those the provider's headers report are the limits,
        followed up and down (`dimension.learn`), paced from an empty bucket; True if one changed."""
        if not self.learned or not dim_.learn(self._dims, snapshot, now):
            return False
        self.pace(now)
        limits = {n: round(d.limit, 3) for n, d in self._dims.items()}
        event(_log, INFO, "limit_learned", provider=self.name, source="undeclared", limits_per_minute=limits)
        return True

    # -- what a 429 teaches --------------------------------------------------------------------

    def refused(self, res: Reservation, o: Outcome) -> Refusal:
        """A rate's 429 for `res` (not a bare one: `charge.bare_refusal`): the dimension
        it was about, None if unknown; whether what the charge model learned since `res` was
        priced explains it — the reservations were short, not the pace: the rate's AIMD is
        spared; the factor by which that dimension's charge margin rose — a token dimension the
        provider names may raise it; whether its own headers refute the limit they report
        (`refutes`): then no charge is at fault either, the rate is."""
        snapshot = _NOTHING if o.snapshot is None else o.snapshot
        dim, now = binding_dimension(o.error_type, snapshot), self._clock.now()
        if dim == "output_tokens":
            self._output_refused(now)
        if self.refutes(snapshot):
            return Refusal(dim, False, 1.0, True)
        cost = res.cost
        prompt = cost.tokens - cost.output_tokens if dim == "tokens" else cost.input_tokens
        reserved = prompt / o.count if o.count else None  # per unit of our count
        raises, before = self.charges.raises, self.charges.margin(dim) if dim else 1.0
        explained = dim in PROMPT_DIMENSIONS and self.charges.on_rate_limited(
            dim, now, res.admitted_at, reserved
        )
        if self.charges.raises == raises or dim is None:
            return Refusal(dim, explained, 1.0)
        margin = self.charges.margin(dim)
        event(_log, INFO, "charge_margin_raised", provider=self.name, dimension=dim, margin=round(margin, 4))
        return Refusal(dim, explained, margin / before)

    def refutes(self, snapshot: RateLimitSnapshot) -> bool:
        """Whether a 429's own headers show what they report left on the per-minute scale with
        room to spare (`AimdSettings.room_full`): the provider enforces less than it reports — a
        hidden limit. Not a charge we under-reserve (its headers count what it charged, and show
        room) nor a random shed to wait out: a verdict on the rate."""
        if self.headers.observe(snapshot) != "minute":
            return False
        fill = reported_fill(self._dims, snapshot)
        return fill is not None and fill >= self.aimd.settings.room_full

    def rate_limited(
        self, now: float, admitted: float, *, at_fault: bool, dim: str | None = None, refuted: bool = False
    ) -> bool:
        """A 429 (on `dim`) for a request admitted at `admitted`: cut the rates (damped; not when
        the rate is not `at_fault`; never taken as noise when its headers `refuted` their limit),
        and empty the buckets — the provider's are empty: the next request leaves one average
        request later. True if cut."""
        blind = self.charges.samples == 0
        cut = self.aimd.on_rate_limited(now, admitted, blind=blind, refuted=refuted) if at_fault else False
        unstretched = at_fault and dim_.unstretch(self._dims.values())  # its 1 s windows floor them
        if self.burst.on_rate_limited(now) or cut or unstretched:
            self.pace(now)
        for d in self._dims.values():
            d.bucket.set_level(min(-d.avg_cost, d.bucket.level(now)), now)
        if cut:
            factor, cuts = round(self.aimd.factor, 4), self.aimd.cuts
            event(_log, WARNING, "aimd_cut", provider=self.name, dimension=dim, factor=factor, cuts=cuts)
        return cut

    # -- the output charge ---------------------------------------------------------------------

    def _output_refused(self, now: float) -> None:
        """A 429 on output tokens. A provider whose output charge is only assumed to be settled to
        the real output (by its kind: Anthropic documents it) but that keeps `max_tokens` charged
        refuses again and again what the settled charge admits: after `OUTPUT_KEPT_AFTER` such
        429s its output charge is taken as kept. A configured `output_charge` is never
        second-guessed."""
        if self.output_adjusted and self.output_hold.shrink(self._dims.get("output_tokens")):
            self.settles_output(True, now, fill=False)  # it holds less than we let be held
        elif self.output_adjusted and self.output_learnable:
            self._refusals += 1
            if self._refusals >= OUTPUT_KEPT_AFTER:
                self._output_kept(now)

    def _output_emptied(self, snapshot: RateLimitSnapshot, now: float) -> None:
        """Its headers, less what our holds explain (`_output_held`), show its output bucket (nearly)
        empty: it keeps `max_tokens` charged — learned before its 429s say so."""
        remaining, limit = snapshot.remaining_output_tokens, snapshot.limit_output_tokens
        assumed = self.output_adjusted and self.output_learnable
        if assumed and remaining is not None and limit and remaining <= OUTPUT_EMPTY * limit:
            self._output_kept(now)

    def _output_held(self, snapshot: RateLimitSnapshot, now: float) -> RateLimitSnapshot:
        """Its bucket's depth learned from a report (`quota.output_hold`); the report without our holds."""
        if (out := self._dims.get("output_tokens")) is None or not self.output_adjusted:
            return snapshot
        seen, before = self.output_hold.without_holds(snapshot, out, now), out.bucket.capacity
        if self.headers.observe(snapshot) == "minute" and self.output_hold.grow(
            snapshot, out, now, self.charges.samples
        ):
            self.settles_output(True, now, fill=False)
            out.bucket.give_back(self.output_hold.deepened(out.bucket.capacity - before), now)  # level too
        return seen

    def _output_kept(self, now: float) -> None:
        self.settles_output(False, now, fill=False)  # learned from answers: admissions were made
        event(_log, WARNING, "output_charge_learned", provider=self.name, output_charge="max_tokens")

    # -- rate-limit headers --------------------------------------------------------------------

    def _adopt_reported_limits(self, snapshot: RateLimitSnapshot) -> float | None:
        """Adopt each limit the provider's headers report below the declared one (a later higher
        report restores up to the declared limit, never past it; one below a tenth of the declared
        one is not a per-minute limit). None if no limit changed, else the largest factor by which
        a limit fell (1.0 if they only rose)."""
        ratio: float | None = None
        for name, dim in self._dims.items():
            reported = getattr(snapshot, f"limit_{name}")
            if reported is None or not math.isfinite(reported) or reported <= 0:
                continue
            before = dim.limit
            plausible = dim.declared * _PLAUSIBLE <= reported < dim.declared
            dim.reported = reported if plausible else None
            if dim.limit != before:
                ratio = max(ratio or 1.0, before / dim.limit)
        return ratio

    def _follow_room(self, snapshot: RateLimitSnapshot, now: float, busy: bool) -> bool:
        """Tell the AIMD what room the provider's minute-style `remaining` shows (`on_room`), and,
        once the rate is not cut, each prompt dimension's charge margin; True if either moved.
        Not the margin of a provider whose level has leapt back to full (`window_seen`): a fixed
        window restarting shows its whole allowance left however much it charges, so that room
        says nothing of a margin — stepping it down there admits the rest of the window
        under-priced, and the provider refuses its last requests."""
        fill = reported_fill(self._dims, snapshot) if self.headers.style == "minute" else None
        if fill is None:
            return False
        per_second = [(d.avg_cost, d.limit / 60.0) for d in self._dims.values() if d.limit > 0]
        grain = max((cost / rate for cost, rate in per_second), default=0.0)  # one request's share
        if self.aimd.on_room(now, fill, busy=busy, grain=grain):
            return True
        if self.aimd.factor < 1.0 or not self.aimd.room_trusted or self.aimd.window_seen:
            return False
        moved = False
        for name in PROMPT_DIMENSIONS:
            if (
                name in self._dims
                and (share := reported_fill({name: self._dims[name]}, snapshot)) is not None
            ):
                moved = self.charges.on_room(name, share, now) or moved
        return moved


@dataclass(frozen=True, slots=True)
class Refusal:
    """What a rate's 429 was about (`Learning.refused`)."""

    dim: str | None  # the dimension it was about (None: unknown)
    explained: bool  # the charge model explains it: the reservations were short, not the pace
    ratio: float  # the factor by which that dimension's charge margin rose
    refuted: bool = False  # its own headers showed room: the limit they report is refuted


def reported_fill(dims: Mapping[str, Dimension], snapshot: RateLimitSnapshot) -> float | None:
    """The emptiest share of a limit the provider reports left (minute-style `remaining` ÷ its
    limit) over `dims`; None if it reports none of them."""
    fill: float | None = None
    for name, dim in dims.items():
        remaining = getattr(snapshot, f"remaining_{name}")
        limit = getattr(snapshot, f"limit_{name}") or dim.limit
        if remaining is not None and math.isfinite(remaining) and limit > 0:
            share = max(0.0, min(1.0, remaining / limit))
            fill = share if fill is None else min(fill, share)
    return fill


@dataclass(frozen=True, slots=True)
class BurstSettings:
    step: float = 0.05  # seconds of rate added per tolerated burst
    max_seconds: float = 2.0
    clean_period: float = 2.0  # seconds without a 429 after a burst was spent
    hold: float = 60.0  # after a 429 in a burst, no growth for this long

    def __post_init__(self) -> None:
        if not (self.step >= 0 and self.max_seconds >= 0 and self.clean_period > 0 and self.hold >= 0):
            raise ValueError("burst settings must be non-negative (clean_period positive)")


class BurstLearner:
    """The burst (in seconds of rate) a provider has shown it tolerates; see the module docstring."""

    __slots__ = ("_hold_until", "_last_429", "_tried_at", "cuts", "grown", "seconds", "settings")

    def __init__(self, settings: BurstSettings | None = None) -> None:
        self.settings = settings or BurstSettings()
        self.seconds = 0.0
        self.cuts = 0
        self.grown = 0
        self._tried_at: float | None = None  # when a full burst was last spent
        self._last_429 = -math.inf
        self._hold_until = -math.inf

    def on_full_burst_spent(self, now: float) -> None:
        """A request arrived at an idle pool whose bucket was full (its whole burst available)."""
        if self._tried_at is None:
            self._tried_at = now

    def on_success(self, now: float) -> bool:
        """A clean answer; True when the burst grew (a tried burst passed its clean period)."""
        tried = self._tried_at
        if tried is None or now - tried < self.settings.clean_period:
            return False
        self._tried_at = None
        if tried <= self._last_429 or now < self._hold_until or self.seconds >= self.settings.max_seconds:
            return False
        self.seconds = min(self.settings.max_seconds, self.seconds + self.settings.step)
        self.grown += 1
        return True

    def on_rate_limited(self, now: float) -> bool:
        """A 429; True when it cut the burst (it was in use: tried within the clean period)."""
        self._last_429 = now
        if self._tried_at is None or self.seconds <= 0.0:
            self._tried_at = None
            return False
        self._tried_at = None
        self.seconds /= 2.0
        if self.seconds < self.settings.step:
            self.seconds = 0.0
        self._hold_until = now + self.settings.hold
        self.cuts += 1
        return True

    def __repr__(self) -> str:
        return f"BurstLearner({self.seconds:.3g}s, grown={self.grown}, cuts={self.cuts})"
