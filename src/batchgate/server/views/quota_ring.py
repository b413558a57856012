"""The providers page's data: the shared gateway's quota state sampled every `every_s` seconds
(a clock timer re-armed at each sample; nothing polls) into a bounded ring — per provider its
requests and tokens sent, its 429s (cumulative: the page draws the rates), and per quota
dimension the limit per minute, the pace in force (× safety × AIMD) and the share of the bucket
in use."""

from __future__ import annotations

from collections import deque
from typing import TypedDict

from batchgate.clock import Clock, TimerHandle
from batchgate.gateway import Gateway
from batchgate.stats import ProviderStatistics

RING = 720


class DimensionSample(TypedDict):
    limit_per_min: float
    pace_per_min: float  # the pace in force: × safety × AIMD
    used: float  # the share of the bucket in use


class ProviderSample(TypedDict):
    requests: int
    rate_limited: int
    tokens: int
    aimd_factor: float
    dims: dict[str, DimensionSample]


class Sample(TypedDict):
    t: float
    providers: dict[str, ProviderSample]


class RingView(TypedDict):
    """What `/dashboard/providers` answers."""

    every_s: float
    samples: list[Sample]


def provider_sample(p: ProviderStatistics) -> ProviderSample:
    """One provider's figures now; its quota's dimensions keyed by name."""
    quota = p.quota
    dims: dict[str, DimensionSample] = {}
    if quota is not None:
        for dim, per_min in quota.limits_per_minute.items():
            cap = quota.capacities.get(dim, 0.0)
            level = quota.levels.get(dim, cap)
            dims[dim] = {
                "limit_per_min": round(float(per_min), 3),
                "pace_per_min": round(float(quota.effective_per_second.get(dim, 0.0)) * 60, 3),
                "used": round(min(1.0, max(0.0, 1.0 - level / cap)), 4) if cap > 0 else 0.0,
            }
    return {
        "requests": p.requests,
        "rate_limited": p.rate_limited,
        "tokens": p.prompt_tokens + p.completion_tokens,
        "aimd_factor": round(float(quota.aimd_factor), 4) if quota is not None else 1.0,
        "dims": dims,
    }


class QuotaRing:
    def __init__(self, gateway: Gateway, clock: Clock, every_s: float, size: int = RING) -> None:
        self._gateway, self._clock, self.every_s = gateway, clock, every_s
        self._samples: deque[Sample] = deque(maxlen=size)
        self._timer: TimerHandle | None = None

    def start(self) -> None:
        self._take()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _take(self) -> None:
        stats = self._gateway.statistics()
        providers = {name: provider_sample(p) for name, p in stats.providers.items()}
        self._samples.append({"t": round(self._clock.wall(), 3), "providers": providers})
        self._timer = self._clock.call_at(self._clock.now() + self.every_s, self._take)

    def view(self) -> RingView:
        return {"every_s": self.every_s, "samples": list(self._samples)}
