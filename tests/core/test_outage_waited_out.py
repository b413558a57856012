"""An outage waited out, through the `Gateway` over real loopback HTTP: the provider answers, then
its server goes away (the emulator stopped: connections refused) and comes back on the same port.
The requests sent meanwhile wait for the pause's probes instead of failing — with `max_attempts:
1` (and the pause at the first refusal), attempts fail during the outage, yet every request
succeeds: attempts at a paused target are not spent — and the log says when the target paused
and resumed. With `max_outage` shorter than the outage, the target is taken out and the requests
end with `NoTargetLeft`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from batchgate.config import GatewayConfig, config_from_dict
from batchgate.emulator import Emulator, emulator_config_from_dict
from batchgate.errors import NoTargetLeft, RouteStopped
from batchgate.gateway import Gateway

pytestmark = pytest.mark.slow  # real outages of a second or two


def _emulator(port: int = 0) -> Emulator:
    latency = {"ttft_p50_ms": 5, "ttft_sigma": 0.1, "per_token_ms": 0}
    provider = {"name": "p", "family": "openai", "limits": {"rpm": 60_000, "tpm": 10**8}, "latency": latency}
    return Emulator(emulator_config_from_dict({"seed": 5, "providers": [provider]}), port=port)


def _config(base_url: str, max_outage: float) -> GatewayConfig:
    data: dict[str, Any] = {
        "providers": [{"name": "p", "kind": "openai", "base_url": base_url, "limits": {"rpm": 1200}}],
        "routes": [{"model": "m", "targets": ["p"]}],
        "settings": {
            "retry": {"max_attempts": 1, "base_delay": 0.02, "max_delay": 0.1},
            "circuit": {"take_out_after": 1, "max_outage": max_outage},
        },
    }
    return config_from_dict(data, source="test.yaml")


def _chat(i: int) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": f"item {i}"}]}


async def test_an_outage_is_waited_out_without_spending_attempts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="batchgate.provider")
    emu = _emulator()
    await emu.start()
    port = emu.port
    async with Gateway(_config(emu.base_url("p"), max_outage=600)) as gw:
        tasks = [asyncio.ensure_future(gw.arun(_chat(i))) for i in range(60)]  # 20 a second
        for done, next_done in enumerate(asyncio.as_completed(tasks), 1):
            await next_done
            if done == 10:
                break
        await emu.stop()
        await asyncio.sleep(2.5)  # the outage: refused connections, probes at 1 s and 3 s
        emu = _emulator(port)
        await emu.start()
        try:
            results = await asyncio.gather(*tasks)
        finally:
            await emu.stop()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert max(len(r.attempts) for r in results) >= 2  # failed attempts while paused: not spent
    events = [r.getMessage() for r in caplog.records if r.name == "batchgate.provider"]
    names = [e for e in ("target_paused", "target_resumed", "target_out") if any(e in m for m in events)]
    assert names == ["target_paused", "target_resumed"], events


async def test_an_outage_longer_than_max_outage_takes_the_target_out() -> None:
    emu = _emulator()
    await emu.start()
    async with Gateway(_config(emu.base_url("p"), max_outage=1.0)) as gw:
        assert (await gw.arun(_chat(0))).ok
        await emu.stop()  # and never back
        results = await asyncio.gather(*(gw.arun(_chat(i)) for i in range(1, 9)))
    assert all(isinstance(r.error, NoTargetLeft) for r in results), [r.error for r in results]
    assert not any(isinstance(r.error, RouteStopped) for r in results)  # not a key: the job stops
    assert "(max_outage)" in str(results[0].error)


async def test_a_paused_target_fails_over_to_its_route_and_is_probed_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="batchgate.provider")
    alpha, beta = _emulator(), _emulator()
    await alpha.start()
    await beta.start()
    port = alpha.port
    providers = [
        {"name": n, "kind": "openai", "base_url": e.base_url("p"), "limits": {"rpm": 6000}}
        for n, e in (("a", alpha), ("b", beta))
    ]
    data: dict[str, Any] = {
        "providers": providers,
        "routes": [{"model": "m", "targets": ["a", "b"]}],
        "settings": {"retry": {"max_attempts": 1}, "circuit": {"take_out_after": 1, "max_outage": 600}},
    }
    try:
        async with Gateway(config_from_dict(data, source="test.yaml")) as gw:
            first = await asyncio.gather(*(gw.arun(_chat(i)) for i in range(20)))
            assert {r.provider for r in first} >= {"a"}  # alpha answered: an outage, not a wrong URL
            await alpha.stop()
            during = await asyncio.gather(*(gw.arun(_chat(i)) for i in range(20, 40)))
            alpha = _emulator(port)
            await alpha.start()
            await asyncio.sleep(1.2)  # past the first probe's time
            after = await asyncio.gather(*(gw.arun(_chat(i)) for i in range(40, 60)))
    finally:
        await alpha.stop()
        await beta.stop()
    assert all(r.ok for r in first + during + after)
    assert {r.provider for r in during} == {"b"}  # failed over while alpha was paused
    assert alpha.stats()["providers"]["p"]["completed"] >= 1  # probed back: alpha serves again
    events = [r.getMessage() for r in caplog.records if r.name == "batchgate.provider"]
    assert any("target_paused" in e for e in events)
    assert any("target_resumed" in e for e in events)
