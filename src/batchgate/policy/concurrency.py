"""How many requests a provider takes in flight, learned from the ones it turns away.

Local servers and proxies cap concurrent requests and answer the excess with 429 (or 503/529)
instead of queueing it. Cutting the *rate* does not help against that; the in-flight cap must be
learned. Each refusal says how many of our requests were in flight when the refused one was sent
(`in_flight`, itself included): the provider's cap is below that, so the limit drops to
`in_flight − 1`, and that refused level becomes the ceiling. But never below what was proven to
work — the most in flight at which a request was answered with nothing turned away during its
life (`proven`: all those in flight with it succeeded, or are still open): new connections open out
of order, so a request sent with 2 in flight may reach a server capped at 4 as its fifth; such a
refusal at or below the proven level says nothing about the cap (a server capped at 4 that
refused one sent with 2 in flight cut the limit to 1 and kept it there). The limit grows back by
one after `limit` consecutive successes (one step per round trip), but not up to the ceiling
until `probe_period` seconds have passed since the last refusal — a provider capped at 16 is
probed at 17 about twice a minute, not every few requests — unless an answer proves the ceiling
wrong (one answered with that many in flight): then it grows at once. A configured maximum is
never exceeded.

A provider nothing is known about (no limits declared, no maximum) starts at `start` in flight
and grows by one per answer (doubling each round trip) until its first refusal: never hundreds
of requests at once at a server whose limits nobody has seen yet. Pure: the caller passes the
time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SLOW_START = 4  # in flight at first at a provider nothing is known about


@dataclass(frozen=True, slots=True)
class ConcurrencySettings:
    minimum: int = 1
    probe_period: float = 30.0

    def __post_init__(self) -> None:
        if self.minimum < 1 or self.probe_period < 0:
            raise ValueError("minimum must be at least 1 and probe_period non-negative")


class ConcurrencyAimd:
    """The learned in-flight limit of one provider (None: not limited); see the module docstring."""

    __slots__ = (
        "_ceiling",
        "_last_refusal",
        "_slow",
        "_successes",
        "cuts",
        "limit",
        "maximum",
        "proven",
        "settings",
    )

    def __init__(
        self,
        maximum: int | None = None,
        settings: ConcurrencySettings | None = None,
        *,
        start: int | None = None,
    ) -> None:
        self.settings = settings or ConcurrencySettings()
        self.maximum = maximum
        self._slow = maximum is None and start is not None  # growing by one per answer
        self.limit: int | None = start if self._slow else maximum
        self.cuts = 0
        self.proven = 0  # the most in flight that all succeeded (`on_success`)
        self._ceiling = math.inf
        self._last_refusal = -math.inf
        self._successes = 0

    def on_refused(self, in_flight: int, now: float) -> bool:
        """A request sent with `in_flight` requests in flight (itself included) was turned away
        for concurrency; True when the limit went down."""
        self._last_refusal = now
        self._successes = 0
        self._slow = False
        if in_flight <= self.proven:
            return False  # out of order: that many were answered before, the cap is not below it
        self._ceiling = min(self._ceiling, float(in_flight))
        new = max(self.settings.minimum, self.proven, in_flight - 1)
        if self.limit is not None and new >= self.limit:
            return False
        self.limit = new
        self.cuts += 1
        return True

    def on_success(self, now: float, in_flight: int = 0, sent: float = -math.inf) -> bool:
        """A clean answer to a request sent at `sent` with `in_flight` in flight; True when the
        limit went up. It proves that many work at once only if nothing was turned away since it
        was sent: a refusal in its lifetime may have been one of those counted with it."""
        if in_flight > self.proven and self._last_refusal < sent:
            self.proven = in_flight
            if in_flight >= self._ceiling:
                self._ceiling = math.inf  # answered at the refused level: it was no cap
        limit = self.limit
        if limit is None:
            return False
        if self.maximum is not None and limit >= self.maximum:
            return False
        if self._slow:
            self.limit = limit + 1
            return True
        self._successes += 1
        if self._successes < limit and self.proven <= limit:
            return False
        self._successes = 0
        if limit + 1 >= self._ceiling:
            if now - self._last_refusal < self.settings.probe_period:
                return False
            self._ceiling = math.inf  # probe past the old refusal level
        self.limit = max(limit + 1, min(self.proven, self.maximum or self.proven))
        return True

    def __repr__(self) -> str:
        ceiling, cuts = self._ceiling, self.cuts
        return f"ConcurrencyAimd(limit={self.limit}, proven={self.proven}, ceiling={ceiling}, cuts={cuts})"
