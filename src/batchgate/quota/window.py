"""What one dimension admitted within the last window, and when room returns (pure).

Evenly spaced sending at rate r can put r·W plus one whole request into a window of W seconds (where
the window's edge falls just before an admission), so pacing alone must keep one request of headroom
below the limit: 5% of a limit of 20 requests a second. This log removes that headroom. It holds
every admission of the last `span` seconds (`cold_span` for one sent before any answer, whose
arrival may lag more: the owner's choice, `batchgate.quota.dimension`) with what it is charged now —
reconciled, refunded or re-priced as the answers come, and counted from when it was sent, which may
be later than its admission — and admits a request only when the sum plus the request stays within
one window's allowance of the limit. Whatever a provider enforces over windows of at least
`MIN_WINDOW`, no such window then holds more than the limit allows, while the pace (the token
bucket) keeps sending smooth.
"""

from __future__ import annotations

import math
from collections import deque

_EPS = 1e-9


class Entry:
    """One admission in the log: until when it counts, for how long, and what it is charged now."""

    __slots__ = ("amount", "hold", "live", "until")

    def __init__(self, until: float, hold: float, amount: float) -> None:
        self.until = until
        self.hold = hold
        self.amount = amount
        self.live = True  # False once it left the window: later corrections no longer count


class WindowLog:
    """See the module docstring."""

    __slots__ = ("_entries", "_sum", "cold_span", "span")

    def __init__(self, span: float, cold_span: float | None = None) -> None:
        if not span > 0:
            raise ValueError(f"span must be positive, got {span!r}")
        self.span = span
        self.cold_span = span if cold_span is None else max(span, cold_span)
        self._entries: deque[Entry] = deque()
        self._sum = 0.0

    def _expire(self, now: float) -> None:
        entries = self._entries
        while entries and entries[0].until <= now:
            entry = entries.popleft()
            entry.live = False
            self._sum -= entry.amount
        if not entries:
            self._sum = 0.0  # no float drift survives an empty window

    def total(self, now: float) -> float:
        """What the last `span` seconds hold."""
        self._expire(now)
        return self._sum

    def add(self, amount: float, now: float, *, cold: bool = False) -> Entry:
        """Log an admission of `amount` at `now` (`cold`: sent before any answer, it counts for
        `cold_span`)."""
        self._expire(now)
        hold = self.cold_span if cold else self.span
        entry = Entry(now + hold, hold, amount)
        self._entries.append(entry)
        self._sum += amount
        return entry

    def adjust(self, entry: Entry, delta: float) -> None:
        """`entry` is charged `delta` more (less if negative), if it is still in the window."""
        if entry.live:
            new = max(0.0, entry.amount + delta)
            self._sum += new - entry.amount
            entry.amount = new

    def scale(self, ratio: float, now: float, *, skip: frozenset[int] = frozenset()) -> None:
        """Every entry in the window (but those whose `id` is in `skip`) was charged `ratio` × what
        it holds: what a provider that charges more than it reported really took."""
        self._expire(now)
        for entry in self._entries:
            if id(entry) not in skip:
                self._sum += entry.amount * (ratio - 1.0)
                entry.amount *= ratio

    def restamp(self, entry: Entry, now: float) -> None:
        """`entry` left only at `now` (it waited for a connection or an in-flight place after its
        admission): it counts from then. It keeps its place in the log, so it also holds back the
        expiry of the entries behind it (erring toward a fuller window)."""
        if entry.live and now + entry.hold > entry.until:
            entry.until = now + entry.hold

    def time_until(self, amount: float, cap: float, now: float) -> float:
        """Seconds until `amount` fits under `cap` (a request bigger than `cap` waits for an
        empty window); 0 if it fits now."""
        self._expire(now)
        excess = self._sum + min(amount, cap) - cap
        if excess <= _EPS * max(1.0, cap):
            return 0.0
        freed, last = 0.0, -math.inf
        for entry in self._entries:  # in admission order: usually the first one or two free enough
            freed += entry.amount
            last = max(last, entry.until)  # a restamped entry holds the ones behind it
            if freed >= excess - _EPS * max(1.0, cap):
                return max(0.0, last - now)
        return math.inf if last == -math.inf else max(0.0, last - now)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"WindowLog({self._sum:.4g} in {len(self._entries)} over {self.span:g}s)"
