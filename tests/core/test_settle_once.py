"""Every quota reservation is settled exactly once, whatever ends its attempt (issue 38): over
real HTTP against the emulator with half its answers a 5xx, none is left open, and a price rise
learned after the run charges nothing more for the attempts that failed."""

from __future__ import annotations

from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.gateway import Gateway
from clocks import on_fake_time

from .conftest import chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration


async def test_half_5xx_leaves_no_reservation_open_and_a_later_price_rise_charges_nothing(
    emulator: Any,
) -> None:
    clock = FakeClock()
    providers = [emu_provider("alpha", faults={"server_error": 0.5})]
    emu = await emulator(providers, clock=clock)
    settings = {"retry": {"max_attempts": 16, "base_delay": 0.01, "max_delay": 0.05}}
    limits = {"alpha": {"rpm": 60_000, "tpm": 10_000_000, "burst_seconds": 1}}  # a bucket to read
    cfg = gateway_config(
        emu, providers, [{"model": "m", "targets": ["alpha"]}], limits=limits, settings=settings
    )
    async with Gateway(cfg, clock=clock) as gw:
        results = await on_fake_time(clock, gw.abatch([chat(f"echo {i}") for i in range(300)]))
        pool = gw.runtimes["alpha"].pool
        stats = pool.statistics()
        failed_attempts = sum(1 for r in results for a in r.attempts if a.error_kind == "server_error")
        assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
        assert failed_attempts > 100  # half the answers were a 5xx
        assert stats.admitted >= 300 + failed_attempts  # (hedges too)
        assert stats.open == 0, f"{stats.open} reservations never settled"
        assert stats.settled_twice == 0
        # a minute later the bucket is full; then the provider is learned to charge 10x our count
        # (outweighing every answer before): only reservations still open would be topped up
        clock.advance(60.0)
        full = pool.statistics().levels["tokens"]
        assert full == pool.statistics().capacities["tokens"] > 0
        pool.observe_usage(1_000_000, 10_000_000)
        assert pool.statistics().levels["tokens"] == pytest.approx(full)
