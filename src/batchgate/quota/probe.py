"""The first admissions to a quota pool nobody declared limits for, before its headers name them.

A provider with no `limits:` has its limits learned from its answers' rate-limit headers
(`batchgate.quota.dimension.learn`). Until the first attempt ends there is nothing to pace by,
and whatever the pool admits meanwhile leaves unpaced once an in-flight place frees — a batch's
hundreds of requests at a server we know nothing about. So the probe admits `PROBE` requests at
once, then one every `GAP` seconds, until the first ending (`end`), after which the learned limits
(or none, if its headers named none) pace the rest. Pure: the caller passes the time in.
"""

from __future__ import annotations

import math

PROBE = 4  # admitted at once before any attempt has ended
GAP = 0.25  # seconds between the admissions after those, until one has


class Probe:
    """See the module docstring; `active` only for a pool whose limits are learned."""

    __slots__ = ("_last", "active", "admitted", "ending")

    def __init__(self, active: bool) -> None:
        self.active = active
        self.ending = False  # the first ending is being learned from: still holding
        self.admitted = 0
        self._last = -math.inf

    def wait(self, now: float) -> float:
        """Seconds until the probe lets one more through (0: now)."""
        if not self.active or self.admitted < PROBE:
            return 0.0
        return max(0.0, self._last + GAP - now)

    def note(self, now: float) -> None:
        """One admitted at `now`."""
        if self.active:
            self.admitted += 1
            self._last = now

    def first_ending(self) -> bool:
        """Whether this is the first ending (the caller learns from it, then calls `end`)."""
        if not self.active or self.ending:
            return False
        self.ending = True
        return True

    def end(self) -> None:
        self.active = False
