"""The quota pool's value objects: declared limits, reservations, how an attempt on one ended
(`Outcome`: what `QuotaPool.settle` is handed) and statistics.

Dimensions, named after the `Cost` fields that charge them:

    rpm  → requests       tpm  → tokens (prompt + max_tokens × n, OpenAI-style combined)
    itpm → input_tokens   otpm → output_tokens (Anthropic-style split limits)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.quota.window import Entry

DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("rpm", "requests"),
    ("tpm", "tokens"),
    ("itpm", "input_tokens"),
    ("otpm", "output_tokens"),
)


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """One provider key's declared per-minute limits (None: not limited) and our safety margins.

    `safety` scales every rate so network bunching rarely provokes a 429; `burst_seconds` sizes
    each bucket as that many seconds of its (effective) rate. None (the default) assumes no burst
    at all: requests leave evenly spaced, and a burst is used only once the provider has shown it
    tolerates one (`batchgate.quota.learning.BurstLearner`), one average request per second below the rate
    (`batchgate.quota.dimension`). A configured burst says the enforcement is known: a token
    bucket holding that many seconds, paced at the full rate.
    """

    rpm: float | None = None
    tpm: float | None = None
    itpm: float | None = None
    otpm: float | None = None
    safety: float = 0.99
    burst_seconds: float | None = None

    def __post_init__(self) -> None:
        for key, _ in DIMENSIONS:
            value = getattr(self, key)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{key} must be a non-negative number, got {value!r}")
        if not 0.0 < self.safety <= 1.0:
            raise ValueError(f"safety must be in (0, 1], got {self.safety!r}")
        burst = self.burst_seconds
        if burst is not None and not (math.isfinite(burst) and burst > 0):
            raise ValueError(f"burst_seconds must be positive, got {self.burst_seconds!r}")

    def declared(self) -> dict[str, float]:
        """The limited dimensions: Cost field name → per-minute limit."""
        out: dict[str, float] = {}
        for key, name in DIMENSIONS:
            value = getattr(self, key)
            if value is not None:
                out[name] = float(value)
        return out


def cost_amounts(cost: Cost, dimensions: Mapping[str, object]) -> dict[str, float]:
    """What `cost` charges on each of `dimensions` (zero charges are left out)."""
    out: dict[str, float] = {}
    for name in dimensions:
        amount = float(getattr(cost, name))
        if amount < 0 or not math.isfinite(amount):
            raise ValueError(f"cost {name} must be a non-negative number, got {amount!r}")
        if amount > 0:
            out[name] = amount
    return out


class SharedEntry:
    """What a shared quota store took for a reservation: the key of its window-log entries, the
    amounts it holds now (kept current as the reservation is corrected), how long they count,
    and when they were taken (this process's clock)."""

    __slots__ = ("amounts", "hold", "key", "taken_at")

    def __init__(self, key: str, amounts: dict[str, float], hold: float, taken_at: float) -> None:
        self.key = key
        self.amounts = amounts
        self.hold = hold
        self.taken_at = taken_at


class Reservation:
    """What one admitted request took from a pool, per dimension, until it is settled.

    Settled exactly once, by construction: whoever takes it holds it in a `Held`
    (`batchgate.quota.held`) whose `close` — in a `finally` — settles it with what is known if
    nothing settled it before (`QuotaPool.settle(res, Outcome)` when its attempt ends; `refund`
    when the provider never admitted it). A second settle is a no-op, counted (`settled_twice`).
    """

    __slots__ = ("admitted_at", "charged", "cost", "logged", "pool", "repriced", "settled", "shared")

    def __init__(self, pool: str, cost: Cost, charged: dict[str, float], admitted_at: float) -> None:
        self.pool = pool
        self.cost = cost
        self.charged = charged  # Cost field name → units currently charged
        self.admitted_at = admitted_at
        self.settled = False
        self.shared: SharedEntry | None = None  # what a shared quota store took for it
        self.repriced: dict[str, float] = {}  # taken since, as the charge model learned (`reprice`)
        self.logged: dict[str, Entry] = {}  # its entries in the pool's window logs

    def __repr__(self) -> str:
        charged = ", ".join(f"{k}={v:g}" for k, v in self.charged.items())
        state = "settled" if self.settled else "open"
        return f"Reservation({self.pool!r}, {charged or 'nothing'}, at={self.admitted_at:.3f}, {state})"


Ending = Literal["answered", "refused", "unsent", "abandoned", "unknown"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt on a reservation ended, and what it taught: an answer (its usage, our count
    of its prompt, its rate-limit headers when read), a 429 (its headers, retry hint and the rate
    limit its body names), a request that never left (`UNSENT`: an unreachable provider, nothing
    charged), one abandoned after the provider admitted it (`ABANDONED`: a hedge's losing leg,
    kept as charged), or one sent whose cost is unknown (`SENT_UNKNOWN`: a 5xx, a timeout, a reset
    or a garbled answer — kept as charged, so a later price rise no longer touches it). Build the
    first two with `answered` and `refused`."""

    ending: Ending
    usage: Usage | None = None  # an answer's usage as the provider reported it
    count: int | None = None  # our own count of the request's prompt
    snapshot: RateLimitSnapshot | None = None  # its rate-limit headers, parsed (None: not read)
    hint: float | None = None  # a 429's retry hint, seconds
    error_type: str | None = None  # the rate limit a 429's body names (the provider's error type)

    @classmethod
    def answered(cls, usage: Usage, count: int, snapshot: RateLimitSnapshot | None = None) -> Outcome:
        """An answer: `snapshot` only when its headers were read (not on every answer)."""
        return cls("answered", usage=usage, count=count, snapshot=snapshot)

    @classmethod
    def refused(
        cls, count: int, snapshot: RateLimitSnapshot, hint: float | None, error_type: str | None
    ) -> Outcome:
        """A 429 with its parsed headers, retry hint and the error type its body names."""
        return cls("refused", count=count, snapshot=snapshot, hint=hint, error_type=error_type)


UNSENT = Outcome("unsent")
ABANDONED = Outcome("abandoned")
SENT_UNKNOWN = Outcome("unknown")


# What a pool counts, each a field of its `QuotaStats`
POOL_EVENTS = (
    "admitted",
    "refunded",
    "reconciled",
    "never_fit",
    "pauses",
    "calibrations",
    "open",
    "settled_twice",
)


@dataclass(frozen=True, slots=True)
class QuotaStats:
    """A pool's live state; per-dimension maps are keyed by Cost field name."""

    name: str
    limits_per_minute: Mapping[str, float]  # min(declared, limit reported by headers)
    effective_per_second: Mapping[str, float]  # × safety × AIMD factor
    levels: Mapping[str, float]
    capacities: Mapping[str, float]
    waiters: int
    paused_until: float | None
    aimd_factor: float
    cuts: int
    rate_limited: int
    admitted: int
    refunded: int
    reconciled: int
    never_fit: int
    pauses: int = 0
    calibrations: int = 0
    open: int = 0  # reservations admitted and not yet settled (in flight, or leaked)
    settled_twice: int = 0  # settles of an already settled reservation: no-ops, never on a normal path
    learned: bool = False  # no limit declared: those shown were learned from its headers

    def in_use(self) -> dict[str, float]:
        """Per dimension, the share of the bucket taken now (0 full, 1 empty), to three places."""
        return {
            dim: round(min(1.0, max(0.0, 1.0 - self.levels.get(dim, cap) / cap)), 3)
            for dim, cap in self.capacities.items()
            if cap > 0
        }
