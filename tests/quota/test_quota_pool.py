"""QuotaPool with a FakeClock: FIFO, event-driven wakeups, cancellation, settling and adaptation."""

from __future__ import annotations

import asyncio

import pytest

from batchgate.clock import FakeClock
from batchgate.errors import NeverFitsError
from batchgate.models import Cost, RateLimitSnapshot, Usage
from batchgate.policy.aimd import AimdSettings
from batchgate.quota.pool import QuotaLimits, QuotaPool, Reservation

# tpm 6000 with safety 1 and a 1 s burst: 100 tokens/s, bucket of 100 tokens.
TPM = QuotaLimits(tpm=6000, safety=1.0, burst_seconds=1.0)


async def steps(n: int = 3) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def tokens(n: int, prompt: int = 0) -> Cost:
    return Cost(tokens=n, input_tokens=prompt)


def make(limits: QuotaLimits = TPM, aimd: AimdSettings | None = None) -> tuple[QuotaPool, FakeClock]:
    clock = FakeClock()
    return QuotaPool("acme", limits, clock, aimd), clock


async def test_unlimited_pool_admits_at_once() -> None:
    pool, clock = make(QuotaLimits())
    for _ in range(1000):
        res = await pool.acquire(Cost(tokens=10**9))
        assert res.charged == {}
    assert pool.try_acquire(Cost()) is not None
    assert pool.wait_estimate(Cost(tokens=5)) == 0.0
    assert pool.headroom() == 1.0
    assert clock.pending_timers() == 0


async def test_waiter_resolves_exactly_when_due_with_one_timer() -> None:
    pool, clock = make()
    start = clock.now()
    first = await pool.acquire(tokens(100))
    assert first.admitted_at == start
    task = asyncio.create_task(pool.acquire(tokens(50)))
    await steps()
    assert not task.done()
    assert clock.pending_timers() == 1
    assert pool.wait_estimate(tokens(10)) == pytest.approx(0.6)  # 50 queued ahead + 10
    clock.advance(0.375)
    await steps()
    assert not task.done()
    clock.advance(0.125)
    await steps()
    assert task.done()
    assert task.result().admitted_at == pytest.approx(start + 0.5)
    assert clock.pending_timers() == 0


async def test_fifo_big_head_is_not_starved_by_small_requests() -> None:
    pool, clock = make()
    await pool.acquire(tokens(100))
    order: list[str] = []

    async def want(name: str, n: int) -> None:
        await pool.acquire(tokens(n))
        order.append(name)

    big = asyncio.create_task(want("big", 100))
    await steps()
    smalls = [asyncio.create_task(want(f"small{i}", 10)) for i in range(3)]
    await steps()
    assert pool.try_acquire(tokens(1)) is None  # nobody jumps the queue
    clock.advance(0.5)  # 50 tokens: enough for every small one, but the big one is first
    await steps()
    assert order == []
    clock.advance(0.5)
    await steps()
    assert order == ["big"]
    clock.advance(0.1)
    await steps()
    assert order == ["big", "small0"]
    clock.advance(0.2)
    await steps()
    assert order == ["big", "small0", "small1", "small2"]
    await asyncio.gather(big, *smalls)
    assert clock.pending_timers() == 0


async def test_capacity_given_back_wakes_waiters_without_time_passing() -> None:
    pool, clock = make()
    res = await pool.acquire(tokens(100))
    task = asyncio.create_task(pool.acquire(tokens(60)))
    await steps()
    assert not task.done()
    assert pool.refund(res)
    await steps()
    assert task.done()
    assert clock.pending_timers() == 0


async def test_cancelled_head_leaves_and_next_is_served_at_its_time() -> None:
    pool, clock = make()
    await pool.acquire(tokens(100))
    head = asyncio.create_task(pool.acquire(tokens(100)))
    second = asyncio.create_task(pool.acquire(tokens(25)))
    await steps()
    head.cancel()
    await steps()
    assert head.cancelled()
    assert pool.statistics().waiters == 1
    clock.advance(0.1875)
    await steps()
    assert not second.done()
    clock.advance(0.0625)
    await steps()
    assert second.done()
    assert clock.pending_timers() == 0


