"""The quota store seam: one atomic operation over a provider key's shared buckets.

`apply(quota, paces, take, settle)` does, atomically and by the store's own clock:
1. refill every dimension's bucket at its stored rate since its last update, then adopt the
   caller's pace for each dimension: its capacity and top always, its rate when it is not above
   the stored one or the stored one is older than its `hold` — so a process that cut its rate
   (a 429, a lower limit in the headers) slows every process, and the pace recovers only once
   nobody has asked for the lower one for `hold` seconds;
2. apply the caller's pending settlements: a positive delta charges a dimension, a negative one
   gives back (never past capacity); `drain` empties every bucket (a 429 says the provider is
   empty); `pause` admits nobody until the store's now + that many seconds (never shortens);
3. with `take`, admit it — every dimension at least min(amount, capacity) full and no pause —
   by taking every amount and answering 0.0, or take nothing and answer the seconds until it
   would be admissible (inf: never, at a zero rate).

The buckets follow the providers' admission rule (`batchgate.quota.bucket`), so a shared bucket
paced at a provider's limit keeps every process together inside it. A quota is named by
`quota_id`: the provider's base URL and a keyed hash of its API key, never the key itself.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

# The HMAC key: API keys are long random strings, so a fixed key is enough to make the quota's
# name useless for recovering or testing a key, while every machine names a key the same way.
_ID_KEY = b"batchgate quota id v1"


PACE_HOLD = 2.0  # seconds a lower shared rate stands against higher ones (see `apply`, step 1)


@dataclass(frozen=True, slots=True)
class Pace:
    """One dimension's shared pace: units per second, burst capacity, the level's ceiling
    (capacity + timer slack, see `TokenBucket`) and how long this rate stands against higher
    ones."""

    rate: float
    capacity: float
    top: float
    hold: float = PACE_HOLD


@dataclass(slots=True)
class Settle:
    """Settlements waiting to reach the store: per-dimension deltas (+ charge, − give back), a
    pause in seconds from the store's now, and whether to drain every bucket."""

    deltas: dict[str, float] = field(default_factory=dict)
    pause: float = 0.0
    drain: bool = False

    def empty(self) -> bool:
        return not self.deltas and self.pause <= 0.0 and not self.drain

    def merge(self, other: Settle) -> None:
        """Fold `other` (older, not delivered) into this one."""
        for name, delta in other.deltas.items():
            self.deltas[name] = self.deltas.get(name, 0.0) + delta
        self.pause = max(self.pause, other.pause)
        self.drain = self.drain or other.drain


class QuotaStore(Protocol):
    """Shared buckets of provider keys; see the module docstring."""

    async def apply(
        self, quota: str, paces: Mapping[str, Pace], take: Mapping[str, float] | None, settle: Settle
    ) -> float:
        """Refill, adopt `paces`, apply `settle`, then admit `take` (0.0) or say how long to wait."""
        ...

    def describe(self) -> str:
        """The store as messages show it (never a password)."""
        ...

    async def close(self) -> None: ...


def quota_id(base_url: str, api_key: str | None) -> str:
    """The shared name of a provider key's quota: its base URL and an HMAC of the key."""
    secret = (api_key or "").encode()
    digest = hmac.new(_ID_KEY, secret, hashlib.sha256).hexdigest()[:32]
    return f"{base_url.rstrip('/')}#{digest}"


def without_password(url: str) -> str:
    """`url` with any password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + host))
