"""Over real HTTP against the emulator: a hung request is hedged (first answer wins, the
duplicate spend counted), a 200 with a malformed body counts toward the circuit breaker, and a
server that refuses past its concurrency cap with a bare 429 has that cap learned."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from batchgate.gateway import Gateway

from .conftest import chat, emu_provider, gateway_config

Start = Callable[..., Any]


@pytest.mark.slow  # real timeouts on hung requests
async def test_hung_requests_are_hedged_and_the_duplicate_spend_is_counted(emulator: Start) -> None:
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0}
    providers = [emu_provider("alpha", latency=latency, faults={"hang": 0.1})]
    emu = await emulator(providers)
    # the configured maximum is far beyond the run: only the adaptive wait can end a hang
    routes = [{"model": "m", "targets": ["alpha"]}]
    cfg = gateway_config(emu, providers, routes, settings={"timeouts": {"total": 600}})
    async with Gateway(cfg) as gw:
        results = await gw.abatch([chat(f"echo item {i}") for i in range(120)])
        stats = gw.statistics().providers["alpha"]
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert emu.stats()["providers"]["alpha"]["faults"]["hang"] > 0
    assert stats.hedged > 0
    assert stats.duplicate_tokens > 0


@pytest.mark.slow  # real timeouts on hung requests
async def test_with_hedging_off_a_hung_request_times_out_and_is_retried_never_duplicated(
    emulator: Start,
) -> None:
    latency = {"ttft_p50_ms": 20, "ttft_sigma": 0.2, "per_token_ms": 0}
    providers = [emu_provider("alpha", latency=latency, faults={"hang": 0.1})]
    emu = await emulator(providers)
    routes = [{"model": "m", "targets": ["alpha"]}]
    settings = {"timeouts": {"total": 3, "hedge": False}, "retry": {"max_attempts": 8, "base_delay": 0.01}}
    cfg = gateway_config(emu, providers, routes, settings=settings)
    assert cfg.settings.timeouts.hedge is False
    async with Gateway(cfg) as gw:
        results = await gw.abatch([chat(f"echo item {i}") for i in range(120)])
        stats = gw.statistics().providers["alpha"]
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert emu.stats()["providers"]["alpha"]["faults"]["hang"] > 0
    assert (stats.hedged, stats.duplicate_tokens) == (0, 0)
    assert stats.retries > 0  # each hang ended at its timeout and was sent again


async def test_a_200_with_a_malformed_body_counts_toward_the_breaker(emulator: Start) -> None:
    providers = [emu_provider("alpha", faults={"non_json": 1.0})]
    emu = await emulator(providers)
    cfg = gateway_config(
        emu,
        providers,
        [{"model": "m", "targets": ["alpha"]}],
        settings={"circuit": {"failure_threshold": 3, "open_seconds": 60}, "retry": {"max_attempts": 1}},
    )
    async with Gateway(cfg) as gw:
        results = await gw.abatch([chat(f"echo item {i}") for i in range(3)])
        breaker = gw.runtimes["alpha"].breaker
    assert not any(r.ok for r in results)
    assert {r.status_code for r in results} == {200}
    assert breaker.opened == 1


async def test_a_bare_429_concurrency_cap_is_learned(emulator: Start) -> None:
    latency = {"ttft_p50_ms": 50, "ttft_sigma": 0.1, "per_token_ms": 0}
    cap = {"max": 4, "overflow": "reject", "status": 429}
    providers = [emu_provider("alpha", latency=latency, concurrency=cap, headers="none")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}], limits={"alpha": {}})
    async with Gateway(cfg) as gw:
        results = await gw.abatch([chat(f"echo item {i}") for i in range(60)])
        rt = gw.runtimes["alpha"]
    assert all(r.ok for r in results)
    assert rt.concurrency.limit is not None
    assert rt.concurrency.limit <= 4
    # the first wave (60 at once, nothing known) meets the cap; after that it is respected:
    # no request is turned away twice
    assert max(len(r.attempts) for r in results) == 2
