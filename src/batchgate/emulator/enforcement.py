"""The three ways an emulated provider enforces one per-minute limit, with time passed in (pure).

Each holds an *allowance* C = limit × seconds / 60 and never admits more than the per-minute limit
in one request (such a request can never be admitted):
- `TokenBucket` (burst `seconds`): holds C, refills continuously at limit / 60 per second, starts
  full. A request costing c is admitted when the level is at least min(c, C), then the level drops
  by c, possibly below zero (a debt that refill repays). Over any interval [s, e] the admitted
  costs sum to at most C + limit/60 × (e − s) + the largest single cost.
- `SlidingWindow` (window `seconds` W): admits c when the costs admitted in the last W seconds plus
  c are at most C — so any half-open interval of length W holds at most C, with no burst beyond
  it. A request bigger than C is admitted only into an empty window and stays in it for W × c / C
  seconds, so the long-run rate never passes the limit.
- `FixedWindow` (window `seconds` W, boundaries every W seconds from its origin): admits c when
  the current window's total plus c is at most C; totals reset at each boundary (so two windows
  side by side may take 2C in a short interval across a boundary). A request bigger than C is
  admitted only into an empty window and its excess is carried into the windows after it.
"""

from __future__ import annotations

import bisect
import math
from typing import Protocol

from batchgate.emulator.modes import Enforcement

_EPS = 1e-9


class Limiter(Protocol):
    """What the quota needs of one dimension's enforcement."""

    limit: int
    capacity: float
    seconds: float

    def never_fits(self, cost: float) -> bool: ...

    def wait_time(self, cost: float, now: float) -> float:
        """Seconds until `cost` can be admitted (0 if now; inf if never)."""
        ...

    def charge(self, cost: float, now: float) -> None: ...

    def refund(self, amount: float, now: float) -> None:
        """Give back `amount` of what was charged (never past a full allowance)."""
        ...

    def remaining(self, now: float) -> float:
        """What is left of the allowance now (window units)."""
        ...

    def seconds_until_full(self, now: float) -> float: ...

    def resized(self, limit: int, now: float) -> Limiter:
        """The same algorithm for a new limit, keeping what was charged."""
        ...


def _check(limit: int, seconds: float) -> None:
    if limit <= 0 or seconds <= 0:
        raise ValueError("limit and window_seconds must be positive")


def make_limiter(enforcement: Enforcement, limit: int, now: float) -> Limiter:
    """A fresh limiter of the configured kind (its seconds resolved)."""
    seconds = enforcement.length
    if enforcement.kind == "sliding_window":
        return SlidingWindow(limit, seconds, now)
    if enforcement.kind == "fixed_window":
        return FixedWindow(limit, seconds, now)
    return TokenBucket(limit, seconds, now)


class TokenBucket:
    """A continuously refilling bucket for one per-minute limit."""

    __slots__ = ("capacity", "level", "limit", "rate", "seconds", "updated")

    def __init__(self, limit: int, window_seconds: float, now: float, level: float | None = None) -> None:
        _check(limit, window_seconds)
        self.limit = limit
        self.seconds = window_seconds
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

    def refund(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)

    def remaining(self, now: float) -> float:
        self._refill(now)
        return max(0.0, self.level)

    def seconds_until_full(self, now: float) -> float:
        self._refill(now)
        return max(0.0, (self.capacity - self.level) / self.rate)

    def resized(self, limit: int, now: float) -> TokenBucket:
        """A bucket for a new limit, keeping this one's level (capped at the new capacity)."""
        self._refill(now)
        return TokenBucket(limit, self.seconds, now, level=self.level)

    def __repr__(self) -> str:
        return f"TokenBucket(limit={self.limit}, level={self.level:.2f}/{self.capacity:.2f})"


