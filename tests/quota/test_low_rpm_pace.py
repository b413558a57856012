"""Low RPMs pace at their rate (issue 38): a declared rpm of 50 to 200, nothing else binding,
admits that many requests a minute — counted on a FakeClock, so no timing is asserted."""

from __future__ import annotations

import pytest

from batchgate.clock import FakeClock
from batchgate.config import config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.gateway import Gateway
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


async def _through_emulator(enforcement: str, n: int) -> tuple[int, int, float]:
    """(answered, the emulator's 429s, requests a minute) of `n` requests at rpm 100 declared."""
    clock = FakeClock()
    provider = {
        "name": "p",
        "family": "openai",
        "limits": {"rpm": 100, "tpm": 10**8},
        "enforcement": enforcement,
    }
    emu = Emulator(emulator_config_from_dict({"seed": 3, "providers": [provider]}), clock=clock)
    await emu.start()
    try:
        config = config_from_dict(
            {
                "providers": [
                    {"name": "p", "kind": "openai", "base_url": emu.base_url("p"), "limits": {"rpm": 100}}
                ],
                "routes": [{"model": "m", "targets": ["p"]}],
                "settings": {"retry": {"base_delay": 0.05, "max_delay": 0.5}},
            },
            environ={},
        )
        body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "echo"}]}
        start = clock.now()
        async with Gateway(config, clock=clock) as gw:
            results = await on_fake_time(clock, gw.abatch([dict(body) for _ in range(n)]))
        refused = emu.stats()["providers"]["p"]["rejected"]["rate_limit"]
        return sum(r.ok for r in results), refused, n / (clock.now() - start) * 60.0
    finally:
        await emu.stop()


async def test_rpm_100_paces_at_100_a_minute_at_a_token_bucket_provider() -> None:
    answered, refused, per_minute = await _through_emulator("token_bucket", 100)
    assert (answered, refused) == (100, 0)
    assert per_minute >= 96.0  # was 60 (0.6) when the 1 s window log held one request


async def test_a_provider_whose_1s_windows_admit_one_costs_a_single_429() -> None:
    # rpm 100 over 1 s windows holding 1.67: one a second is all it admits (60 a minute); the
    # stretched window meets one 429 and the pace is back to what it admits
    answered, refused, _ = await _through_emulator("sliding_window", 60)
    assert answered == 60
    assert refused <= 1
