"""How often to poll a provider's batch: `initial × factor^n` seconds apart, at most `maximum`, and
how many transient errors in a row are tolerated while polling. A pure value object; the Batch API
clients apply it (`providers.batch.common.poll_until_done`) and the config holds it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PollPolicy:
    """Poll intervals: `initial × factor^n`, capped at `maximum`; `max_failures` consecutive
    transient errors (429, 5xx, transport) are tolerated while polling before the last is raised."""

    initial: float = 5.0
    factor: float = 1.5
    maximum: float = 60.0
    max_failures: int = 5

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial:
            raise ValueError("poll intervals need 0 < initial <= maximum")
        if self.factor < 1:
            raise ValueError("the poll interval factor must be >= 1 (intervals never shrink)")
        if self.max_failures < 0:
            raise ValueError("max_failures must be >= 0")

    def interval(self, attempt: int) -> float:
        """The wait after the `attempt`-th (0-based) poll that found the batch still running."""
        if attempt > 200:  # beyond any cap; avoids float overflow
            return self.maximum
        return min(self.maximum, self.initial * self.factor**attempt)
