"""How much burst a provider tolerates, learned from its answers and never assumed up front.

A pool starts with no burst beyond one request: its buckets hold nothing, so requests leave
evenly spaced at the rate (GCRA-style "pay after": each admission puts the bucket in debt by its
cost, the next waits until the debt is repaid). Whatever the provider enforces — a token bucket,
a sliding or a fixed window of any length — smooth sending at the rate never overruns it by more
than one request.

Burst is earned only where it was tried: when a request arrived at an idle pool whose bucket
held its whole (learned) burst, and no 429 followed for `clean_period` seconds, the provider has
shown it tolerates that burst, and the burst grows by `step` seconds (up to `max_seconds`). A 429
while a burst was being tried halves it and holds it for `hold` seconds. Saturated batch work
queues and never finds the bucket idle, so its burst stays where it is: it needs none. Pure: the
caller passes the time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