async def test_cancelled_last_waiter_leaves_no_timer() -> None:
    pool, clock = make()
    await pool.acquire(tokens(100))
    task = asyncio.create_task(pool.acquire(tokens(10)))
    await steps()
    assert clock.pending_timers() == 1
    task.cancel()
    await steps()
    assert clock.pending_timers() == 0
    assert pool.statistics().waiters == 0


async def test_admitted_then_cancelled_in_the_same_instant_is_refunded() -> None:
    pool, clock = make()
    await pool.acquire(tokens(100))
    task = asyncio.create_task(pool.acquire(tokens(100)))
    await steps()
    clock.advance(1.0)  # the timer admits it (charging 100) before the task runs again
    assert pool.statistics().levels["tokens"] == pytest.approx(0.0)
    task.cancel()
    await steps()
    assert task.cancelled()
    assert pool.statistics().levels["tokens"] == pytest.approx(100.0)
    assert pool.statistics().refunded == 1


async def test_never_fits_fails_at_once_with_a_clear_message() -> None:
    pool, _ = make(QuotaLimits(rpm=100, tpm=6000))
    with pytest.raises(NeverFitsError) as info:
        await pool.acquire(tokens(6001))
    message = str(info.value)
    for part in ("acme", "tokens", "6001", "6000", "tpm"):
        assert part in message
    with pytest.raises(NeverFitsError):
        pool.try_acquire(tokens(7000))
    pool.check_fits(tokens(6000))  # exactly the limit fits (waits for a full bucket)
    assert pool.wait_estimate(tokens(6001)) == float("inf")
    assert pool.statistics().never_fit == 2


async def test_request_bigger_than_the_bucket_waits_for_a_full_bucket_then_goes_into_debt() -> None:
    pool, clock = make()
    await pool.acquire(tokens(50))
    task = asyncio.create_task(pool.acquire(tokens(300)))
    await steps()
    clock.advance(0.5)
    await steps()
    assert task.done()
    assert pool.statistics().levels["tokens"] == pytest.approx(-200.0)
    follower = asyncio.create_task(pool.acquire(tokens(10)))
    clock.advance(2.0)
    await steps()
    assert not follower.done()
    clock.advance(0.1)
    await steps()
    assert follower.done()


async def test_several_dimensions_wait_for_the_slowest() -> None:
    limits = QuotaLimits(rpm=60, itpm=6000, otpm=600, safety=1.0, burst_seconds=1.0)
    pool, clock = make(limits)
    cost = Cost(requests=1, input_tokens=50, output_tokens=10)
    await pool.acquire(cost)
    task = asyncio.create_task(pool.acquire(cost))
    await steps()
    # requests: 1/s, bucket 1 → 1 s; input: 100/s → 0 s; output: 10/s, level 0 → 1 s
    clock.advance(0.75)
    await steps()
    assert not task.done()
    clock.advance(0.25)
    await steps()
    assert task.done()


async def test_pause_holds_everyone_and_extends_never_shortens() -> None:
    pool, clock = make()
    pool.pause(2.0)
    pool.pause(1.0)  # does not shorten
    assert pool.try_acquire(tokens(1)) is None
    assert pool.headroom() == 0.0
    assert pool.wait_estimate(tokens(1)) == pytest.approx(2.0)
    task = asyncio.create_task(pool.acquire(tokens(1)))
    await steps()
    clock.advance(1.5)
    await steps()
    assert not task.done()
    pool.pause(1.0)  # now paused until 2.5
    clock.advance(0.75)
    await steps()
    assert not task.done()
    clock.advance(0.25)
    await steps()
    assert task.done()
    assert clock.pending_timers() == 0
    assert pool.statistics().pauses == 3


