"""How one attempt on a reservation ended, and what it taught: the one thing an attempt hands the
quota pool (`QuotaPool.settle`).

Four endings: an answer (its usage, our count of its prompt, its rate-limit headers when read), a
429 (its headers, retry hint and the rate limit its body names), a request that never left (an
unreachable provider: nothing was charged), and one abandoned after the provider admitted it (a
hedge's losing leg: kept as charged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from batchgate.models import RateLimitSnapshot, Usage

Ending = Literal["answered", "refused", "unsent", "abandoned"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """See the module docstring; build one with `answered` or `refused`, or use `UNSENT`/`ABANDONED`."""

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
