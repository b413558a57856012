"""BudgetGuard and ErrorRateWindow: pure decisions, asserted without I/O or time."""

from __future__ import annotations

import pytest

from batchgate.config import Budget
from batchgate.jobs.guards import BudgetGuard, ErrorRateWindow


def test_unlimited_budget_admits_anything() -> None:
    guard = BudgetGuard(Budget())
    assert not guard.limited
    assert guard.admit(1e9, 10**12)


def test_budget_counts_spent_and_reserved_money() -> None:
    guard = BudgetGuard(Budget(max_cost_usd=1.0))
    assert guard.admit(0.6, 0)
    guard.reserve(0.6, 0)
    assert guard.admit(0.4, 0)  # exactly reaching the budget is allowed
    assert not guard.admit(0.41, 0)  # in flight counts before it is spent
    guard.settle(0.6, 0, 0.1, 0)  # the call cost less than its worst case: room comes back
    assert guard.reserved_cost == pytest.approx(0.0)
    assert guard.spent_cost == pytest.approx(0.1)
    assert guard.admit(0.9, 0)
    assert not guard.admit(0.91, 0)


def test_budget_in_tokens_alone_and_with_money() -> None:
    guard = BudgetGuard(Budget(max_tokens=100, max_cost_usd=10.0))
    guard.reserve(0.0, 60)
    assert not guard.admit(0.0, 41)
    guard.settle(0.0, 60, 0.0, 60)
    assert guard.spent_tokens == 60
    assert guard.reserved_tokens == 0
    assert guard.admit(0.0, 40)
    assert not guard.admit(10.5, 1)  # money alone refuses too
    reason = guard.reason()
    assert "60 of 100 tokens" in reason
    assert "$0.0000 of $10.0000" in reason


def test_settle_never_leaves_negative_reservations() -> None:
    guard = BudgetGuard(Budget(max_cost_usd=1.0))
    guard.settle(0.5, 5, 0.2, 2)
    assert guard.reserved_cost == 0.0
    assert guard.reserved_tokens == 0
    assert guard.spent_cost == pytest.approx(0.2)
    assert guard.spent_tokens == 2


def test_error_window_trips_only_with_a_full_window_over_the_threshold() -> None:
    window = ErrorRateWindow(0.5, 4)
    assert not window.record(True)
    assert not window.record(True)
    assert not window.record(True)  # 3 of 3 failed, but the window is not full yet
    assert window.record(False)  # 3 of 4 = 75 % > 50 %
    assert "75%" in window.reason()
    assert "50%" in window.reason()


def test_error_window_slides() -> None:
    window = ErrorRateWindow(0.5, 4)
    for failed in (True, True, False, False):
        window.record(failed)
    assert window.rate == 0.5
    assert not window.tripped
    window.record(False)  # the oldest failure slides out
    assert window.rate == 0.25
    window.record(True)
    window.record(True)
    assert window.rate == 0.5
    assert not window.tripped
    assert window.record(True)  # F F T T T... last four: F T T T
    assert window.rate == 0.75


def test_error_window_without_threshold_never_trips() -> None:
    window = ErrorRateWindow(None, 2)
    assert not any(window.record(True) for _ in range(10))
    assert window.rate == 1.0