async def test_reconcile_corrects_only_the_prompt_part_openai_style() -> None:
    pool, _ = make()
    res = await pool.acquire(tokens(100, prompt=40))  # 40 prompt estimate + 60 max_tokens
    assert pool.reconcile(res, Usage(prompt_tokens=30, completion_tokens=5))
    assert res.charged["tokens"] == 90  # max_tokens stays charged, prompt corrected
    assert pool.statistics().levels["tokens"] == pytest.approx(10.0)
    assert not pool.reconcile(res, Usage(prompt_tokens=30))  # settled once only
    assert not pool.refund(res)


async def test_reconcile_can_charge_more_and_without_estimate_does_nothing() -> None:
    pool, _ = make()
    res = await pool.acquire(tokens(50, prompt=20))
    pool.reconcile(res, Usage(prompt_tokens=45))
    assert pool.statistics().levels["tokens"] == pytest.approx(25.0)
    res2 = await pool.acquire(tokens(20))
    pool.reconcile(res2, Usage(prompt_tokens=1))
    assert pool.statistics().levels["tokens"] == pytest.approx(5.0)


async def test_reconcile_split_limits_anthropic_style() -> None:
    limits = QuotaLimits(itpm=6000, otpm=6000, safety=1.0, burst_seconds=1.0)
    pool, _ = make(limits)
    res = await pool.acquire(Cost(input_tokens=50, output_tokens=40))
    pool.reconcile(res, Usage(prompt_tokens=60, completion_tokens=10, cached_tokens=20), output_adjusted=True)
    levels = pool.statistics().levels
    assert levels["input_tokens"] == pytest.approx(60.0)  # 40 uncached input counted
    assert levels["output_tokens"] == pytest.approx(90.0)  # unused max_tokens returned
    res2 = await pool.acquire(Cost(input_tokens=10, output_tokens=40))
    pool.reconcile(res2, Usage(prompt_tokens=10, completion_tokens=1))  # output kept at max_tokens
    assert pool.statistics().levels["output_tokens"] == pytest.approx(50.0)


async def test_refund_balances_and_foreign_reservations_are_refused() -> None:
    pool, _ = make()
    res = await pool.acquire(tokens(70))
    assert pool.refund(res)
    assert pool.statistics().levels["tokens"] == 100.0
    other, _ = make()
    with pytest.raises(ValueError, match="pool"):
        other.refund(Reservation("elsewhere", tokens(1), {"tokens": 1.0}, 0.0))


async def test_rate_limited_cuts_damps_drains_and_recovers() -> None:
    settings = AimdSettings(decrease=0.5, increase=0.25, clean_period=2.0, cooldown=1.0, probe_period=4.0)
    pool, clock = make(aimd=settings)
    res = await pool.acquire(tokens(30))
    assert pool.on_rate_limited(res)  # refunds, cuts, drains
    stats = pool.statistics()
    assert stats.aimd_factor == 0.5
    assert stats.effective_per_second["tokens"] == pytest.approx(50.0)
    assert stats.capacities["tokens"] == pytest.approx(50.0)
    # empty at the provider: one average request of debt, so the next one waits for its refill
    assert stats.levels["tokens"] == pytest.approx(-30.0)
    assert res.settled
    assert not pool.on_rate_limited()  # damped within the cooldown
    assert pool.statistics().aimd_factor == 0.5
    clock.advance(1.0)
    assert not pool.on_success()  # a 429 1 s ago: not clean yet
    clock.advance(1.0)
    assert pool.on_success()
    assert pool.statistics().effective_per_second["tokens"] == pytest.approx(75.0)
    clock.advance(2.0)
    assert pool.on_success()  # back to the rate of the cut only after probe_period
    assert pool.statistics().aimd_factor == 1.0
    assert pool.statistics().cuts == 1
    assert pool.statistics().rate_limited == 2


