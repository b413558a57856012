"""A pool nobody declared limits for (issue 38): it probes with a few requests, takes the limits
its first answer's headers report, and reads a 429 that names a rate as the rate's verdict."""

from __future__ import annotations

from batchgate.clock import FakeClock
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.quota.charge import bare_refusal
from batchgate.quota.limits import Outcome, QuotaLimits
from batchgate.quota.pool import QuotaPool
from batchgate.quota.probe import GAP, PROBE


def _pool() -> tuple[QuotaPool, FakeClock]:
    clock = FakeClock()
    return QuotaPool("proxy", QuotaLimits(), clock, learn=True), clock


async def test_a_pool_nobody_declared_limits_for_probes_then_paces_at_what_its_headers_report() -> None:
    pool, clock = _pool()
    first = [pool.try_acquire(Cost()) for _ in range(PROBE)]
    assert all(r is not None for r in first)
    assert pool.try_acquire(Cost()) is None  # no more at once before an attempt has ended
    clock.advance(GAP)
    assert pool.try_acquire(Cost()) is not None  # ... only one every GAP seconds
    res = first[0]
    assert res is not None
    pool.settle(res, Outcome.answered(Usage(5, 1), 5, RateLimitSnapshot(limit_requests=60.0)))
    stats = pool.statistics()
    assert stats.learned
    assert stats.limits_per_minute == {"requests": 60.0}
    assert pool.try_acquire(Cost()) is not None  # paced at 60 a minute from an empty bucket:
    assert pool.try_acquire(Cost()) is None  # one now ("pay after"), the next a second later
    clock.advance(1.0 / 0.99)
    assert pool.try_acquire(Cost()) is not None
    res = first[1]
    assert res is not None
    pool.settle(res, Outcome.answered(Usage(5, 1), 5, RateLimitSnapshot(limit_requests=120.0)))
    assert pool.statistics().limits_per_minute == {"requests": 120.0}  # followed up as well


def test_a_declared_pool_learns_no_limit_it_was_not_given() -> None:
    pool = QuotaPool("p", QuotaLimits(rpm=100), FakeClock(), learn=True)
    assert not pool.statistics().learned


def test_which_429s_are_a_servers_in_flight_cap() -> None:
    throttled = Outcome.refused(5, RateLimitSnapshot(), None, "throttling_error")
    named = Outcome.refused(5, RateLimitSnapshot(), None, "requests")
    hinted = Outcome.refused(5, RateLimitSnapshot(), 60.0, None)
    concurrency = Outcome.refused(5, RateLimitSnapshot(), 1.0, "concurrency_limit_exceeded")
    bare = Outcome.refused(5, RateLimitSnapshot(), None, "server_error")
    assert not bare_refusal(throttled, rates=False)  # LiteLLM's own: a rate, even with none known
    assert not bare_refusal(hinted, rates=False)
    assert not bare_refusal(named, rates=True)
    assert bare_refusal(named, rates=False)  # names a dimension, but no rate of ours to blame
    assert bare_refusal(concurrency, rates=True)  # says concurrency, whatever else it carries
    assert bare_refusal(bare, rates=True)
