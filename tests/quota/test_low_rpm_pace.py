"""Low RPMs pace at their rate (issue 38): a declared rpm of 50 to 200, nothing else binding,
admits that many requests a minute — counted on a FakeClock, so no timing is asserted."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.models import Cost
from batchgate.quota.pool import QuotaLimits, QuotaPool
from clocks import on_fake_time


async def _admitted_in_second_minute(rpm: int) -> int:
    clock = FakeClock(start=0.0)
    pool = QuotaPool("p", QuotaLimits(rpm=rpm), clock)
    times: list[float] = []

    async def send() -> None:
        while clock.now() < 120.0:
            await pool.acquire(Cost(requests=1))
            times.append(clock.now())

    await on_fake_time(clock, send())
    return sum(1 for t in times if 60.0 <= t < 120.0)


@pytest.mark.parametrize("rpm", [50, 100, 150, 200])
async def test_a_low_rpm_admits_its_rate_each_minute(rpm: int) -> None:
    admitted = await _admitted_in_second_minute(rpm)
    assert 0.97 * rpm <= admitted <= rpm  # the safety margin (0.99) below, never above