async def test_calibrate_adopts_a_lower_reported_limit_and_restores_up_to_declared() -> None:
    pool, _ = make(QuotaLimits(tpm=6000, safety=0.9, burst_seconds=1.0))
    assert pool.calibrate(RateLimitSnapshot(limit_tokens=3000))
    stats = pool.statistics()
    assert stats.limits_per_minute["tokens"] == 3000
    assert stats.effective_per_second["tokens"] == pytest.approx(45.0)  # × safety
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=3000))  # nothing new
    assert pool.calibrate(RateLimitSnapshot(limit_tokens=12000))  # never past the declared
    assert pool.statistics().limits_per_minute["tokens"] == 6000
    assert not pool.calibrate(RateLimitSnapshot(limit_requests=10))  # not a limited dimension


async def test_calibrate_undoes_cuts_the_lower_limit_explains() -> None:
    pool, _ = make(aimd=AimdSettings(decrease=0.5, cooldown=0.0))
    pool.on_rate_limited()
    pool.on_rate_limited()
    assert pool.statistics().aimd_factor == 0.25
    pool.calibrate(RateLimitSnapshot(limit_tokens=3000))
    stats = pool.statistics()
    assert stats.aimd_factor == 0.5
    assert stats.effective_per_second["tokens"] == pytest.approx(25.0)  # not halved twice


async def test_calibrate_fails_waiters_that_no_longer_fit() -> None:
    pool, _ = make()
    await pool.acquire(tokens(100))
    doomed = asyncio.create_task(pool.acquire(tokens(5000)))
    fine = asyncio.create_task(pool.acquire(tokens(10)))
    await steps()
    pool.calibrate(RateLimitSnapshot(limit_tokens=1000))
    await steps()
    assert isinstance(doomed.exception(), NeverFitsError)
    assert not fine.done()
    assert pool.statistics().waiters == 1
    fine.cancel()
    await steps()


async def test_calibrate_lowers_level_to_reported_remaining_never_raises() -> None:
    pool, _ = make()
    # an idle provider showing most of its limit left: its remaining is on the per-minute scale
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=5900))
    assert pool.learning.headers.style == "minute"
    assert pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=600))
    assert pool.statistics().levels["tokens"] == pytest.approx(10.0)  # 10 % of the bucket
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=6000))
    assert pool.statistics().levels["tokens"] == pytest.approx(10.0)
    res = await pool.acquire(tokens(10))
    assert res.charged["tokens"] == 10
    # close to our own accounting: left alone
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=0))


async def test_minute_headers_of_a_busy_provider_leave_a_small_burst_alone() -> None:
    # a bucket of a quarter second's burst (25 tokens); the provider's minute-scale remaining shows
    # 30% left — of what it admits at once (a second's 100 tokens), more than our whole bucket
    pool, _ = make(QuotaLimits(tpm=6000, safety=1.0, burst_seconds=0.25))
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=5900))
    assert pool.learning.headers.style == "minute"
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=1800))
    assert pool.statistics().levels["tokens"] == pytest.approx(25.0)
    # 5% left is 5 tokens a second: far below our 25, so the level comes down to it
    assert pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=300))
    assert pool.statistics().levels["tokens"] == pytest.approx(5.0)


async def test_a_short_window_remaining_is_never_read_as_minute_capacity() -> None:
    # "window" headers: 40 left of this second's 100 — not 40 of 6000 per minute (nearly empty)
    pool, clock = make()
    assert not pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=100))
    assert pool.learning.headers.style == "window"
    assert pool.calibrate(RateLimitSnapshot(limit_tokens=6000, remaining_tokens=40))
    assert pool.statistics().levels["tokens"] == pytest.approx(40.0)  # what the provider would admit
    assert pool.try_acquire(tokens(40)) is not None
    assert pool.try_acquire(tokens(40)) is None
    clock.advance(0.4)  # 40 tokens of refill at 100/s
    assert pool.try_acquire(tokens(40)) is not None


