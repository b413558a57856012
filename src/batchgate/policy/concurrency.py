"""How many requests a provider takes in flight, learned from the ones it turns away.

Local servers and proxies cap concurrent requests and answer the excess with 429 (or 503/529)
instead of queueing it. Cutting the *rate* does not help against that; the in-flight cap must be
learned. Each refusal says how many of our requests were in flight when the refused one was sent
(`in_flight`, itself included): the provider's cap is below that, so the limit drops to
`in_flight − 1` (never below `minimum`), and that refused level becomes the ceiling. The limit
grows back by one after `limit` consecutive successes (one step per round trip), but not up to
the ceiling until `probe_period` seconds have passed since the last refusal — a provider capped
at 16 is probed at 17 about twice a minute, not every few requests. A configured maximum is never
exceeded. Pure: the caller passes the time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConcurrencySettings:
    minimum: int = 1
    probe_period: float = 30.0

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.probe_period < 0:
            raise ValueError("minimum must be at least 1 and probe_period non-negative")


class ConcurrencyAimd:
    """The learned in-flight limit of one provider (None: not limited); see the module docstring."""

    __slots__ = ("_ceiling", "_last_refusal", "_successes", "cuts", "limit", "maximum", "settings")

    def __init__(self, maximum: int | None = None, settings: ConcurrencySettings | None = None) -> None:
        self.settings = settings or ConcurrencySettings()
        self.maximum = maximum
        self.limit: int | None = maximum
        self.cuts = 0
        self._ceiling = math.inf
        self._last_refusal = -math.inf
        self._successes = 0

    def on_refused(self, in_flight: int, now: float) -> bool:
        """A request sent with `in_flight` requests in flight (itself included) was turned away
        for concurrency; True when the limit went down."""
        self._last_refusal = now
        self._successes = 0
        self._ceiling = min(self._ceiling, float(in_flight))
        new = max(self.settings.minimum, in_flight - 1)
        if self.limit is not None and new >= self.limit:
            return False
        self.limit = new
        self.cuts += 1
        return True

    def on_success(self, now: float) -> bool:
        """A clean answer; True when the limit went up by one."""
        limit = self.limit
        if limit is None:
            return False
        self._successes += 1
        if self._successes < limit:
            return False
        self._successes = 0
        if self.maximum is not None and limit >= self.maximum:
            return False
        if limit + 1 >= self._ceiling:
            if now - self._last_refusal < self.settings.probe_period:
                return False
            self._ceiling = math.inf  # probe past the old refusal level
        self.limit = limit + 1
        return True

    def __repr__(self) -> str:
        return f"ConcurrencyAimd(limit={self.limit}, ceiling={self._ceiling}, cuts={self.cuts})"
