"""An Anthropic provider's output charge, end to end over HTTP (issue #28): batchgate assumes what
Anthropic documents (OTPM adjusted to the real output when the answer ends) and keeps assuming it
against a provider that does so; one that keeps `max_tokens` charged shows its output bucket
emptying in its headers, and is learned to keep it (a few 429s for what was already in flight aside)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from batchgate.gateway import Gateway

from .conftest import chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration

Start = Callable[..., Any]
LIMITS = {"rpm": 60_000, "itpm": 10_000_000, "otpm": 6000}  # 100 output tokens a second


async def _run(emulator: Start, output_charge: str) -> tuple[bool, int, bool]:
    """(still assumed adjusted, the provider's 429s, every request answered)."""
    provider = emu_provider(
        "claude",
        "anthropic",
        limits=LIMITS,
        enforcement={"kind": "token_bucket", "burst_seconds": 1},
        output_charge=output_charge,
    )
    emu = await emulator([provider])
    cfg = gateway_config(emu, [provider], [{"model": "m", "targets": ["claude"]}])
    async with Gateway(cfg) as gw:
        assert gw.runtimes["claude"].pool.learning.output_adjusted  # Anthropic documents it: assumed
        results = await gw.abatch([chat(f"echo {i}", max_tokens=20) for i in range(12)])
        adjusted = gw.runtimes["claude"].pool.learning.output_adjusted
    refused = emu.stats()["providers"]["claude"]["rejected"]["rate_limit"]
    return adjusted, refused, all(r.ok for r in results)


async def test_an_adjusting_anthropic_provider_stays_adjusted(emulator: Start) -> None:
    adjusted, refused, ok = await _run(emulator, "adjusted")
    assert ok
    assert adjusted
    assert refused == 0


@pytest.mark.slow
async def test_a_provider_that_keeps_max_tokens_is_learned_from_its_emptied_output_bucket(
    emulator: Start,
) -> None:
    adjusted, _, ok = await _run(emulator, "max_tokens")
    assert ok
    assert not adjusted
