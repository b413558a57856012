"""`QuotaPool.settle(reservation, Outcome)`: the one call that ends a reservation, for each ending."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.quota.limits import ABANDONED, UNSENT, Outcome
from batchgate.quota.pool import QuotaLimits, QuotaPool

TPM = QuotaLimits(tpm=6000, safety=1.0, burst_seconds=1.0)  # 100 tokens/s, a bucket of 100


def make() -> tuple[QuotaPool, FakeClock]:
    clock = FakeClock()
    return QuotaPool("acme", TPM, clock), clock


def level(pool: QuotaPool) -> float:
    return pool.statistics().levels["tokens"]


async def test_an_answer_is_reconciled_to_its_usage() -> None:
    pool, _ = make()
    res = await pool.acquire(Cost(tokens=90, input_tokens=80, output_tokens=10), count=80)
    assert level(pool) == pytest.approx(10)
    # the provider charged 40 prompt tokens where 80 were reserved; output kept at max_tokens
    refused = pool.settle(res, Outcome.answered(Usage(prompt_tokens=40, completion_tokens=5), 80))
    assert not refused
    assert res.settled
    assert res.charged["tokens"] < 90  # given back part of the over-estimate
    assert pool.statistics().reconciled == 1


async def test_a_request_never_sent_is_refunded_and_one_abandoned_kept() -> None:
    pool, _ = make()
    first = await pool.acquire(Cost(tokens=40))
    second = await pool.acquire(Cost(tokens=40))
    assert not pool.settle(first, UNSENT)
    assert level(pool) == pytest.approx(60)  # the refunded 40 is back
    assert not pool.settle(second, ABANDONED)
    assert level(pool) == pytest.approx(60)  # the abandoned one stays charged
    stats = pool.statistics()
    assert (stats.refunded, stats.reconciled) == (1, 1)
    assert first.settled
    assert second.settled


async def test_a_bare_429_is_the_door_and_a_named_one_the_rate() -> None:
    pool, _ = make()
    bare = await pool.acquire(Cost(tokens=10))
    assert pool.settle(bare, Outcome.refused(10, RateLimitSnapshot(), None, None))  # in-flight cap
    assert pool.statistics().cuts == 0
    named = await pool.acquire(Cost(tokens=10))
    assert not pool.settle(named, Outcome.refused(10, RateLimitSnapshot(), 2.0, "tokens"))
    stats = pool.statistics()
    assert stats.rate_limited == 1
    assert stats.paused_until is not None  # its retry hint pauses the pool
    assert named.settled
    assert stats.refunded == 2
