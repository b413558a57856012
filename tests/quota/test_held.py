"""`Held`: a reservation owned by a `finally`, settled exactly once with what is known (issue 38)."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, Usage
from batchgate.quota.held import Held
from batchgate.quota.limits import SENT_UNKNOWN, UNSENT, Outcome
from batchgate.quota.pool import QuotaLimits, QuotaPool

TPM = QuotaLimits(tpm=6000, safety=1.0, burst_seconds=1.0)  # 100 tokens/s, a bucket of 100


def make() -> QuotaPool:
    return QuotaPool("acme", TPM, FakeClock())


def level(pool: QuotaPool) -> float:
    return pool.statistics().levels["tokens"]


async def test_closed_before_it_left_it_is_refunded() -> None:
    pool = make()
    async with Held(pool, await pool.acquire(Cost(tokens=40))) as held:
        assert pool.statistics().open == 1
    assert held.reservation.settled
    assert level(pool) == pytest.approx(100)  # all given back: nothing was sent
    assert (pool.statistics().open, pool.statistics().refunded) == (0, 1)


async def test_closed_after_it_left_with_nothing_known_it_stays_charged() -> None:
    pool = make()
    held = Held(pool, await pool.acquire(Cost(tokens=40)))
    held.on_wire()
    held.close()  # the attempt ended unexplained (a 5xx, a bug, a cancellation)
    assert level(pool) == pytest.approx(60)  # kept as charged: the provider may have counted it
    stats = pool.statistics()
    assert (stats.open, stats.refunded, stats.reconciled, stats.settled_twice) == (0, 0, 0, 0)


async def test_settled_by_its_attempt_the_close_does_nothing_and_a_second_settle_is_counted() -> None:
    pool = make()
    held = Held(pool, await pool.acquire(Cost(tokens=40, input_tokens=30), count=30))
    held.on_wire()
    held.settle(Outcome.answered(Usage(prompt_tokens=30, completion_tokens=5), 30))
    held.close()
    assert pool.statistics().settled_twice == 0  # the normal path: one settle, then the close
    before = level(pool)
    assert not held.settle(UNSENT)  # a second settle: a no-op (nothing given back), counted
    assert not pool.settle(held.reservation, SENT_UNKNOWN)
    assert level(pool) == pytest.approx(before)
    stats = pool.statistics()
    assert (stats.open, stats.reconciled, stats.refunded, stats.settled_twice) == (0, 1, 0, 2)
