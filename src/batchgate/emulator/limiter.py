"""The emulated provider's quota: one limiter per limited dimension, all admitting or none charged.

`Quota` combines the dimensions (requests, tokens, input_tokens, output_tokens) under one
enforcement (`enforcement.py`: token bucket, sliding or fixed window). It keeps the *enforced*
limiters apart from the *declared* ones that rate-limit headers report, so a provider can claim
more than it enforces, applies scheduled limit changes, and reports its state in the configured
header style (per-minute scale, the current short window).
"""

from __future__ import annotations

from dataclasses import dataclass

from batchgate.emulator.config import LimitChange, Limits
from batchgate.emulator.enforcement import Limiter, TokenBucket, make_limiter
from batchgate.emulator.modes import Enforcement, HeaderStyle, Neighbour

DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("rpm", "requests"),
    ("tpm", "tokens"),
    ("itpm", "input_tokens"),
    ("otpm", "output_tokens"),
)
__all__ = ["DIMENSIONS", "DimensionState", "Quota", "RequestCost", "TokenBucket"]


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


def _limiters(limits: Limits, enforcement: Enforcement, now: float) -> dict[str, Limiter]:
    out: dict[str, Limiter] = {}
    for key, dim in DIMENSIONS:
        value = getattr(limits, key)
        if value is not None:
            out[dim] = make_limiter(enforcement, value, now)
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
        enforcement: Enforcement | None = None,
        neighbours: tuple[Neighbour, ...] = (),
    ) -> None:
        self._neighbours = neighbours
        self._declared_limits = declared
        self._enforced_limits = enforced
        self._changes = changes
        self.window = window_seconds
        self.enforcement = (enforcement or Enforcement()).resolved(window_seconds)
        self.reset(now)

    def reset(self, now: float) -> None:
        """Refill every bucket, restore the configured limits and restart the change schedule."""
        self.epoch = now
        self._neighbours_at = 0.0  # seconds from the epoch up to which neighbours have taken theirs
        self._pending = list(self._changes)
        self.current_limits = self._enforced_limits or self._declared_limits
        self.enforced = _limiters(self.current_limits, self.enforcement, now)
        self.honest = self._enforced_limits is None
        self.declared = (
            self.enforced if self.honest else _limiters(self._declared_limits, self.enforcement, now)
        )
        self._costs: tuple[tuple[str, Limiter], ...] = tuple(self.enforced.items())

    def advance(self, now: float) -> None:
        """Apply every scheduled limit change that is due; neighbours take their share."""
        self._neighbours_take(now)
        while self._pending and now - self.epoch >= self._pending[0].at:
            change = self._pending.pop(0)
            self.current_limits = self.current_limits.updated(change.limits)
            new: dict[str, Limiter] = {}
            for key, dim in DIMENSIONS:
                value = getattr(self.current_limits, key)
                if value is None:
                    continue
                old = self.enforced.get(dim)
                new[dim] = old.resized(value, now) if old else make_limiter(self.enforcement, value, now)
            self.enforced = new
            if self.honest:
                self.declared = new
            self._costs = tuple(new.items())

    def _neighbours_take(self, now: float) -> None:
        """Other traffic on the key takes its share of every limit since it last did (enforced and
        declared alike; the limits the headers report do not change)."""
        since, at = self._neighbours_at, now - self.epoch
        if not self._neighbours or at <= since:
            return
        self._neighbours_at = at
        share_seconds = sum(n.share * n.seconds_active(since, at) for n in self._neighbours)
        if share_seconds <= 0:
            return
        limiters = list(self.enforced.values())
        if not self.honest:
            limiters += list(self.declared.values())
        for limiter in limiters:
            limiter.charge(limiter.limit / 60.0 * share_seconds, now)

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

    def refund(self, dimensions: dict[str, float], now: float) -> None:
        """Give back part of an admitted request's charge (`dimensions`: amount per dimension),
        enforced and declared alike: a provider that adjusts its output charge when the answer ends."""
        for dim, amount in dimensions.items():
            if amount <= 0:
                continue
            if (bucket := self.enforced.get(dim)) is not None:
                bucket.refund(amount, now)
            if not self.honest and (declared := self.declared.get(dim)) is not None:
                declared.refund(amount, now)

    def try_admit(self, cost: RequestCost, now: float) -> tuple[float, str | None]:
        """Charge and return (0, None) if admissible; else charge nothing and return the wait."""
        wait, binding = self.wait_time(cost, now)
        if binding is None:
            self.charge(cost, now)
        return wait, binding

    def snapshot(self, now: float, style: HeaderStyle = "minute") -> tuple[DimensionState, ...]:
        """The declared limiters' state, as the provider's headers claim it: remaining on the
        per-minute scale (`minute`) or of the current short window (`window`); none for `none`."""
        if style == "none":
            return ()
        return tuple(
            DimensionState(
                dim,
                b.limit,
                int(b.remaining(now) * (60.0 / b.seconds if style == "minute" else 1.0)),
                b.seconds_until_full(now),
            )
            for dim, b in self.declared.items()
        )

    def __repr__(self) -> str:
        return f"Quota(enforced={self.enforced!r}, honest={self.honest})"