async def test_headroom_statistics_and_repr() -> None:
    pool, clock = make(QuotaLimits(rpm=600, tpm=6000, safety=1.0, burst_seconds=1.0))
    assert pool.headroom() == 1.0
    await pool.acquire(Cost(requests=1, tokens=75))
    assert pool.headroom() == pytest.approx(0.25)
    stats = pool.statistics()
    assert stats.admitted == 1
    assert stats.capacities == {"requests": 10.0, "tokens": 100.0}
    assert stats.paused_until is None
    pool.pause(3.0)
    assert pool.statistics().paused_until == clock.now() + 3.0
    text = repr(pool)
    assert "acme" in text
    assert "tpm=25/100" in text
    assert "paused=3s" in text
    pool.close()
    assert clock.pending_timers() == 0


async def test_close_cancels_waiters() -> None:
    pool, clock = make()
    await pool.acquire(tokens(100))
    task = asyncio.create_task(pool.acquire(tokens(50)))
    await steps()
    pool.close()
    await steps()
    assert task.cancelled()
    assert clock.pending_timers() == 0


def test_limits_validation() -> None:
    with pytest.raises(ValueError, match="tpm"):
        QuotaLimits(tpm=-1)
    with pytest.raises(ValueError, match="safety"):
        QuotaLimits(safety=1.5)
    with pytest.raises(ValueError, match="burst_seconds"):
        QuotaLimits(burst_seconds=0)


async def test_an_urgent_request_passes_the_queue_but_is_still_paced() -> None:
    pool, clock = make()
    await pool.acquire(tokens(100))  # the bucket is empty now: 100 tokens/s
    batch = [asyncio.ensure_future(pool.acquire(tokens(100))) for _ in range(3)]
    await steps()
    live = asyncio.ensure_future(pool.acquire(tokens(50), urgent=True))
    await steps()
    assert not live.done(), "paced: the bucket is empty"
    clock.advance(0.5)
    await steps()
    assert live.done(), "ahead of the three queued before it"
    assert not any(b.done() for b in batch)
    clock.advance(1.0)
    await steps()
    assert batch[0].done()
    assert not batch[1].done()
    for b in batch:
        b.cancel()
    await asyncio.gather(*batch, return_exceptions=True)


async def test_unknown_enforcement_gives_back_estimate_noise_but_not_what_the_model_since_learned() -> None:
    # No configured burst: the enforcement is unknown, so requests leave evenly (no bucket to
    # fill) and an over-estimate is given back only as far as today's charge model would still
    # make it — never the whole difference of a reservation priced before the model learned.
    pool, clock = make(QuotaLimits(tpm=6000, safety=1.0))

    async def admitted() -> Reservation:
        clock.advance(60.0)  # the previous one's debt repaid: admitted at once
        return await pool.acquire(Cost(tokens=110, output_tokens=10), count=100)

    stale = await admitted()  # nothing known yet: priced at our count, 100
    assert stale.charged["tokens"] == 110
    for _ in range(50):
        pool.learning.charges.observe_usage(100, 80, now=0.0)  # the provider reports 0.8 of our count
    fresh = await admitted()
    assert fresh.charged["tokens"] == 90  # priced at admission: 80 + 10
    level = pool.statistics().levels["tokens"]
    pool.reconcile(fresh, Usage(prompt_tokens=76), prompt_estimate=80, count=100)
    assert pool.statistics().levels["tokens"] == pytest.approx(level + 4)  # the estimate's noise
    level = pool.statistics().levels["tokens"]
    pool.reconcile(stale, Usage(prompt_tokens=78), prompt_estimate=100, count=100)
    assert pool.statistics().levels["tokens"] == pytest.approx(level + 2)  # not 22
    under = await admitted()
    level = pool.statistics().levels["tokens"]
    pool.reconcile(under, Usage(prompt_tokens=85), prompt_estimate=80, count=100)
    assert pool.statistics().levels["tokens"] == pytest.approx(level - 5)  # an under-estimate: taken
    kept = await admitted()
    level = pool.statistics().levels["tokens"]
    pool.reconcile(kept, Usage(prompt_tokens=70), prompt_estimate=80)  # our count unknown: kept
    assert pool.statistics().levels["tokens"] == pytest.approx(level)
