"""How long to wait for one provider's answer: adaptive timeouts and when to hedge.

From the latencies of a provider's recent successful answers (the last `window` of them):

    timeout      = min(configured maximum, max(floor, P95 × factor + margin))
    hedge after  = max(hedge_floor, P99, P95 × hedge_factor), if that is sooner than the timeout

A request still unanswered after `hedge_after` runs far past what its provider usually takes: it is
worth sending again (first answer wins). Far past, not merely slow: a hedge spends quota and money
twice, and batch work gains from it only where a request would hold the job — a hang, or the last
straggler — so the threshold sits at twice P95 (about P99.95 of a provider whose latencies spread
like a log-normal of σ 0.4), above the latency tail a healthy provider draws (and the attempt
sends the hedge only once nobody queues at the pool: `batchgate.attempt`) — and never before
`hedge_floor` (a second): a provider that answers in tens of milliseconds has stragglers of a
few hundred that come from queueing (its own, or the client's loop), which a second copy of the
request waits in as well; hedging them doubled the spend on up to 8% of a fast job's requests and
saved it nothing. Until `min_samples`
answers are in, the configured maximum holds, and a request is hedged after `cold_factor` × the
slowest answer so far plus the margin (or after `cold_hedge` seconds before any answer): a hang
among the first requests must not hold a job for the whole configured maximum. A request that
already timed out gets twice the timeout on each further attempt (never more than the maximum), so a
legitimately slow request (a long answer) is not cut off forever. Percentiles are recomputed every
`refresh` samples, not on every answer. Pure: latencies are passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LatencySettings:
    window: int = 256
    min_samples: int = 20
    factor: float = 1.5
    hedge_factor: float = 2.0  # × P95: hedge what runs far past the provider's usual tail
    hedge_floor: float = 1.0  # seconds: never hedge sooner than this
    margin: float = 1.0  # seconds
    floor: float = 1.0  # seconds: never time out sooner than this
    refresh: int = 16
    cold_factor: float = 4.0
    cold_hedge: float = 10.0  # seconds, before any answer
    hedge: bool = True  # False: never hedge (`settings.timeouts.hedge`)

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_samples < 1 or self.refresh < 1:
            raise ValueError("window, min_samples and refresh must be at least 1")
        if self.factor < 1 or self.hedge_factor < 1 or self.margin < 0 or self.floor <= 0:
            raise ValueError("factor and hedge_factor must be >= 1, margin >= 0 and floor positive")
        if self.hedge_floor < 0:
            raise ValueError("hedge_floor must be >= 0")


class LatencyModel:
    """One provider's recent latencies and the waits derived from them."""

    __slots__ = ("_count", "_p95", "_p99", "_samples", "maximum", "settings")

    def __init__(self, maximum: float, settings: LatencySettings | None = None) -> None:
        if not maximum > 0:
            raise ValueError(f"maximum must be positive, got {maximum!r}")
        self.settings = settings or LatencySettings()
        self.maximum = maximum
        self._samples: list[float] = []
        self._count = 0
        self._p95 = math.nan
        self._p99 = math.nan

    def observe(self, seconds: float) -> None:
        """One successful answer's latency."""
        if not math.isfinite(seconds) or seconds < 0:
            return
        s = self.settings
        if len(self._samples) < s.window:
            self._samples.append(seconds)
        else:
            self._samples[self._count % s.window] = seconds
        self._count += 1
        if self._count >= s.min_samples and (self._count % s.refresh == 0 or math.isnan(self._p95)):
            ordered = sorted(self._samples)
            last = len(ordered) - 1
            self._p95 = ordered[min(last, math.ceil(0.95 * last))]
            self._p99 = ordered[min(last, math.ceil(0.99 * last))]

    @property
    def ready(self) -> bool:
        return not math.isnan(self._p95)

    def timeout(self, timeouts_so_far: int = 0) -> float:
        """Seconds to wait for an attempt, after `timeouts_so_far` earlier attempts timed out."""
        if not self.ready:
            return self.maximum
        s = self.settings
        base = max(s.floor, self._p95 * s.factor + s.margin)
        return min(self.maximum, base * 2.0 ** max(0, timeouts_so_far))

    def hedge_after(self) -> float | None:
        """Seconds after which an unanswered attempt is worth sending again; None: don't hedge."""
        s = self.settings
        if not s.hedge:
            return None
        if not self.ready:
            cold = s.cold_factor * max(self._samples) + s.margin if self._samples else s.cold_hedge
            return cold if cold < self.maximum else None
        wait = max(s.hedge_floor, self._p99, self._p95 * s.hedge_factor)
        return wait if wait < self.timeout() else None

    def __repr__(self) -> str:
        return f"LatencyModel(p95={self._p95:.3g}s, p99={self._p99:.3g}s, samples={self._count})"
