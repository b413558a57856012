"""Pure decisions that stop a job: the budget (tokens and money) and the error rate over a window.

The engine asks before each dispatch (`BudgetGuard.admit`) and after each outcome
(`ErrorRateWindow.record`); neither does I/O or reads the clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from batchgate.config import Budget
from batchgate.jobs.progress.shapes import BudgetView


@dataclass(slots=True)
class BudgetGuard:
    """Refuses the next request when spent + committed-in-flight + its estimate would pass the budget."""

    budget: Budget
    spent_cost: float = 0.0
    spent_tokens: int = 0
    reserved_cost: float = 0.0
    reserved_tokens: int = 0

    @property
    def limited(self) -> bool:
        return self.budget.max_cost_usd is not None or self.budget.max_tokens is not None

    def view(self) -> BudgetView | None:
        """What is spent against each limit (for the displays); None without a budget."""
        if not self.limited:
            return None
        return {
            "spent_usd": round(self.spent_cost, 6),
            "max_usd": self.budget.max_cost_usd,
            "spent_tokens": self.spent_tokens,
            "max_tokens": self.budget.max_tokens,
        }

    def admit(self, est_cost: float, est_tokens: int) -> bool:
        b = self.budget
        if b.max_cost_usd is not None and self.spent_cost + self.reserved_cost + est_cost > b.max_cost_usd:
            return False
        return not (
            b.max_tokens is not None and self.spent_tokens + self.reserved_tokens + est_tokens > b.max_tokens
        )

    def reserve(self, est_cost: float, est_tokens: int) -> None:
        self.reserved_cost += est_cost
        self.reserved_tokens += est_tokens

    def settle(self, est_cost: float, est_tokens: int, real_cost: float, real_tokens: int) -> None:
        self.reserved_cost = max(0.0, self.reserved_cost - est_cost)
        self.reserved_tokens = max(0, self.reserved_tokens - est_tokens)
        self.spent_cost += real_cost
        self.spent_tokens += real_tokens

    def reason(self) -> str:
        b = self.budget
        parts = []
        if b.max_cost_usd is not None:
            parts.append(f"${self.spent_cost:.4f} of ${b.max_cost_usd:.4f} spent")
        if b.max_tokens is not None:
            parts.append(f"{self.spent_tokens} of {b.max_tokens} tokens spent")
        return "budget reached: " + ", ".join(parts) + "; the next request would pass it"


class ErrorRateWindow:
    """Tracks the last `size` outcomes; trips once the window is full and failures/size > threshold."""

    def __init__(self, threshold: float | None, size: int) -> None:
        self.threshold = threshold
        self.size = max(1, size)
        self._window: deque[bool] = deque(maxlen=self.size)
        self._failures = 0

    def record(self, failed: bool) -> bool:
        """Add one outcome; True when the job must stop."""
        if len(self._window) == self.size and self._window[0]:
            self._failures -= 1
        self._window.append(failed)
        if failed:
            self._failures += 1
        return self.tripped

    @property
    def rate(self) -> float:
        return self._failures / len(self._window) if self._window else 0.0

    @property
    def tripped(self) -> bool:
        return self.threshold is not None and len(self._window) >= self.size and self.rate > self.threshold

    def reason(self) -> str:
        return (
            f"error rate {self.rate:.0%} over the last {len(self._window)} items passed the "
            f"threshold of {self.threshold:.0%}"
        )
