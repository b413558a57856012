"""Quota tricks (lying headers, limit changes), concurrency caps and the latency model."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Callable
from typing import Any

import aiohttp
import openai
import orjson
import pytest

from batchgate.clock import FakeClock
from batchgate.emulator import Emulator, EmulatorConfig
from batchgate.emulator.openai_api import OpenAIFamily
from batchgate.emulator.provider import EmulatedProvider

ProviderFactory = Callable[..., dict[str, Any]]
ConfigFactory = Callable[..., EmulatorConfig]
USER: list[Any] = [{"role": "user", "content": "hello"}]
BODY = orjson.dumps({"model": "m", "messages": USER, "max_tokens": 5})
JSON = {"Content-Type": "application/json"}


async def _post(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, str]]:
    async with session.post(url, data=BODY, headers=JSON) as response:
        await response.read()
        return response.status, dict(response.headers)


@pytest.mark.integration
async def test_enforced_limit_below_the_declared_one(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    # Declared 600 rpm; enforced 6 rpm, i.e. one request per 10 s window.
    cfg = make_config(
        make_provider("liar", limits={"rpm": 600, "tpm": 100_000}, enforced={"rpm": 6, "tpm": 100_000}),
        window_seconds=10.0,
    )
    async with Emulator(cfg) as emu, aiohttp.ClientSession() as session:
        url = emu.base_url("liar") + "/chat/completions"
        first, first_headers = await _post(session, url)
        second, second_headers = await _post(session, url)
    assert (first, second) == (200, 429)
    for headers in (first_headers, second_headers):
        assert headers["x-ratelimit-limit-requests"] == "600"  # the claim, not the truth
    assert int(second_headers["x-ratelimit-remaining-requests"]) > 0  # the headers say there is room
    assert int(second_headers["retry-after-ms"]) > 1000
    assert emu.stats()["providers"]["liar"]["enforced_limits"]["rpm"] == 6


@pytest.mark.integration
async def test_limit_change_mid_run(make_provider: ProviderFactory, make_config: ConfigFactory) -> None:
    cfg = make_config(
        make_provider(
            "shifty", limits={"rpm": 6000, "tpm": 1_000_000}, limit_changes=[{"at": 1.0, "rpm": 6}]
        ),
        window_seconds=10.0,
    )
    clock = FakeClock()  # no latency configured: nothing waits on it but the limit change
    async with Emulator(cfg, clock=clock) as emu, aiohttp.ClientSession() as session:
        url = emu.base_url("shifty") + "/chat/completions"
        before = [await _post(session, url) for _ in range(3)]
        assert [status for status, _ in before] == [200, 200, 200]
        assert before[0][1]["x-ratelimit-limit-requests"] == "6000"
        clock.advance(1.1)  # the scheduled change comes due
        after = [await _post(session, url) for _ in range(3)]
        stats = emu.stats()["providers"]["shifty"]
    assert after[0][1]["x-ratelimit-limit-requests"] == "6"  # honest headers follow the change
    assert [status for status, _ in after].count(429) >= 2  # one window now holds a single request
    assert stats["enforced_limits"]["rpm"] == 6


@pytest.mark.integration
async def test_concurrency_cap_queues(make_provider: ProviderFactory, make_config: ConfigFactory) -> None:
    cfg = make_config(
        make_provider("local", concurrency={"max": 2}, latency={"ttft_p50_ms": 50, "ttft_sigma": 0})
    )
    async with Emulator(cfg) as emu:
        async with openai.AsyncOpenAI(base_url=emu.base_url("local"), api_key="x", max_retries=0) as client:
            replies = await asyncio.gather(
                *(
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"n{i}"}])
                    for i in range(6)
                )
            )
        stats = emu.stats()["providers"]["local"]
    assert sorted(r.choices[0].message.content or "" for r in replies) == [f"echo: n{i}" for i in range(6)]
    assert stats["peak_in_flight"] == 2
    assert stats["completed"] == 6


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(("family", "status"), [("openai", 503), ("anthropic", 529)])
async def test_concurrency_cap_rejects(
    make_provider: ProviderFactory, make_config: ConfigFactory, family: str, status: int
) -> None:
    cfg = make_config(
        make_provider(
            "local",
            family,
            concurrency={"max": 1, "overflow": "reject"},
            latency={"ttft_p50_ms": 1500, "ttft_sigma": 0},
        )
    )
    async with Emulator(cfg) as emu, aiohttp.ClientSession() as session:
        path = "/chat/completions" if family == "openai" else "/v1/messages"
        headers = {**JSON, "anthropic-version": "2023-06-01"}
        url = emu.base_url("local") + path

        async def post() -> int:
            async with session.post(url, data=BODY, headers=headers) as response:
                await response.read()
                return response.status

        first = asyncio.ensure_future(post())
        await emu.wait_in_flight("local", 1)
        second = await post()
        assert await first == 200
        stats = emu.stats()["providers"]["local"]
    assert second == status
    assert stats["rejected"]["concurrency"] == 1


def test_latency_is_lognormal_around_p50_and_reproducible(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    cfg = make_config(
        make_provider("slow", latency={"ttft_p50_ms": 200, "ttft_sigma": 0.5, "per_token_ms": 10})
    )
    family = OpenAIFamily()

    def delays() -> list[float]:
        runtime = EmulatedProvider(cfg.providers[0], family, cfg.seed, cfg.window_seconds, 0.0)
        body = {"model": "m", "messages": USER, "max_tokens": 50}
        return [
            runtime.admit(family.parse(body, cfg.providers[0]), i * 0.001, 0.0).delay for i in range(1001)
        ]

    first, second = delays(), delays()
    assert first == second  # seeded
    per_token = 0.010 * 3  # "echo: hello" is three tokens
    assert statistics.median(first) - per_token == pytest.approx(0.2, rel=0.1)
    assert min(first) > per_token
    assert max(first) > 2 * statistics.median(first)  # a long tail


def test_warm_loads_the_token_counting_a_standalone_emulator_needs_before_it_listens(
    make_provider: ProviderFactory, make_config: ConfigFactory
) -> None:
    # `batchgate emulate` warms before it prints that it listens: a first request that loaded
    # the encoding would stall the emulator and admit the requests behind it in a bunch.
    emu = Emulator(make_config(make_provider("p")))
    family = emu.family("openai")
    assert isinstance(family, OpenAIFamily)
    assert not family.counter.loaded
    emu.warm()
    assert family.counter.loaded
