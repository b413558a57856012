"""How much output may be held in flight, for a provider that settles output when the answer ends.

Anthropic's OTPM (shared/PROTOCOLS.md, "Anthropic output tokens at real latency"; Anthropic's
rate-limit docs): a request's whole `max_tokens` is taken from the output bucket when it is
admitted and held until the answer ends, when it is replaced by the real output. The binding
constraint is the tokens *held in flight* plus the tokens *actually produced* per minute — not
`max_tokens` × requests. The pool mirrors that bucket: its output dimension takes `max_tokens` at
admission and gives the unused part back at the end (`reservations.py`), so its refill paces what
is produced, and what it lets be held in flight is its capacity: `depth` seconds of the rate
(`Dimension.hold`; no window log counts a hold as output, `Dimension.pace`).

The depth is the provider's, and nobody declares it: a few seconds where the limit is enforced
over short intervals, the whole minute where the bucket holds a minute (both documented). It
starts at `START` (one second: safe whatever the depth) and is learned from the headers, which
count every request still in flight at its `max_tokens`. A bucket that refills up to its capacity
and takes back unused output up to it (the provider's, and our mirror: `TokenBucket.give_back`)
lacks the same tokens whatever its capacity, given the same admissions and answers; ours lacks a
little more (we take before the provider does and give back after). So a provider reporting the
share `f` of its output bucket left while ours lacks `d` holds at least `d ÷ (1 − f)` (`grow`; its
remaining is rounded, so `ROUNDING` tokens are added to what it lacks, and `MARGIN` of the
estimate is used; not from the first `FIRST_ANSWERS` answers: a start's first admissions leave
at once, and the provider's report counts only those that have reached it; nor what requests
admitted here and not yet on the wire hold: those the answer that brought the report made room
for, admitted before anyone reads the report, and those waiting their turn at a shared store;
nor while ours lacks less than `SPARSE` of its capacity: our bucket refills at the limit × the
safety margin, so its lack runs ahead of the provider's by a little every second, which only a
bucket holding many requests makes small). A 429 on output tokens sets the depth back to
`START` (`shrink`): ours lacked more than the provider's, a timing our estimate missed (requests
on their way count in ours only) or a provider that keeps the charge.

A low `remaining` while requests are in flight is no evidence that the provider keeps the charge:
`without_holds` gives back what our own bucket's lack explains before the AIMD's room and the
learning of a kept charge read it — unless we let no more than one second be held (`START`) and
hold no more: a provider whose bucket is empty then keeps the charge (one that keeps it looks like
a shallow bucket, its depth never grows; its first 429 takes a grown one back).
"""

from __future__ import annotations

import dataclasses
import math

from batchgate.models import RateLimitSnapshot
from batchgate.quota.dimension import Dimension
from batchgate.quota.limits import Reservation

START = 1.0  # seconds of the output rate held in flight before any header said more
LONGEST = 60.0  # Anthropic's bucket holds at most the per-minute limit
MARGIN = 0.85  # share of the estimated depth used
FIRST_ANSWERS = 4  # answers before the first estimate: until then most holds are on their way
SPARSE = 0.25  # share of our bucket it must lack: a few requests held say little (our refill lags)
ROUNDING = 500.0  # tokens: Anthropic rounds remaining to the nearest thousand


class OutputHold:
    """The depth of one provider's output bucket, as learned; see the module docstring."""

    __slots__ = ("_credit", "_unsent", "depth")

    def __init__(self) -> None:
        self.depth = START  # seconds of the output rate the provider's bucket is known to hold
        self._credit = 0.0  # what deepening added to our level, for a shared store's (`take_credit`)
        self._unsent: dict[Reservation, float] = {}  # admitted here, not yet on the wire

    def admitted(self, res: Reservation) -> None:
        """`res` was admitted: its output is ours to hold, not yet the provider's."""
        if (amount := res.charged.get("output_tokens", 0.0)) > 0:
            self._unsent[res] = amount

    def sent(self, res: Reservation) -> None:
        """`res` went on the wire (or was settled without): the provider holds it from now."""
        self._unsent.pop(res, None)

    def grow(self, snapshot: RateLimitSnapshot, out: Dimension, now: float, answers: int) -> bool:
        """Learn a deeper bucket from a minute-style report after `answers` answers (none from the
        first `FIRST_ANSWERS`); True if the depth grew."""
        per_second = out.limit / 60.0
        if answers < FIRST_ANSWERS:
            return False
        limit = snapshot.limit_output_tokens or out.limit
        share, lacks = _share(snapshot, limit), _lacks(out, now) - sum(self._unsent.values())
        if share is None or lacks < SPARSE * out.bucket.capacity or per_second <= 0:
            return False
        provider_lacks = (1.0 - share) + ROUNDING / limit  # as a share of its bucket
        seconds = min(LONGEST, MARGIN * lacks / provider_lacks / per_second)
        if seconds <= self.depth + 1e-9:
            return False
        self.depth = seconds
        return True

    def deepened(self, amount: float) -> float:
        """Our bucket's level rose by `amount` with its depth: the provider's was that much higher
        than we thought; a shared store's level rises as much (`take_credit`). Returns `amount`."""
        self._credit += max(0.0, amount)
        return amount

    def take_credit(self) -> float:
        """What deepening added to our level since last asked (a shared store's due)."""
        credit, self._credit = self._credit, 0.0
        return credit

    def shrink(self, out: Dimension | None) -> bool:
        """A 429 on output tokens: the provider holds less than we let be held; True if shallower."""
        if out is None or self.depth <= START:
            return False
        self.depth = START
        return True

    def without_holds(self, snapshot: RateLimitSnapshot, out: Dimension, now: float) -> RateLimitSnapshot:
        """`snapshot` with what our own bucket's lack explains given back to its output `remaining`
        (a share of the limit, at most all of it): what the provider keeps once the holds end."""
        remaining, limit = snapshot.remaining_output_tokens, snapshot.limit_output_tokens
        capacity, lacks = out.bucket.capacity, _lacks(out, now)
        if remaining is None or not limit or capacity <= 0:
            return snapshot
        if self.depth <= START and lacks <= capacity:
            return snapshot  # a second held in flight explains no provider's empty bucket
        explained = min(1.0, lacks / capacity) * limit
        return dataclasses.replace(snapshot, remaining_output_tokens=min(limit, remaining + explained))

    def __repr__(self) -> str:
        return f"OutputHold(depth={self.depth:.3g}s)"


def _lacks(out: Dimension, now: float) -> float:
    """What our output bucket lacks of its capacity now."""
    return max(0.0, out.bucket.capacity - out.bucket.level(now))


def _share(snapshot: RateLimitSnapshot, limit: float) -> float | None:
    remaining = snapshot.remaining_output_tokens
    if remaining is None or not math.isfinite(remaining) or limit <= 0:
        return None
    return max(0.0, min(1.0, remaining / limit))
