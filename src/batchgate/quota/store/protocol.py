"""The quota store seam: one atomic operation over a provider key's shared buckets and window logs.

`apply(quota, paces, take, settle)` does, atomically and by the store's own clock:
1. refill every dimension's bucket at its stored rate since its last update, then adopt the
   caller's pace for each dimension: its capacity and top always, its rate and window allowance
   when the rate is not above the stored one or the stored one is older than its `hold` — so a
   process that cut its rate (a 429, a lower limit in the headers) slows every process, and the
   pace recovers only once nobody has asked for the lower one for `hold` seconds; entries of the
   dimension's window log whose time is up leave it;
2. apply the caller's pending settlements: restamps (an entry counts from now + its hold, or is
   logged again if it already left), per-entry deltas to the window log (never below zero; an
   entry no longer logged is left alone), then the buckets: a positive delta charges a
   dimension, a negative one gives back (never past capacity); `drain` empties every bucket (a
   429 says the provider is empty); `pause` admits nobody until the store's now + that many
   seconds (never shortens);
3. with `take`, admit it — every dimension's bucket at least min(amount, capacity) full, every
   dimension with a window allowance holding at most the allowance less min(amount, allowance)
   in its log, and no pause — by taking every amount, logging it under the take's key for its
   hold, and answering 0.0; or take nothing and answer the seconds until it would be admissible
   (inf: never, at a zero rate).

The buckets follow the providers' admission rule (`batchgate.quota.bucket`), so a shared bucket
paced at a provider's limit keeps every process together inside it; the window logs do across
processes what `batchgate.quota.window` does in one, so the shared pace needs no headroom. A
quota is named by `quota_id`: the provider's base URL, a keyed hash of its API key (never the
key itself) and the model scope it limits.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

# The HMAC key: API keys are long random strings, so a fixed key is enough to make the quota's
# name useless for recovering or testing a key, while every machine names a key the same way.
_ID_KEY = b"batchgate quota id v1"


PACE_HOLD = 2.0  # seconds a lower shared rate stands against higher ones (see `apply`, step 1)


@dataclass(frozen=True, slots=True)
class Pace:
    """One dimension's shared pace: units per second, burst capacity, the level's ceiling
    (capacity + timer slack, see `TokenBucket`), how long this rate stands against higher ones,
    and what the window log may hold at once (inf: no log, the enforcement is known)."""

    rate: float
    capacity: float
    top: float
    hold: float = PACE_HOLD
    window: float = math.inf


@dataclass(frozen=True, slots=True)
class Take:
    """An admission to ask for: the amounts per dimension, the key naming its window-log entries
    (unique per admission: settlements refer to it) and how long they count (seconds)."""

    key: str
    amounts: Mapping[str, float]
    hold: float = 1.0


@dataclass(frozen=True, slots=True)
class Restamp:
    """A logged admission left only now: it counts for `hold` from the store's now; if its entry
    already left the log, it is logged again at `amounts`."""

    hold: float
    amounts: Mapping[str, float]


@dataclass(slots=True)
class Settle:
    """Settlements waiting to reach the store: per-dimension bucket deltas (+ charge, − give
    back), per-entry window-log deltas (key → dimension → delta), restamps (key → `Restamp`), a
    pause in seconds from the store's now, and whether to drain every bucket."""

    deltas: dict[str, float] = field(default_factory=dict)
    pause: float = 0.0
    drain: bool = False
    entries: dict[str, dict[str, float]] = field(default_factory=dict)
    restamps: dict[str, Restamp] = field(default_factory=dict)

    def empty(self) -> bool:
        return (
            not self.deltas
            and not self.entries
            and not self.restamps
            and self.pause <= 0.0
            and not self.drain
        )

    def add_entry(self, key: str, name: str, delta: float) -> None:
        """`key`'s entry in dimension `name`'s window log is charged `delta` more."""
        entry = self.entries.setdefault(key, {})
        entry[name] = entry.get(name, 0.0) + delta

    def merge(self, other: Settle) -> None:
        """Fold `other` (older, not delivered) into this one."""
        for name, delta in other.deltas.items():
            self.deltas[name] = self.deltas.get(name, 0.0) + delta
        for key, entry in other.entries.items():
            for name, delta in entry.items():
                self.add_entry(key, name, delta)
        for key, restamp in other.restamps.items():
            self.restamps.setdefault(key, restamp)  # ours is the later one
        self.pause = max(self.pause, other.pause)
        self.drain = self.drain or other.drain


class QuotaStore(Protocol):
    """Shared buckets of provider keys; see the module docstring."""

    async def apply(self, quota: str, paces: Mapping[str, Pace], take: Take | None, settle: Settle) -> float:
        """Refill, adopt `paces`, apply `settle`, then admit `take` (0.0) or say how long to wait."""
        ...

    def describe(self) -> str:
        """The store as messages show it (never a password)."""
        ...

    async def close(self) -> None: ...


def quota_id(base_url: str, api_key: str | None, models: Iterable[str] = ()) -> str:
    """The shared name of a provider key's quota for a model scope: its base URL, an HMAC of the
    key and the models it is for. Providers limit each model apart (shared/PROTOCOLS.md, "Limits
    are per model"), so one key has as many quotas as model scopes; no models: the whole key."""
    secret = (api_key or "").encode()
    digest = hmac.new(_ID_KEY, secret, hashlib.sha256).hexdigest()[:32]
    scope = ",".join(sorted(set(models)))
    return f"{base_url.rstrip('/')}#{digest}" + (f"@{scope}" if scope else "")
