"""The shared buckets' and window logs' arithmetic, pure (every time passed in): what
`QuotaStore.apply` does to a quota's state. The memory and SQLite stores run it in Python; the
Redis store runs the same steps in `apply.lua`, on the server. Same admission rule as
`batchgate.quota.bucket`; the same window rule as `batchgate.quota.window`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from batchgate.quota.store.protocol import Pace, Settle, Take

_REL_EPS = 1e-9  # as in TokenBucket: a caller woken at the computed moment finds the bucket ready
_BACKWARDS = 1.0  # seconds: a stored time this far in the future means the clock restarted
_LONGEST_PAUSE = 3600.0  # a stored pause ending later than this is from before a clock restart


@dataclass(slots=True)
class DimState:
    """One shared bucket: its level at `updated` (store seconds) and its pace; and its window
    log: key → [until (store seconds), amount] of every admission still counting."""

    level: float
    updated: float
    rate: float
    capacity: float
    top: float
    held: float = -math.inf  # until when `rate` stands against higher paces
    window: float = math.inf  # what the log may hold at once (inf: no log)
    log: dict[str, list[float]] = field(default_factory=dict)

    def expire(self, now: float) -> None:
        if any(until <= now for until, _ in self.log.values()):
            self.log = {k: e for k, e in self.log.items() if e[0] > now}

    def window_wait(self, amount: float, now: float) -> float:
        """Seconds until the log has room for `amount` (0.0 now; no allowance: always 0.0)."""
        if not math.isfinite(self.window) or amount <= 0:
            return 0.0
        excess = sum(a for _, a in self.log.values()) + min(amount, self.window) - self.window
        if excess <= _REL_EPS * max(1.0, self.window):
            return 0.0
        freed = 0.0
        for until, held in sorted(self.log.values()):  # soonest to leave first
            freed += held
            if freed >= excess - _REL_EPS * max(1.0, self.window):
                return max(0.0, until - now)
        return 0.0  # unreachable: min(amount, window) never exceeds the window

    def refill(self, now: float) -> None:
        if now < self.updated - _BACKWARDS:  # the store's clock restarted (a reboot): count from now
            self.updated = now
        if now > self.updated:
            if self.level < self.top:
                self.level = min(self.top, self.level + (now - self.updated) * self.rate)
            self.updated = now

    def wait_for(self, amount: float) -> float:
        deficit = min(amount, self.capacity) - self.level
        if deficit <= _REL_EPS * max(1.0, self.capacity):
            return 0.0
        return deficit / self.rate if self.rate > 0 else math.inf


@dataclass(slots=True)
class QuotaState:
    """A quota's shared state: a bucket per dimension and the end of the shared pause."""

    dims: dict[str, DimState] = field(default_factory=dict)
    paused_until: float = -math.inf


def apply(
    state: QuotaState, now: float, paces: Mapping[str, Pace], take: Take | None, settle: Settle
) -> float:
    """`QuotaStore.apply` on `state` at store time `now` (mutates `state`); see the protocol."""
    for name, pace in paces.items():
        dim = state.dims.get(name)
        if dim is None:  # a new bucket starts full, as a pool's does
            dim = state.dims[name] = DimState(pace.capacity, now, pace.rate, pace.capacity, pace.top)
        dim.refill(now)
        if pace.rate <= dim.rate or now >= dim.held:
            dim.rate, dim.held, dim.window = pace.rate, now + pace.hold, pace.window
        dim.capacity, dim.top = pace.capacity, pace.top
        dim.level = min(dim.level, dim.top)
        dim.expire(now)
    _settle_log(state, now, settle)
    for name, delta in settle.deltas.items():
        dim = state.dims.get(name)
        if dim is None:
            continue
        if delta > 0:
            dim.level -= delta
        else:
            dim.level = max(dim.level, min(dim.capacity, dim.level - delta))
    if settle.drain:
        for dim in state.dims.values():
            dim.level = min(0.0, dim.level)
    if state.paused_until > now + _LONGEST_PAUSE:
        state.paused_until = -math.inf
    if settle.pause > 0:
        state.paused_until = max(state.paused_until, now + settle.pause)
    if take is None:
        return 0.0
    wait = max(0.0, state.paused_until - now)
    for name, amount in take.amounts.items():
        dim = state.dims.get(name)
        if dim is not None:
            wait = max(wait, dim.wait_for(amount), dim.window_wait(amount, now))
    if wait > 0.0:
        return wait
    for name, amount in take.amounts.items():
        dim = state.dims.get(name)
        if dim is not None:
            dim.level -= amount
            if math.isfinite(dim.window) and amount > 0:
                dim.log[take.key] = [now + take.hold, amount]
    return 0.0


def _settle_log(state: QuotaState, now: float, settle: Settle) -> None:
    """Restamps, then per-entry deltas, on every dimension's window log."""
    for key, restamp in settle.restamps.items():
        for name, amount in restamp.amounts.items():
            dim = state.dims.get(name)
            if dim is None or not math.isfinite(dim.window):
                continue
            entry = dim.log.get(key)
            if entry is not None:
                entry[0] = max(entry[0], now + restamp.hold)
            elif amount > 0:
                dim.log[key] = [now + restamp.hold, amount]
    for key, deltas in settle.entries.items():
        for name, delta in deltas.items():
            dim = state.dims.get(name)
            entry = dim.log.get(key) if dim is not None else None
            if entry is not None:
                entry[1] = max(0.0, entry[1] + delta)
