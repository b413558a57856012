"""Hypothesis properties of the quota pool, driven by a FakeClock (no real time passes).

(1) Over any interval the pool admits at most C + rate·T + the largest cost (+ what was given
    back meanwhile), in arrival order, whatever the arrivals, costs and settlements; the test
    checks the tighter C + rate·T + (last cost − C)⁺ + given back.
(3) Reservations and refunds balance: after enough time the buckets are full again.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.clock import FakeClock
from batchgate.models import Cost, Usage
from batchgate.quota.pool import TIMER_SLACK, QuotaLimits, QuotaPool, Reservation


@dataclass(frozen=True)
class Arrive:
    dt: float
    prompt: int
    max_tokens: int


@dataclass(frozen=True)
class Settle:
    dt: float
    pick: int
    actual_prompt: int
    refund: bool


_OPS = st.lists(
    st.one_of(
        st.builds(Arrive, st.floats(0.0, 0.5), st.integers(1, 400), st.integers(0, 400)),
        st.builds(Settle, st.floats(0.0, 0.5), st.integers(0, 10**6), st.integers(0, 600), st.booleans()),
    ),
    min_size=1,
    max_size=40,
)
_LIMITS = st.builds(
    QuotaLimits,
    rpm=st.sampled_from([None, 60.0, 600.0, 6000.0]),
    tpm=st.floats(1000.0, 100_000.0),
    safety=st.floats(0.5, 1.0),
    burst_seconds=st.floats(0.05, 2.0),
)


async def _steps() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def _run(limits: QuotaLimits, ops: list[Arrive | Settle]) -> None:
    clock = FakeClock()
    pool = QuotaPool("p", limits, clock)
    stats = pool.statistics()
    rates, capacities = stats.effective_per_second, stats.capacities
    arrivals: list[asyncio.Task[Reservation]] = []
    open_: list[Reservation] = []
    given_back: dict[str, list[tuple[float, float]]] = {d: [] for d in rates}
    max_cost = {"tokens": 0.0, "requests": 1.0}

    seen: set[asyncio.Task[Reservation]] = set()

    def collect() -> None:
        for task in arrivals:
            if task.done() and task not in seen:
                seen.add(task)
                open_.append(task.result())

    for op in ops:
        clock.advance(op.dt)
        await _steps()
        collect()
        if isinstance(op, Arrive):
            cost = op.prompt + op.max_tokens
            if cost > (limits.tpm or 0.0):
                continue
            max_cost["tokens"] = max(max_cost["tokens"], float(cost))
            arrivals.append(asyncio.create_task(pool.acquire(Cost(tokens=cost, input_tokens=op.prompt))))
            await _steps()
            collect()
        elif open_:
            res = open_.pop(op.pick % len(open_))
            before = dict(res.charged)
            if op.refund:
                pool.refund(res)
                back = before
            else:
                pool.reconcile(res, Usage(prompt_tokens=op.actual_prompt))
                back = {d: before[d] - res.charged[d] for d in before}
            for dim, amount in back.items():
                if amount > 0:
                    given_back[dim].append((clock.now(), amount))
            await _steps()
            collect()
    clock.advance(10_000.0)
    await _steps()
    collect()
    assert all(t.done() for t in arrivals)
    assert clock.pending_timers() == 0

    admitted = [t.result() for t in arrivals]
    times = [r.admitted_at for r in admitted]
    assert times == sorted(times), "admitted out of arrival order"
    for dim, rate in rates.items():
        events = [(r.admitted_at, float(getattr(r.cost, dim))) for r in admitted]
        for i, (start, _) in enumerate(events):
            admitted_sum = 0.0
            for end, amount in events[i:]:
                admitted_sum += amount
                returned = sum(a for t, a in given_back[dim] if start <= t <= end)
                # the last admission found at least min(cost, C) in the bucket, so its debt is
                # at most cost − C: tighter than, and implying, C + rate·T + the largest cost
                overdraft = max(0.0, amount - capacities[dim])
                assert overdraft <= max_cost[dim]
                slack = rate * TIMER_SLACK  # a late timer's credit (bucket.py)
                bound = capacities[dim] + slack + rate * (end - start) + overdraft + returned
                assert admitted_sum <= bound * (1 + 1e-9) + 1e-6, (dim, start, end, admitted_sum, bound)


@pytest.mark.slow  # property: many runs
@settings(max_examples=150, deadline=None)
@given(limits=_LIMITS, ops=_OPS)
def test_property_never_admits_more_than_the_bucket_allows(
    limits: QuotaLimits, ops: list[Arrive | Settle]
) -> None:
    asyncio.run(_run(limits, ops))


async def _balance(limits: QuotaLimits, costs: list[int], refund_mask: list[bool]) -> None:
    clock = FakeClock()
    pool = QuotaPool("p", limits, clock)
    full = pool.statistics().capacities
    reservations = []
    for n in costs:
        cost = Cost(tokens=n, input_tokens=n // 2)
        while (res := pool.try_acquire(cost)) is None:
            clock.advance(pool.wait_estimate(cost))
        reservations.append(res)
        await asyncio.sleep(0)
    for res, refund in zip(reservations, refund_mask, strict=False):
        if refund:
            assert pool.refund(res)
        else:  # the estimate was exact: nothing to correct
            assert pool.reconcile(res, Usage(prompt_tokens=res.cost.input_tokens))
    # whatever was not refunded is repaid by refill within (debt + capacity) / rate
    stats = pool.statistics()
    longest = max((full[d] - stats.levels[d]) / stats.effective_per_second[d] for d in full)
    clock.advance(longest + 1e-6)
    assert pool.statistics().levels == full
    assert pool.statistics().waiters == 0
    assert clock.pending_timers() == 0


@pytest.mark.slow  # property: many runs
@settings(max_examples=150, deadline=None)
@given(
    limits=_LIMITS,
    costs=st.lists(st.integers(1, 1000), min_size=1, max_size=30),
    refund_mask=st.lists(st.booleans(), min_size=30, max_size=30),
)
def test_property_reservations_and_refunds_balance(
    limits: QuotaLimits, costs: list[int], refund_mask: list[bool]
) -> None:
    asyncio.run(_balance(limits, costs, refund_mask))


@settings(max_examples=100, deadline=None)
@given(limits=_LIMITS, costs=st.lists(st.integers(1, 1000), min_size=1, max_size=30))
def test_property_refund_right_away_restores_the_exact_level(limits: QuotaLimits, costs: list[int]) -> None:
    async def scenario() -> None:
        clock = FakeClock()
        pool = QuotaPool("p", limits, clock)
        for n in costs:
            before = pool.statistics().levels
            res = pool.try_acquire(Cost(tokens=n))
            if res is None:
                clock.advance(pool.wait_estimate(Cost(tokens=n)))
                continue
            pool.refund(res)
            after = pool.statistics().levels
            assert all(abs(after[d] - before[d]) <= 1e-9 * max(1.0, before[d]) for d in before)

    asyncio.run(scenario())
