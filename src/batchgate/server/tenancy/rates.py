"""How often one key (or one address) may do something: a bucket of `per_minute` turns a name,
refilled at `per_minute / 60` a second — pure, every time passed in. `take(name, now)` spends a
turn, or says how many seconds until the next one (a 429's `Retry-After`). Only names whose bucket
is not full are kept, so a flood of distinct names (addresses) costs no more than `MAX_NAMES`.

Used for the batches a key creates a minute (`serve --max-batches-per-minute`; one tenant's 100k
line batches, repeatable at will, once held the others' requests for seconds each: issue 40) and
the failed authentications an address makes a minute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_NAMES = 10_000


class Rates:
    """Per-name buckets (see the module docstring)."""

    def __init__(self, per_minute: int) -> None:
        if per_minute < 1:
            raise ValueError(f"per_minute must be at least 1, got {per_minute}")
        self.per_minute = per_minute
        self._rate = per_minute / 60.0
        self._spent: dict[str, tuple[float, float]] = {}  # name -> (turns spent, when)

    def _level(self, name: str, now: float) -> float:
        """The turns spent and not yet refilled."""
        spent, at = self._spent.get(name, (0.0, now))
        return max(0.0, spent - (now - at) * self._rate)

    def wait(self, name: str, now: float) -> float | None:
        """None when `name` has a turn, else the seconds until it has one (spending nothing)."""
        spent = self._level(name, now)
        if spent + 1.0 > self.per_minute:
            return max(0.001, (spent + 1.0 - self.per_minute) / self._rate)
        return None

    def take(self, name: str, now: float) -> float | None:
        """Spend one of `name`'s turns (None), or the seconds until it has one (nothing spent)."""
        wait = self.wait(name, now)
        if wait is not None:
            return wait
        if len(self._spent) >= MAX_NAMES and name not in self._spent:
            self._forget(now)
        self._spent[name] = (self._level(name, now) + 1.0, now)
        return None

    def _forget(self, now: float) -> None:
        for name in [n for n in self._spent if self._level(n, now) <= 0.0]:
            del self._spent[name]
        if len(self._spent) >= MAX_NAMES:  # all busy: the oldest go (a flood, not tenants)
            for name in sorted(self._spent, key=lambda n: self._spent[n][1])[: MAX_NAMES // 10]:
                del self._spent[name]


def retry_after(seconds: float) -> str:
    """A `Retry-After` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


@dataclass(frozen=True, slots=True)
class TenantLimits:
    """`serve --max-batches-per-minute` (per key: batches, message batches and jobs created), the
    failed authentications one address may make a minute before its requests get a 429, and
    `--max-jobs-per-key` (the run places one key may hold); the files, their bytes and the
    batches not ended one key may have (`--max-files-per-key`, `--max-stored-bytes-per-key`,
    `--max-in-flight-per-key`)."""

    batches_per_minute: int = 120
    auth_failures_per_minute: int = 100
    jobs_per_key: int | None = None  # run places one key may hold (None: half of --max-jobs)
    files_per_key: int = 10_000  # files one key may store (its uploads and its batches' outputs)
    stored_bytes_per_key: int = 100 * 1024**3  # their bytes (OpenAI's 100 GB of an organization)
    in_flight_per_key: int = 1_000  # batches, message batches and jobs not ended


DEFAULT_TENANTS = TenantLimits()
