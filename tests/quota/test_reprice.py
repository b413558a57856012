"""Open reservations priced before the charge model learned a higher charge are topped up at once."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost, Usage
from batchgate.quota.pool import QuotaLimits, QuotaPool, Reservation


async def _pool() -> tuple[QuotaPool, FakeClock]:
    clock = FakeClock()
    return QuotaPool("p", QuotaLimits(tpm=60_000, safety=1.0, burst_seconds=1.0), clock), clock


async def test_a_higher_learned_charge_tops_up_every_open_reservation_once() -> None:
    pool, _ = await _pool()
    blind = [await pool.acquire(Cost(tokens=110, output_tokens=10), count=100) for _ in range(3)]
    assert [r.charged["tokens"] for r in blind] == [110, 110, 110]  # our count: nothing known
    pool.reconcile(blind[0], Usage(prompt_tokens=150), prompt_estimate=100, count=100)  # answered
    level = pool.statistics().levels["tokens"]
    pool.observe_usage(100, 150)  # the first answer: the provider charges 1.5x our count
    assert pool.statistics().levels["tokens"] == pytest.approx(level - 2 * 50)  # the two still open
    pool.observe_usage(100, 150)  # the same factor again: nothing more
    assert pool.statistics().levels["tokens"] == pytest.approx(level - 2 * 50)
    open_ = blind[1:]
    assert [r.charged["tokens"] for r in open_] == [160, 160]
    # each one's own answer then settles on what it was charged, not taking the 50 twice
    level = pool.statistics().levels["tokens"]
    pool.reconcile(open_[0], Usage(prompt_tokens=150), prompt_estimate=100, count=100)
    assert pool.statistics().levels["tokens"] == pytest.approx(level)
    assert open_[0].charged["tokens"] == 160


async def test_a_lower_learned_charge_takes_nothing_and_settled_ones_are_left_alone() -> None:
    pool, _ = await _pool()
    res: Reservation = await pool.acquire(Cost(tokens=110, output_tokens=10), count=100)
    settled = await pool.acquire(Cost(tokens=110, output_tokens=10), count=100)
    pool.reconcile(settled, Usage(prompt_tokens=100), prompt_estimate=100, count=100)
    level = pool.statistics().levels["tokens"]
    pool.observe_usage(100, 80)  # cheaper than our count: open reservations hold enough
    assert pool.statistics().levels["tokens"] == pytest.approx(level)
    assert res.charged["tokens"] == 110
