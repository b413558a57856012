"""One limited dimension of a quota pool: its limit, its bucket, its window log, and its pace.

The pace is the limit × safety × the AIMD factor. Whatever a provider enforces, evenly spaced
sending at rate r puts up to r·W plus one request into some window of length W (where the
window's edge falls between two requests). Where the enforcement is unknown, the window log
(`batchgate.quota.window`) keeps every window of `MIN_WINDOW` seconds within the limit × the
AIMD factor — counting each admission `JITTER` longer for the network, `COLD_JITTER` before any
answer: the bucket only spaces the requests, the log holds the window. Timer lateness is
kept as credit (`TIMER_SLACK` seconds of rate, the bucket's slack), so a late timer costs no rate.

A quota shared with other processes is paced by its store at the same rate, and the store keeps
the same window allowance over everyone's admissions (`shared_pace`), so no process needs
headroom there either. The average admitted cost (measured, not assumed) is the debt a 429
leaves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from batchgate.errors import NeverFitsError
from batchgate.models import RateLimitSnapshot
from batchgate.policy.aimd import AimdController
from batchgate.quota.bucket import TokenBucket
from batchgate.quota.limits import DIMENSIONS, QuotaStats
from batchgate.quota.store.protocol import Pace
from batchgate.quota.window import Entry, WindowLog

MIN_WINDOW = 1.0  # seconds: the shortest enforcement window the pace stays inside
JITTER = 0.005  # seconds by which the network may bring two arrivals closer than they were sent
COLD_JITTER = 0.02  # the same before any answer (new connections; counted from when they were made)
FEW = 10  # requests a window of `MIN_WINDOW` must hold before it is never stretched (`window_seconds`)
TIMER_SLACK = 0.005  # seconds of rate a late timer may carry over (timers here run ~1 ms late)
_REFRESH = 16  # admissions between two updates of the average cost
CONFIG_KEYS = {name: key for key, name in DIMENSIONS}  # Cost field name -> config key (rpm, tpm, ...)


class Dimension:
    """See the module docstring."""

    __slots__ = (
        "_count",
        "_sum",
        "avg_cost",
        "bucket",
        "cap",
        "declared",
        "hold",
        "name",
        "rate",
        "reported",
        "stretch",
        "window",
    )

    def __init__(self, name: str, declared: float, bucket: TokenBucket) -> None:
        self.name = name
        self.declared = declared
        self.reported: float | None = None  # a lower limit the provider's headers revealed
        self.bucket = bucket
        self.window = WindowLog(MIN_WINDOW + JITTER, cold_span=MIN_WINDOW + COLD_JITTER)
        self.cap = math.inf  # what one window may hold (inf: the enforcement is known, no log)
        self.rate = bucket.rate  # the pace, units per second (the bucket's, but for a `lead`)
        self.avg_cost = 0.0
        self.stretch = True  # the window may stretch to hold whole requests (`window_seconds`)
        # seconds of rate the bucket holds at least: where the provider gives unused output back
        # when an answer ends, the output reserved by requests in flight (`pace`)
        self.hold = 0.0
        self._sum = 0.0
        self._count = 0

    @property
    def limit(self) -> float:
        return self.declared if self.reported is None else min(self.declared, self.reported)

    def note(self, amount: float) -> None:
        """An admission of `amount`, for the average cost."""
        self._sum += amount
        self._count += 1
        if self._count < _REFRESH and self.avg_cost > 0:
            return
        average = self._sum / self._count
        self._sum, self._count = 0.0, 0
        self.avg_cost = average if self.avg_cost == 0 else 0.5 * (self.avg_cost + average)

    def fill(self, now: float) -> float:
        """How full the bucket is (0..1); one without burst is either ready (1) or in debt (0)."""
        bucket = self.bucket
        if bucket.capacity > 0:
            return bucket.level(now) / bucket.capacity
        return 1.0 if bucket.can_take(0.0, now) else 0.0

    def pace(
        self,
        factor: float,
        safety: float,
        burst_seconds: float,
        now: float,
        *,
        windowed: bool = True,
        lead: float = 1.0,
    ) -> None:
        """Send at the limit × `safety` × the AIMD `factor`, with `burst_seconds` of burst; with
        `windowed` (unless the caller knows the enforcement: a configured burst) hold every
        window of `MIN_WINDOW` to the limit × `factor` through the log. `lead` speeds up this
        process's own bucket past the pace (a shared store, paced at the pace, then binds). At least
        `self.hold` seconds of rate in the bucket: a dimension the provider settles to the real
        amount when the answer ends holds what requests in flight reserved, not what they use."""
        per_minute = self.limit * factor
        self.rate = per_minute * safety / 60.0
        seconds = self.window_seconds(per_minute / 60.0)
        self.window.span, self.window.cold_span = seconds + JITTER, seconds + COLD_JITTER
        # held output is no window's charge: the provider's bucket holds it (`quota.output_hold`)
        self.cap = per_minute / 60.0 * seconds if windowed and self.hold <= 0 else math.inf
        rate = self.rate * lead
        capacity = max(rate * burst_seconds, self.rate * self.hold)
        self.bucket.set_rate(rate, now, capacity=capacity, slack=rate * TIMER_SLACK)

    def window_seconds(self, per_second: float) -> float:
        """The log's window: `MIN_WINDOW`, but where that holds fewer than `FEW` average requests,
        the shortest longer window that holds a whole number of them. Requests are indivisible: a
        second's allowance of 1.67 requests (rpm 100) holds one, so a one-second log would pace
        rpm 100 at 60 a minute (0.6), rpm 150 at 0.8; a provider that admits its rpm over short
        windows at all must let each hold whole requests, so stretching the window to 2 requests
        in 1.2 s costs no 429 and the pace is the rate again. Unless a 429 came while it was
        stretched (`unstretch`): a provider whose 1 s windows hold 1.67 and admit one (the
        emulator's sliding or fixed 1 s window) enforces 60 a minute, whatever it declares."""
        average = 1.0 if self.name == "requests" else self.avg_cost
        if not self.stretch or average <= 0 or per_second <= 0:
            return MIN_WINDOW
        held = per_second * MIN_WINDOW / average
        if held >= FEW or held <= 1.0:
            return MIN_WINDOW
        return math.ceil(held - 1e-9) * average / per_second

    def take(self, amount: float, now: float, *, cold: bool = False) -> Entry | None:
        """Charge an admission of `amount` (`cold`: before any answer); its entry in the window
        log (None without a log)."""
        self.bucket.take(amount, now)
        return self.window.add(amount, now, cold=cold) if self.cap < math.inf else None

    def correct(self, entry: Entry | None, delta: float, now: float) -> None:
        """An admission is charged `delta` more (less if negative): the bucket, and its entry."""
        if delta > 0:
            self.bucket.take(delta, now)
        elif delta < 0:
            self.bucket.give_back(-delta, now)
        if entry is not None:
            self.window.adjust(entry, delta)

    def shared_pace(self) -> Pace:
        """The pace a shared quota store keeps for this dimension: the bucket's, and the window
        allowance over every process's admissions."""
        bucket = self.bucket
        return Pace(self.rate, bucket.capacity, bucket.capacity + bucket.slack, window=self.cap)

    def wait(self, amount: float, now: float) -> float:
        """Seconds until `amount` is admissible on this dimension (the bucket and the window)."""
        wait = self.bucket.time_until(amount, now)
        if self.cap < math.inf:
            wait = max(wait, self.window.time_until(amount, self.cap, now))
        return wait


def learn(dims: dict[str, Dimension], snapshot: RateLimitSnapshot, now: float) -> bool:
    """Limits nobody declared, from a provider's rate-limit headers: each reported per-minute limit
    becomes its dimension's (a new one starts with an empty bucket, paced by the caller), and a
    later report moves it up or down; True if one changed."""
    changed = False
    for name in CONFIG_KEYS:
        reported = getattr(snapshot, f"limit_{name}")
        if reported is None or not (math.isfinite(reported) and reported > 0):
            continue
        if (dim := dims.get(name)) is None:
            dims[name] = Dimension(name, reported, TokenBucket(0.0, 0.0, now))
        elif dim.declared == reported:
            continue
        else:
            dim.declared = reported
        changed = True
    return changed


def unstretch(dims: Iterable[Dimension]) -> bool:
    """A rate's 429: no window stretches any more (`Dimension.window_seconds`); True if one was."""
    stretched = False
    for dim in dims:
        if dim.stretch and dim.window.span > MIN_WINDOW + JITTER + 1e-9:
            stretched = True
        dim.stretch = False
    return stretched


def never_fits(
    pool: str, dims: Mapping[str, Dimension], amounts: Mapping[str, float]
) -> NeverFitsError | None:
    """Why a request of `amounts` can never be admitted by `pool` (more than a whole per-minute
    limit on some dimension), or None."""
    for name, amount in amounts.items():
        limit = dims[name].limit
        if amount > limit:
            return NeverFitsError(
                f"request needs {amount:g} {name} but provider {pool!r} allows at most "
                f"{limit:g} {name} per minute ({CONFIG_KEYS[name]}); it can never be admitted"
            )
    return None


def queued_wait(
    pool: str,
    dims: Mapping[str, Dimension],
    queued: Iterable[Mapping[str, float]],
    amounts: Mapping[str, float],
    now: float,
) -> float:
    """Rough seconds until `amounts` would be admitted behind the `queued` requests' amounts: the
    slowest dimension's refill of what is queued plus what this one needs (inf if it never fits)."""
    if never_fits(pool, dims, amounts) is not None:
        return math.inf
    ahead: dict[str, float] = {}
    for queued_amounts in queued:
        for name, amount in queued_amounts.items():
            ahead[name] = ahead.get(name, 0.0) + amount
    wait = 0.0
    for name, dim in dims.items():
        bucket = dim.bucket
        need = ahead.get(name, 0.0) + min(amounts.get(name, 0.0), bucket.capacity) - bucket.level(now)
        if need > 0:
            wait = max(wait, need / bucket.rate if bucket.rate > 0 else math.inf)
    return wait


def statistics(
    name: str,
    dims: Mapping[str, Dimension],
    now: float,
    waiters: int,
    paused_until: float | None,
    aimd: AimdController,
    counts: Mapping[str, int],
    *,
    learned: bool = False,
) -> QuotaStats:
    """A pool's `QuotaStats` (its event `counts`: admitted, refunded, reconciled, ...; `learned`:
    its limits came from headers); the effective rate is the pace, not a shared pool's bucket
    running ahead of its store."""
    return QuotaStats(
        name=name,
        limits_per_minute={n: d.limit for n, d in dims.items()},
        effective_per_second={n: d.rate for n, d in dims.items()},
        levels={n: min(d.bucket.level(now), d.bucket.capacity) for n, d in dims.items()},
        capacities={n: d.bucket.capacity for n, d in dims.items()},
        waiters=waiters,
        paused_until=paused_until,
        aimd_factor=aimd.factor,
        cuts=aimd.cuts,
        rate_limited=aimd.rate_limited,
        learned=learned,
        **counts,
    )


def headroom(dims: Mapping[str, Dimension], now: float) -> float:
    """The emptiest bucket's fill fraction (0..1): how much could be admitted right now."""
    return min((max(0.0, min(1.0, d.fill(now))) for d in dims.values()), default=1.0)


def describe(dims: Mapping[str, Dimension], now: float) -> str:
    """Each dimension's level/capacity@rate, for a pool's repr."""
    return ", ".join(
        f"{CONFIG_KEYS[n]}={d.bucket.level(now):.4g}/{d.bucket.capacity:.4g}@{d.bucket.rate:.4g}/s"
        for n, d in dims.items()
    )
