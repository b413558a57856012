"""The emulated provider's quota: pure token buckets, one per dimension, with time passed in.

A bucket for a per-minute `limit` holds C = limit × window / 60 and refills continuously at
limit / 60 per second, starting full. A request costing c is admitted when the level is at least
min(c, C) — a request bigger than one window's allowance waits for a full bucket — and then the
level drops by c, possibly below zero (a debt that refill repays). A request costing more than the
whole per-minute limit can never be admitted. Hence over any interval [s, e] the admitted costs
sum to at most C + limit/60 × (e − s) + the largest single cost.

`Quota` combines the dimensions (requests, tokens, input_tokens, output_tokens): all admit or none
is charged. It keeps the *enforced* buckets apart from the *declared* ones that rate-limit headers
report, so a provider can claim more than it enforces, and applies scheduled limit changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batchgate.emulator.config import LimitChange, Limits

DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("rpm", "requests"),
    ("tpm", "tokens"),
    ("itpm", "input_tokens"),
    ("otpm", "output_tokens"),
)
_EPS = 1e-9


class TokenBucket:
    """A continuously refilling bucket for one per-minute limit."""

    __slots__ = ("capacity", "level", "limit", "rate", "updated")

    def __init__(self, limit: int, window_seconds: float, now: float, level: float | None = None) -> None:
        if limit <= 0 or window_seconds <= 0:
            raise ValueError("limit and window_seconds must be positive")
        self.limit = limit
        self.capacity = limit * window_seconds / 60.0
        self.rate = limit / 60.0
        self.level = self.capacity if level is None else min(level, self.capacity)
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
            self.updated = now

    def never_fits(self, cost: float) -> bool:
        return cost > self.limit

    def wait_time(self, cost: float, now: float) -> float:
        """Seconds until `cost` can be admitted (0 if now; inf if never)."""
        if cost > self.limit:
            return math.inf
        self._refill(now)
        need = min(cost, self.capacity) - self.level
        return 0.0 if need <= _EPS else need / self.rate

    def charge(self, cost: float, now: float) -> None:
        self._refill(now)
        self.level -= cost

    def remaining(self, now: float) -> float:
        self._refill(now)
        return max(0.0, self.level)

    def seconds_until_full(self, now: float) -> float:
        self._refill(now)
        return max(0.0, (self.capacity - self.level) / self.rate)

    def resized(self, limit: int, window_seconds: float, now: float) -> TokenBucket:
        """A bucket for a new limit, keeping this one's level (capped at the new capacity)."""
        self._refill(now)
        return TokenBucket(limit, window_seconds, now, level=self.level)

    def __repr__(self) -> str:
        return f"TokenBucket(limit={self.limit}, level={self.level:.2f}/{self.capacity:.2f})"


@dataclass(frozen=True, slots=True)
class RequestCost:
    """What one request charges, per dimension."""

    tokens: int
    input_tokens: int
    output_tokens: int
    requests: int = 1


@dataclass(frozen=True, slots=True)
class DimensionState:
    """One dimension as rate-limit headers report it."""

    dimension: str
    limit: int
    remaining: int
    seconds_until_full: float


def _buckets(limits: Limits, window: float, now: float) -> dict[str, TokenBucket]:
    out: dict[str, TokenBucket] = {}
    for key, dim in DIMENSIONS:
        value = getattr(limits, key)
        if value is not None:
            out[dim] = TokenBucket(value, window, now)
    return out


class Quota:
    """All of one provider's limits: admission against the enforced buckets, headers from the declared."""

    def __init__(
        self,
        declared: Limits,
        enforced: Limits | None,
        changes: tuple[LimitChange, ...],
        window_seconds: float,
        now: float,
    ) -> None:
        self._declared_limits = declared
        self._enforced_limits = enforced
        self._changes = changes
        self.window = window_seconds
        self.reset(now)

    def reset(self, now: float) -> None:
        """Refill every bucket, restore the configured limits and restart the change schedule."""
        self.epoch = now
        self._pending = list(self._changes)
        self.current_limits = self._enforced_limits or self._declared_limits
        self.enforced = _buckets(self.current_limits, self.window, now)
        self.honest = self._enforced_limits is None
        self.declared = self.enforced if self.honest else _buckets(self._declared_limits, self.window, now)
        self._costs: tuple[tuple[str, TokenBucket], ...] = tuple(self.enforced.items())

    def advance(self, now: float) -> None:
        """Apply every scheduled limit change that is due."""
        while self._pending and now - self.epoch >= self._pending[0].at:
            change = self._pending.pop(0)
            self.current_limits = self.current_limits.updated(change.limits)
            new: dict[str, TokenBucket] = {}
            for key, dim in DIMENSIONS:
                value = getattr(self.current_limits, key)
                if value is None:
                    continue
                old = self.enforced.get(dim)
                new[dim] = (
                    old.resized(value, self.window, now) if old else TokenBucket(value, self.window, now)
                )
            self.enforced = new
            if self.honest:
                self.declared = new
            self._costs = tuple(new.items())

    def never_fits(self, cost: RequestCost) -> str | None:
        """The first dimension this request exceeds on its own, if any."""
        for dim, bucket in self._costs:
            if bucket.never_fits(getattr(cost, dim)):
                return dim
        return None

    def wait_time(self, cost: RequestCost, now: float) -> tuple[float, str | None]:
        """Seconds until every dimension admits the request, and the binding dimension."""
        worst, binding = 0.0, None
        for dim, bucket in self._costs:
            wait = bucket.wait_time(getattr(cost, dim), now)
            if wait > worst:
                worst, binding = wait, dim
        return worst, binding

    def charge(self, cost: RequestCost, now: float) -> None:
        for dim, bucket in self._costs:
            bucket.charge(getattr(cost, dim), now)
        if not self.honest:
            for dim, bucket in self.declared.items():
                bucket.charge(getattr(cost, dim), now)

    def try_admit(self, cost: RequestCost, now: float) -> tuple[float, str | None]:
        """Charge and return (0, None) if admissible; else charge nothing and return the wait."""
        wait, binding = self.wait_time(cost, now)
        if binding is None:
            self.charge(cost, now)
        return wait, binding

    def snapshot(self, now: float) -> tuple[DimensionState, ...]:
        """The declared buckets' state, as the provider's headers claim it."""
        return tuple(
            DimensionState(
                dim, b.limit, int(b.remaining(now) * 60.0 / self.window), b.seconds_until_full(now)
            )
            for dim, b in self.declared.items()
        )

    def __repr__(self) -> str:
        return f"Quota(enforced={self.enforced!r}, honest={self.honest})"
