"""A provider that enforces less than it declares (the quota matrix's "hidden limit" cell): its
429s come while its own rate-limit headers show the bucket full. Such a 429 refutes the limit they
report, so it is a verdict on the rate at once — not noise among many answers, which would let
the requests already admitted at that rate come back refused too — and not a charge margin (the
headers count what it charged). A 429 without headers among as many answers is still noise."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.policy.aimd import AimdSettings
from batchgate.quota.limits import Outcome, Reservation
from batchgate.quota.pool import QuotaLimits, QuotaPool

TPM = 60_000  # declared: 1,000 tokens a second, 100 requests of 10
FULL = RateLimitSnapshot(limit_tokens=TPM, remaining_tokens=TPM - 10)  # "plenty left"
COST = Cost(tokens=10, input_tokens=8, output_tokens=2)


def _admit(pool: QuotaPool, clock: FakeClock) -> Reservation:
    """The next request, admitted as soon as the pace lets it (the clock moved in 1 ms steps)."""
    for _ in range(1000):
        if (res := pool.try_acquire(COST, count=8)) is not None:
            return res
        clock.advance(0.001)
    raise AssertionError("never admitted")


def _busy_pool(clock: FakeClock) -> QuotaPool:
    """A pool that has had two seconds of clean answers at its declared rate, every 8th with
    headers showing the provider's bucket full (as the runtime builds it: 20 prior answers)."""
    pool = QuotaPool("alpha", QuotaLimits(tpm=TPM, safety=1.0), clock, AimdSettings(prior_answers=20.0))
    for i in range(200):
        res = _admit(pool, clock)
        snapshot = FULL if i % 8 == 0 else None
        pool.settle(res, Outcome.answered(Usage(prompt_tokens=8, completion_tokens=2), 8, snapshot))
    assert pool.learning.aimd.factor == 1.0
    return pool


def test_a_429_whose_headers_show_room_cuts_at_once_and_is_no_charge() -> None:
    clock = FakeClock()
    pool = _busy_pool(clock)
    before = pool.learning.aimd.factor
    early = _admit(pool, clock)  # admitted at the refuted rate, still in flight
    refused = _admit(pool, clock)
    clock.advance(0.01)
    assert not pool.settle(refused, Outcome.refused(8, FULL, 0.005, "tokens"))
    aimd = pool.learning.aimd
    assert aimd.cuts == 1  # the first one: the limit its headers report is refuted
    assert aimd.factor == pytest.approx(before * aimd.settings.decrease)
    assert not aimd.room_trusted  # and its room no evidence from then on
    assert pool.learning.charges.margin("tokens") == 1.0  # not a charge we under-reserve
    clock.advance(0.01)
    pool.settle(early, Outcome.refused(8, FULL, 0.005, "tokens"))
    assert aimd.cuts == 1  # admitted before the cut: damped by the cooldown, not cut twice
    clock.advance(0.05)
    later = _admit(pool, clock)
    clock.advance(0.01)
    pool.settle(later, Outcome.refused(8, FULL, 0.005, "tokens"))
    assert aimd.cuts == 2  # sent at the cut rate and refused with room shown: a verdict again


def test_a_429_without_headers_among_many_answers_is_still_noise() -> None:
    clock = FakeClock()
    pool = _busy_pool(clock)
    res = _admit(pool, clock)
    clock.advance(0.01)
    assert not pool.settle(res, Outcome.refused(8, RateLimitSnapshot(), 0.005, "tokens"))
    stats = pool.statistics()
    assert (stats.rate_limited, stats.cuts, stats.aimd_factor) == (1, 0, 1.0)
