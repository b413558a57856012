"""Per-provider statistics of a gateway: counters, latency percentiles, tokens (incl. wasted).

Latencies are kept in a bounded, seeded reservoir so memory stays flat on million-item jobs, and
counted in fixed buckets (`LATENCY_BOUNDS_MS`, a Prometheus histogram's `le` bounds) with their sum.
`statistics()` returns frozen snapshots; the mutable recorders stay private to the gateway.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass, field

from batchgate.quota.limits import QuotaStats

RESERVOIR = 20_000
# Upper bounds (inclusive) of the latency buckets, in ms; one more bucket holds everything above.
LATENCY_BOUNDS_MS = (
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    30000.0,
    60000.0,
    120000.0,
)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, round(q / 100.0 * (len(sorted_values) - 1))))
    return sorted_values[rank]


@dataclass(frozen=True, slots=True)
class ProviderStatistics:
    name: str
    requests: int  # attempts sent
    succeeded: int
    failed_attempts: int
    rate_limited: int  # 429s received
    retries: int
    errors_by_kind: dict[str, int]
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    avg_latency_ms: float
    prompt_tokens: int
    completion_tokens: int
    wasted_tokens: int  # tokens charged by the provider for attempts that failed
    in_flight: int
    hedged: int = 0  # duplicate sends of stragglers (first answer wins)
    duplicate_tokens: int = 0  # prompt tokens charged for the legs of a hedge that lost
    quota: QuotaStats | None = None  # the quota pool's own statistics snapshot
    unreachable: bool = False  # the last attempt could not reach it (refused, DNS), none answered since
    unreachable_attempts: int = 0  # attempts that could not reach it, in all
    unreachable_cause: str | None = None  # "connection refused", "DNS failure", ... (the latest)
    circuit: str = "closed"  # the breaker's state: closed | open | half_open | paused | out
    paused_since: float | None = None  # wall time it was paused (an outage waited out); None: it is not
    latency_buckets: tuple[int, ...] = ()  # answered attempts per LATENCY_BOUNDS_MS bucket (+ one above)
    latency_sum_ms: float = 0.0  # over every answered attempt
    retries_by_kind: dict[str, int] = field(default_factory=dict)  # retries by the error that cost them

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {k: getattr(self, k) for k in self.__slots__ if k != "quota"}
        out["errors_by_kind"] = dict(self.errors_by_kind)
        out["retries_by_kind"] = dict(self.retries_by_kind)
        return out


@dataclass(frozen=True, slots=True)
class GatewayStatistics:
    providers: dict[str, ProviderStatistics]
    items_succeeded: int
    items_failed: int
    backing_off: int = 0  # requests sleeping before a retry

    @property
    def rate_limited(self) -> int:
        return sum(p.rate_limited for p in self.providers.values())

    @property
    def requests(self) -> int:
        return sum(p.requests for p in self.providers.values())

    @property
    def wasted_tokens(self) -> int:
        return sum(p.wasted_tokens for p in self.providers.values())


@dataclass
class ProviderRecorder:
    """Mutable counters for one provider; only the gateway's scheduler writes them."""

    name: str
    seed: int = 0
    requests: int = 0
    succeeded: int = 0
    failed_attempts: int = 0
    rate_limited: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wasted_tokens: int = 0
    in_flight: int = 0
    hedged: int = 0
    duplicate_tokens: int = 0
    latency_sum_ms: float = 0.0
    latency_count: int = 0
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    retries_by_kind: Counter[str] = field(default_factory=Counter)
    unreachable: bool = False
    unreachable_attempts: int = 0
    unreachable_cause: str | None = None
    _reservoir: list[float] = field(default_factory=list)
    _buckets: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BOUNDS_MS) + 1))
    _rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._rng = random.Random(f"{self.seed}:{self.name}")

    def record_latency(self, ms: float) -> None:
        self.latency_sum_ms += ms
        self.latency_count += 1
        self._buckets[bisect_left(LATENCY_BOUNDS_MS, ms)] += 1
        if len(self._reservoir) < RESERVOIR:
            self._reservoir.append(ms)
        else:
            slot = self._rng.randrange(self.latency_count)
            if slot < RESERVOIR:
                self._reservoir[slot] = ms

    def record_success(self, latency_ms: float, prompt_tokens: int, completion_tokens: int) -> None:
        self.unreachable = False
        self.succeeded += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.record_latency(latency_ms)

    def record_retry(self, kind: str) -> None:
        """A request is tried again after an attempt that failed with an error of `kind`."""
        self.retries += 1
        self.retries_by_kind[kind] += 1

    def record_unreachable(self, cause: str) -> None:
        """An attempt that could not reach the provider (counted by `record_failure` as well)."""
        self.unreachable = True
        self.unreachable_attempts += 1
        self.unreachable_cause = cause

    def record_failure(self, kind: str, latency_ms: float, wasted_tokens: int) -> None:
        if kind != "unreachable":
            self.unreachable = False  # it answered, if only with an error
        self.failed_attempts += 1
        self.errors_by_kind[kind] += 1
        self.wasted_tokens += wasted_tokens
        if kind == "rate_limit":
            self.rate_limited += 1
        self.record_latency(latency_ms)

    def snapshot(
        self, quota: QuotaStats | None = None, circuit: str = "closed", paused_since: float | None = None
    ) -> ProviderStatistics:
        ordered = sorted(self._reservoir)
        return ProviderStatistics(
            name=self.name,
            requests=self.requests,
            succeeded=self.succeeded,
            failed_attempts=self.failed_attempts,
            rate_limited=self.rate_limited,
            retries=self.retries,
            errors_by_kind=dict(self.errors_by_kind),
            latency_p50_ms=percentile(ordered, 50),
            latency_p95_ms=percentile(ordered, 95),
            latency_p99_ms=percentile(ordered, 99),
            avg_latency_ms=self.latency_sum_ms / self.latency_count if self.latency_count else 0.0,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            wasted_tokens=self.wasted_tokens,
            in_flight=self.in_flight,
            hedged=self.hedged,
            duplicate_tokens=self.duplicate_tokens,
            quota=quota,
            unreachable=self.unreachable,
            unreachable_attempts=self.unreachable_attempts,
            unreachable_cause=self.unreachable_cause,
            circuit=circuit,
            paused_since=paused_since,
            latency_buckets=tuple(self._buckets),
            latency_sum_ms=self.latency_sum_ms,
            retries_by_kind=dict(self.retries_by_kind),
        )
