"""`tenancy.rates.Rates`: turns per name a minute, pure (no sleeping: the time is passed in)."""

from __future__ import annotations

import pytest

from batchgate.server.tenancy.rates import MAX_NAMES, Rates, retry_after


def test_a_name_gets_its_turns_then_waits_for_the_refill() -> None:
    rates = Rates(per_minute=3)
    assert [rates.take("a", 0.0) for _ in range(3)] == [None, None, None]
    wait = rates.take("a", 0.0)
    assert wait == pytest.approx(20.0)  # one turn refills in 60 / 3 s
    assert retry_after(wait or 0.0) == "20"
    assert rates.take("b", 0.0) is None  # another name has its own
    assert rates.take("a", 20.0) is None
    assert rates.wait("a", 20.0) == pytest.approx(20.0)


def test_a_flood_of_names_keeps_the_table_bounded() -> None:
    rates = Rates(per_minute=1)
    for i in range(MAX_NAMES * 2):
        rates.take(f"addr-{i}", float(i) / 1000.0)
    assert len(rates._spent) <= MAX_NAMES