class SlidingWindow:
    """At most the allowance in any window of `seconds`: a log of (expiry, cost), sorted by expiry."""

    __slots__ = ("_log", "_used", "capacity", "limit", "seconds")

    def __init__(self, limit: int, seconds: float, now: float) -> None:
        _check(limit, seconds)
        self.limit = limit
        self.seconds = seconds
        self.capacity = limit * seconds / 60.0
        self._log: list[tuple[float, float]] = []
        self._used = 0.0

    def _expire(self, now: float) -> None:
        log = self._log
        gone = 0
        while gone < len(log) and log[gone][0] <= now + _EPS:
            self._used -= log[gone][1]
            gone += 1
        if gone:
            del log[:gone]
            if not log:
                self._used = 0.0  # no drift from float sums

    def never_fits(self, cost: float) -> bool:
        return cost > self.limit

    def wait_time(self, cost: float, now: float) -> float:
        if cost > self.limit:
            return math.inf
        self._expire(now)
        if not self._log:
            return 0.0
        if cost > self.capacity:  # only into an empty window
            return self._log[-1][0] - now
        excess = self._used + cost - self.capacity
        if excess <= _EPS:
            return 0.0
        freed = 0.0
        for expiry, charged in self._log:
            freed += charged
            if freed >= excess - _EPS:
                return max(0.0, expiry - now)
        return max(0.0, self._log[-1][0] - now)

    def charge(self, cost: float, now: float) -> None:
        self._expire(now)
        expiry = now + self.seconds * max(1.0, cost / self.capacity)
        bisect.insort(self._log, (expiry, cost))
        self._used += cost

    def refund(self, amount: float, now: float) -> None:
        """Take `amount` off the entries that expire first: what is freed now is exact, and the
        window never holds less than it would had the refunded request's own entry shrunk."""
        self._expire(now)
        log = self._log
        i = 0
        while amount > _EPS and i < len(log):
            expiry, charged = log[i]
            taken = min(charged, amount)
            log[i] = (expiry, charged - taken)
            self._used -= taken
            amount -= taken
            i += 1

    def remaining(self, now: float) -> float:
        self._expire(now)
        return max(0.0, self.capacity - self._used)

    def seconds_until_full(self, now: float) -> float:
        self._expire(now)
        return max(0.0, self._log[-1][0] - now) if self._log else 0.0

    def resized(self, limit: int, now: float) -> SlidingWindow:
        """A window for a new limit that still holds what this one admitted recently."""
        self._expire(now)
        new = SlidingWindow(limit, self.seconds, now)
        new._log = list(self._log)
        new._used = self._used
        return new

    def __repr__(self) -> str:
        return f"SlidingWindow(limit={self.limit}, used={self._used:.2f}/{self.capacity:.2f})"


class FixedWindow:
    """The allowance per window of `seconds`, windows starting at `origin` + k × seconds."""

    __slots__ = ("_index", "_used", "capacity", "limit", "origin", "seconds")

    def __init__(self, limit: int, seconds: float, now: float, origin: float | None = None) -> None:
        _check(limit, seconds)
        self.limit = limit
        self.seconds = seconds
        self.capacity = limit * seconds / 60.0
        self.origin = now if origin is None else origin
        self._index = self._window_of(now)
        self._used = 0.0

    def _window_of(self, now: float) -> int:
        return math.floor((now - self.origin) / self.seconds + _EPS)

    def _roll(self, now: float) -> None:
        index = self._window_of(now)
        if index > self._index:  # each window passed repays one allowance of carried excess
            self._used = max(0.0, self._used - self.capacity * (index - self._index))
            self._index = index

    def _windows_until(self, used_at_most: float) -> int:
        """Boundaries to pass until the total carried is at most `used_at_most`."""
        excess = self._used - used_at_most
        return 0 if excess <= _EPS else math.ceil(excess / self.capacity - _EPS)

    def _boundary(self, ahead: int, now: float) -> float:
        return max(0.0, self.origin + (self._index + ahead) * self.seconds - now)

    def never_fits(self, cost: float) -> bool:
        return cost > self.limit

    def wait_time(self, cost: float, now: float) -> float:
        if cost > self.limit:
            return math.inf
        self._roll(now)
        ahead = self._windows_until(max(0.0, self.capacity - cost))
        return 0.0 if ahead == 0 else self._boundary(ahead, now)

    def charge(self, cost: float, now: float) -> None:
        self._roll(now)
        self._used += cost

    def refund(self, amount: float, now: float) -> None:
        self._roll(now)
        self._used = max(0.0, self._used - amount)

    def remaining(self, now: float) -> float:
        self._roll(now)
        return max(0.0, self.capacity - self._used)

    def seconds_until_full(self, now: float) -> float:
        self._roll(now)
        ahead = self._windows_until(0.0)
        return 0.0 if ahead == 0 else self._boundary(ahead, now)

    def resized(self, limit: int, now: float) -> FixedWindow:
        """A window for a new limit on the same boundaries, keeping this window's total."""
        self._roll(now)
        new = FixedWindow(limit, self.seconds, now, origin=self.origin)
        new._used = self._used
        return new

    def __repr__(self) -> str:
        return f"FixedWindow(limit={self.limit}, used={self._used:.2f}/{self.capacity:.2f})"
