"""How deep a settling provider's output bucket is, learned from headers that count the output
held in flight (`batchgate.quota.output_hold`; Anthropic's OTPM): pure arithmetic on a pool's
output dimension, no clock but a FakeClock."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.quota.held import Held
from batchgate.quota.output_hold import FIRST_ANSWERS, MARGIN, START, OutputHold
from batchgate.quota.pool import QuotaLimits, QuotaPool

OTPM = 60_000  # 1,000 a second


def _pool() -> tuple[QuotaPool, FakeClock]:
    clock = FakeClock()
    pool = QuotaPool("claude", QuotaLimits(otpm=OTPM, safety=1.0), clock)
    pool.settles_output(True)
    return pool, clock


def _report(remaining: float) -> RateLimitSnapshot:
    return RateLimitSnapshot(limit_output_tokens=OTPM, remaining_output_tokens=remaining)


def test_a_report_showing_room_beside_our_holds_deepens_the_bucket() -> None:
    pool, clock = _pool()
    out = pool._dims["output_tokens"]
    out.bucket.take(600.0, clock.now())  # two requests of 300 in flight, our 1 s bucket lacks 600
    out.avg_cost = 0.0
    hold = OutputHold()
    # the provider lacks 600 of its bucket too: 1% of a minute's bucket, so 60 s deep (× MARGIN)
    assert hold.grow(_report(OTPM - 600), out, clock.now(), answers=FIRST_ANSWERS)
    assert hold.depth == pytest.approx(MARGIN * 600 / (0.01 + 500 / OTPM) / 1000, rel=1e-6)
    # the same lack at an 8 s bucket: 600 of 8,000
    shallow = OutputHold()
    assert shallow.grow(_report(OTPM * (1 - 600 / 8000)), out, clock.now(), answers=FIRST_ANSWERS)
    assert START < shallow.depth < 8.0


def test_no_depth_is_learned_from_the_first_answers_or_an_idle_bucket() -> None:
    pool, clock = _pool()
    out = pool._dims["output_tokens"]
    hold = OutputHold()
    assert not hold.grow(_report(OTPM), out, clock.now(), answers=FIRST_ANSWERS)  # we lack nothing
    out.bucket.take(600.0, clock.now())
    assert not hold.grow(_report(OTPM - 600), out, clock.now(), answers=FIRST_ANSWERS - 1)
    assert hold.depth == START


def test_a_429_on_output_takes_the_depth_back_to_one_second() -> None:
    pool, _ = _pool()
    hold = OutputHold()
    hold.depth = 30.0
    assert hold.shrink(pool._dims["output_tokens"])
    assert hold.depth == START
    assert not hold.shrink(pool._dims["output_tokens"])  # already there: the 429 counts elsewhere


def test_holds_explain_a_low_remaining_once_the_bucket_is_known_deeper() -> None:
    pool, clock = _pool()
    out = pool._dims["output_tokens"]
    hold = OutputHold()
    low = _report(0.05 * OTPM)
    assert hold.without_holds(low, out, clock.now()) is low  # one second held explains nothing
    hold.depth = 8.0
    pool.learning.output_hold = hold
    pool.settles_output(True)
    out.bucket.take(out.bucket.capacity * 0.9, clock.now())  # 90% of our 8 s held in flight
    seen = hold.without_holds(low, out, clock.now())
    assert seen.remaining_output_tokens == pytest.approx(0.95 * OTPM)


def test_a_pool_lets_more_output_be_held_once_a_report_shows_a_deeper_bucket() -> None:
    pool, clock = _pool()
    before = pool.statistics().capacities["output_tokens"]
    for _ in range(FIRST_ANSWERS):  # answers first: the depth is learned after a few
        res = pool.try_acquire(Cost(output_tokens=300))
        assert res is not None
        pool.reconcile(res, Usage(completion_tokens=30))
        pool.observe_usage(10, 10)
        clock.advance(1.0)
    for _ in range(3):  # three in flight: our one-second bucket lacks 900
        res = pool.try_acquire(Cost(output_tokens=300))
        assert res is not None
        Held(pool, res).on_wire()  # the provider holds it from now
    stats = pool.statistics()
    lacks = stats.capacities["output_tokens"] - stats.levels["output_tokens"]
    pool.calibrate(_report(OTPM - lacks))  # the provider lacks what we do: its bucket is a minute
    assert pool.learning.output_hold.depth > 10 * START
    assert pool.statistics().capacities["output_tokens"] > 10 * before
    assert pool.try_acquire(Cost(output_tokens=300)) is not None  # a fourth may now be held


def test_output_admitted_but_not_yet_on_the_wire_is_not_the_providers() -> None:
    pool, clock = _pool()
    for _ in range(FIRST_ANSWERS):
        res = pool.try_acquire(Cost(output_tokens=300))
        assert res is not None
        pool.reconcile(res, Usage(completion_tokens=30))
        pool.observe_usage(10, 10)
        clock.advance(1.0)
    for _ in range(3):  # admitted here, waiting (a shared store's turn): the provider lacks nothing
        assert pool.try_acquire(Cost(output_tokens=300)) is not None
    pool.calibrate(_report(OTPM))
    assert pool.learning.output_hold.depth == START
