"""A token bucket with the providers' admission rule; pure, every time passed in.

The bucket holds at most `capacity` units and refills continuously at `rate` units per second.
A request of `amount` is admissible when the level is at least min(amount, capacity) — so a
request bigger than the bucket waits for a full bucket — and taking it may leave the level
negative (a debt that refill repays). This is exactly how the providers (and our emulator)
enforce per-minute limits over short windows, so mirroring it keeps us clear of 429s.

`slack` lets the level rise that far above the capacity without changing what is admissible: a
timer that fires a little late then admits with that much to spare, and the next request comes
that much sooner, so timer lateness is not lost rate.
"""

from __future__ import annotations

import math

_REL_EPS = 1e-9  # float slack: a timer set for the exact refill moment must find the bucket ready


class TokenBucket:
    """A refilling bucket; see the module docstring."""

    __slots__ = ("_capacity", "_level", "_rate", "_top", "_updated", "slack")

    def __init__(
        self, rate: float, capacity: float, now: float, *, level: float | None = None, slack: float = 0.0
    ) -> None:
        _check(rate, capacity)
        self._rate = rate
        self._capacity = capacity
        self.slack = slack
        self._top = capacity + slack
        self._level = capacity if level is None else min(level, self._top)
        self._updated = now

    @property
    def rate(self) -> float:
        return self._rate

    @property
    def capacity(self) -> float:
        return self._capacity

    def _refill(self, now: float) -> None:
        if now > self._updated:
            if self._level < self._top:
                self._level = min(self._top, self._level + (now - self._updated) * self._rate)
            self._updated = now

    def _eps(self) -> float:
        return _REL_EPS * max(1.0, self._capacity)

    def level(self, now: float) -> float:
        self._refill(now)
        return self._level

    def can_take(self, amount: float, now: float) -> bool:
        self._refill(now)
        return self._level + self._eps() >= min(amount, self._capacity)

    def time_until(self, amount: float, now: float) -> float:
        """Seconds until `amount` is admissible: 0 if it is now, inf if it never will be."""
        self._refill(now)
        deficit = min(amount, self._capacity) - self._level
        if deficit <= self._eps():
            return 0.0
        if self._rate <= 0:
            return math.inf
        return deficit / self._rate

    def take(self, amount: float, now: float) -> None:
        """Charge `amount` (admissible or not: the level may go negative)."""
        self._refill(now)
        self._level -= amount

    def give_back(self, amount: float, now: float) -> None:
        """Return `amount` (a refund or an over-estimate); the level never passes capacity."""
        self._refill(now)
        self._level = max(self._level, min(self._capacity, self._level + amount))

    def set_rate(
        self, rate: float, now: float, *, capacity: float | None = None, slack: float | None = None
    ) -> None:
        """Change the refill rate (and optionally the capacity and slack) from `now` on; keeps
        the level."""
        new_capacity = self._capacity if capacity is None else capacity
        _check(rate, new_capacity)
        self._refill(now)
        self._rate = rate
        self._capacity = new_capacity
        if slack is not None:
            self.slack = slack
        self._top = new_capacity + self.slack
        self._level = min(self._level, self._top)

    def set_level(self, level: float, now: float) -> None:
        """Force the level (capped at capacity), e.g. to what a provider's headers report."""
        self._refill(now)
        self._level = min(level, self._capacity)

    def __repr__(self) -> str:
        return (
            f"TokenBucket(rate={self._rate:.4g}/s, level={self._level:.4g}/{self._capacity:.4g}, "
            f"at={self._updated:.3f})"
        )


def _check(rate: float, capacity: float) -> None:
    if not (math.isfinite(rate) and rate >= 0):
        raise ValueError(f"rate must be finite and non-negative, got {rate}")
    if not (math.isfinite(capacity) and capacity >= 0):
        raise ValueError(f"capacity must be finite and non-negative, got {capacity}")
