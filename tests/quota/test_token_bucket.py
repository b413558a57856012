"""TokenBucket maths: refill, the providers' admission rule, debt, give-back, rate changes."""

from __future__ import annotations

import math

import pytest

from batchgate.quota.bucket import TokenBucket


def test_starts_full_and_refills_at_rate() -> None:
    b = TokenBucket(rate=10.0, capacity=5.0, now=0.0)
    assert b.level(0.0) == 5.0
    b.take(5.0, 0.0)
    assert b.level(0.0) == 0.0
    assert b.level(0.2) == pytest.approx(2.0)
    assert b.level(100.0) == 5.0  # capped


def test_admission_rule_min_of_amount_and_capacity() -> None:
    b = TokenBucket(rate=1.0, capacity=4.0, now=0.0)
    b.take(4.0, 0.0)
    assert not b.can_take(2.0, 1.0)
    assert b.can_take(2.0, 2.0)
    # bigger than the bucket: admitted only when full, then goes into debt
    assert not b.can_take(10.0, 3.0)
    assert b.time_until(10.0, 3.0) == pytest.approx(1.0)
    assert b.can_take(10.0, 4.0)
    b.take(10.0, 4.0)
    assert b.level(4.0) == pytest.approx(-6.0)
    assert b.time_until(1.0, 4.0) == pytest.approx(7.0)


def test_time_until_zero_and_infinite() -> None:
    b = TokenBucket(rate=0.0, capacity=3.0, now=0.0)
    assert b.time_until(3.0, 0.0) == 0.0
    b.take(1.0, 0.0)
    assert b.time_until(3.0, 1.0) == math.inf


def test_time_until_is_exact_enough_for_timers() -> None:
    b = TokenBucket(rate=7.0, capacity=3.0, now=1000.0)
    b.take(3.0 + 1 / 3, 1000.0)
    wait = b.time_until(2.9, 1000.0)
    assert not b.can_take(2.9, 1000.0 + wait * 0.999)
    assert b.can_take(2.9, 1000.0 + wait)
    assert b.time_until(2.9, 1000.0 + wait) == 0.0


def test_give_back_capped_at_capacity() -> None:
    b = TokenBucket(rate=1.0, capacity=5.0, now=0.0)
    b.take(2.0, 0.0)
    b.give_back(10.0, 0.0)
    assert b.level(0.0) == 5.0


def test_set_rate_keeps_level_and_caps_capacity() -> None:
    b = TokenBucket(rate=2.0, capacity=10.0, now=0.0)
    b.take(10.0, 0.0)
    b.set_rate(4.0, 1.0)  # 1 s at the old rate first
    assert b.level(1.0) == pytest.approx(2.0)
    assert b.level(2.0) == pytest.approx(6.0)
    b.set_rate(4.0, 2.0, capacity=3.0)
    assert b.level(2.0) == 3.0
    assert b.capacity == 3.0
    assert b.rate == 4.0


def test_set_level() -> None:
    b = TokenBucket(rate=1.0, capacity=5.0, now=0.0)
    b.set_level(-2.0, 0.0)
    assert b.level(1.0) == pytest.approx(-1.0)
    b.set_level(99.0, 1.0)
    assert b.level(1.0) == 5.0


def test_time_does_not_run_backwards() -> None:
    b = TokenBucket(rate=1.0, capacity=5.0, now=10.0)
    b.take(5.0, 10.0)
    assert b.level(9.0) == 0.0
    assert b.level(11.0) == pytest.approx(1.0)


def test_validation_and_repr() -> None:
    with pytest.raises(ValueError, match="rate"):
        TokenBucket(rate=-1.0, capacity=1.0, now=0.0)
    with pytest.raises(ValueError, match="capacity"):
        TokenBucket(rate=1.0, capacity=math.inf, now=0.0)
    assert "level=5/5" in repr(TokenBucket(rate=1.0, capacity=5.0, now=0.0))
