"""The gateway over real HTTP against the emulator: routing, translation, retries per fault kind,
quota pacing, isolation between providers, streaming with a bounded window, statistics."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.emulator import EmulatorThread, emulator_config_from_dict
from batchgate.errors import DispatchStopped, NeverFitsError, QuotaExhaustedError, RoutingError
from batchgate.gateway import Gateway
from clocks import on_fake_time

from .conftest import chat, emu_provider, gateway_config

pytestmark = pytest.mark.integration

Start = Callable[..., Any]


async def test_three_providers_share_a_route_and_all_complete(emulator: Start) -> None:
    providers = [emu_provider("alpha"), emu_provider("beta"), emu_provider("gamma", "anthropic")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha", "beta", "gamma:claude-x"]}])
    requests = [
        chat(f"Classify the sentiment of this review: I love it, great value #{i}") for i in range(150)
    ]
    async with Gateway(cfg) as gw:
        results = await gw.abatch(requests)
        stats = gw.statistics()
    assert [r.index for r in results] == list(range(150))
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert {r.text for r in results} == {"positive"}
    served = {name: p.succeeded for name, p in stats.providers.items()}
    assert sum(served.values()) == 150
    assert all(n > 0 for n in served.values()), served
    gamma = [r for r in results if r.provider == "gamma"]
    assert gamma
    assert all(r.model == "claude-x" for r in gamma)


async def test_anthropic_translation_round_trip(emulator: Start) -> None:
    providers = [emu_provider("gamma", "anthropic")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["gamma"]}])
    body = {
        "model": "m",
        "max_tokens": 50,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello back to me please"},
        ],
    }
    async with Gateway(cfg) as gw:
        result = await gw.arun(body)
    assert result.ok, result.error
    assert result.body is not None
    assert result.body["object"] == "chat.completion"
    assert result.body["choices"][0]["message"]["role"] == "assistant"
    assert result.text is not None
    assert "hello" in result.text.lower()
    usage = result.body["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert result.usage is not None
    assert result.usage.prompt_tokens == usage["prompt_tokens"]


@pytest.mark.parametrize(
    "fault",
    [
        "server_error",
        "overloaded",
        "hang",
        "reset",
        "truncated",
        "non_json",
        "rate_limit_no_hint",
        "retry_after_date",
    ],
)
@pytest.mark.slow
async def test_each_retryable_fault_is_retried_to_success(emulator: Start, fault: str) -> None:
    providers = [emu_provider("alpha", faults={fault: 0.3})]
    emu = await emulator(providers)
    cfg = gateway_config(
        emu,
        providers,
        [{"model": "m", "targets": ["alpha"]}],
        settings={
            "timeouts": {"connect": 1, "total": 0.5},
            "retry": {"max_attempts": 12, "base_delay": 0.01, "max_delay": 0.05, "max_hint": 0.2},
        },
    )
    async with Gateway(cfg) as gw:
        results = await gw.abatch([chat(f"echo item {i}") for i in range(40)])
        stats = gw.statistics().providers["alpha"]
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    injected = emu.stats()["providers"]["alpha"]["faults"][fault]
    assert injected > 0
    # a hung call is either timed out and retried or overtaken by a hedge (first answer wins)
    assert stats.retries + stats.hedged >= injected
    assert sum(len(r.attempts) for r in results) == 40 + stats.failed_attempts
    failed_kinds = {a.error_kind for r in results for a in r.attempts if a.error_kind}
    assert failed_kinds, "the faults must show in the attempt history"


async def test_insufficient_quota_is_never_retried(emulator: Start) -> None:
    providers = [emu_provider("alpha", faults={"insufficient_quota": 1.0})]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    async with Gateway(cfg) as gw:
        result = await gw.arun(chat("hello"))
    assert not result.ok
    assert isinstance(result.error, QuotaExhaustedError)
    assert len(result.attempts) == 1
    assert result.attempts[0].error_kind == "quota_exhausted"


async def test_a_request_that_can_never_fit_fails_at_once(emulator: Start) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(
        emu, providers, [{"model": "m", "targets": ["alpha"]}], limits={"alpha": {"rpm": 100, "tpm": 1000}}
    )
    async with Gateway(cfg) as gw:
        result = await gw.arun(chat("hello", max_tokens=5000))
    assert isinstance(result.error, NeverFitsError)
    assert "alpha" in result.error.message
    assert result.attempts == []
    assert emu.stats()["providers"]["alpha"]["admitted"] == 0


async def test_unknown_model_is_a_routing_error(emulator: Start) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    async with Gateway(cfg) as gw:
        result = await gw.arun(chat("hello", model="nope"))
    assert isinstance(result.error, RoutingError)
    assert "nope" in result.error.message


async def test_truthful_quota_is_respected_without_429s(emulator: Start) -> None:
    # 600 rpm enforced over a 1 s window (10 per second); 45 requests must pace, not collide.
    # Gateway and emulator share a FakeClock: the pace is judged on it, not on a loaded machine.
    clock = FakeClock()
    providers = [emu_provider("alpha", limits={"rpm": 600, "tpm": 1_000_000})]
    emu = await emulator(providers, clock=clock)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    start = clock.now()
    async with Gateway(cfg, clock=clock) as gw:
        results = await on_fake_time(clock, gw.abatch([chat(f"echo {i}") for i in range(45)]))
    seen = emu.stats()["providers"]["alpha"]
    assert all(r.ok for r in results)
    assert seen["rejected"]["rate_limit"] == 0
    assert seen["admitted"] == 45
    assert clock.now() - start < 45 / 10 * 1.1  # at the quota's pace, not below it


async def test_hidden_lower_limit_is_found_and_everything_completes(emulator: Start) -> None:
    # Headers and docs claim 1200 rpm; the provider really enforces 300.
    providers = [
        emu_provider("alpha", limits={"rpm": 1200, "tpm": 1_000_000}, enforced={"rpm": 300, "tpm": 1_000_000})
    ]
    clock = FakeClock()  # shared, as above
    emu = await emulator(providers, clock=clock)
    cfg = gateway_config(
        emu,
        providers,
        [{"model": "m", "targets": ["alpha"]}],
        settings={"retry": {"max_attempts": 20, "base_delay": 0.05, "max_delay": 0.5}},
    )
    async with Gateway(cfg, clock=clock) as gw:
        results = await on_fake_time(clock, gw.abatch([chat(f"echo {i}") for i in range(40)]))
        quota = gw.runtimes["alpha"].pool.statistics()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert quota.cuts >= 1, "429s must cut the effective rate"
    assert quota.effective_per_second["requests"] < 1200 / 60


class HeldClock(FakeClock):
    """An emulator clock whose latency sleeps wait until `release()`; after it, they end at once."""

    def __init__(self) -> None:
        super().__init__()
        self.released = False

    def release(self) -> None:
        self.released = True
        self.advance(60.0)

    async def sleep(self, seconds: float) -> None:
        if self.released:
            self.advance(seconds)
            return
        await super().sleep(seconds)


async def test_a_slow_provider_never_delays_another(emulator: Start) -> None:
    # The emulator's clock holds the slow provider's answers until every fast answer has arrived.
    providers = [
        emu_provider("slow", latency={"ttft_p50_ms": 1500, "ttft_sigma": 0.01, "per_token_ms": 0}),
        emu_provider("fast"),
    ]
    held = HeldClock()
    emu = await emulator(providers, clock=held)
    cfg = gateway_config(
        emu,
        providers,
        [{"model": "s", "targets": ["slow"]}, {"model": "f", "targets": ["fast"]}],
        settings={"concurrency": 8},
    )
    requests = [chat(f"slow {i}", model="s") for i in range(8)] + [
        chat(f"fast {i}", model="f") for i in range(40)
    ]
    order: list[str] = []
    async with Gateway(cfg) as gw:
        async for result in gw.stream(requests):
            assert result.ok
            order.append(result.provider or "")
            if len(order) == 40:
                held.release()  # now the slow answers come due
    assert order == ["fast"] * 40 + ["slow"] * 8


async def test_stream_keeps_at_most_window_requests_alive(emulator: Start) -> None:
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    pulled = 0
    yielded = 0
    peak = 0

    async def source() -> AsyncIterator[dict[str, Any]]:
        nonlocal pulled, peak
        for i in range(300):
            pulled += 1
            peak = max(peak, pulled - yielded)
            yield chat(f"echo {i}")

    async with Gateway(cfg) as gw:
        async for result in gw.stream(source(), window=16):
            assert result.ok
            yielded += 1
    assert yielded == 300
    assert peak <= 16


async def test_statistics_add_up(emulator: Start) -> None:
    providers = [emu_provider("alpha", faults={"server_error": 0.2})]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    async with Gateway(cfg) as gw:
        results = await gw.abatch([chat(f"echo {i}") for i in range(60)])
        stats = gw.statistics()
    alpha = stats.providers["alpha"]
    assert stats.items_succeeded == 60
    # every attempt sent ended as an answer, a failure, or a hedged leg cancelled because the other
    # leg answered first (a loaded machine stalls the loop past the hedge wait: at most one a hedge)
    ended = alpha.succeeded + alpha.failed_attempts
    assert ended <= alpha.requests <= ended + alpha.hedged
    assert alpha.prompt_tokens == sum(r.usage.prompt_tokens for r in results if r.usage)
    assert sum(alpha.errors_by_kind.values()) == alpha.failed_attempts
    # the injected fault, and the adaptive timeout a stalled loop may reach
    assert alpha.errors_by_kind["server_error"] > 0
    assert set(alpha.errors_by_kind) <= {"server_error", "timeout"}
    assert alpha.wasted_tokens > 0
    assert 0 < alpha.latency_p50_ms <= alpha.latency_p95_ms <= alpha.latency_p99_ms


def test_sync_batch_runs_its_own_loop() -> None:

    providers = [emu_provider("alpha")]
    with EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": providers})) as emu:
        cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])  # type: ignore[arg-type]
        gw = Gateway(cfg)
        results = gw.batch([chat("Summarize: the quick brown fox jumps")] * 3)
    assert [r.ok for r in results] == [True, True, True]
    assert gw.statistics().items_succeeded == 3


async def test_stop_sending_abandons_requests_waiting_for_quota(emulator: Start) -> None:
    providers = [emu_provider("alpha", limits={"rpm": 120, "tpm": 1_000_000})]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])
    results = []
    async with Gateway(cfg) as gw:
        async for result in gw.stream([chat(f"echo {i}") for i in range(30)]):
            results.append(result)
            if len(results) == 1:
                gw.stop_sending()
        quota = gw.runtimes["alpha"].pool.statistics()
    stopped = [r for r in results if isinstance(r.error, DispatchStopped)]
    sent = emu.stats()["providers"]["alpha"]["admitted"]
    assert len(results) == 30
    assert stopped, "requests still waiting for quota must give up"
    assert all(r.attempts == [] for r in stopped)
    assert sent == 30 - len(stopped)
    assert quota.waiters == 0


async def test_a_prompt_quoting_a_special_token_is_counted_as_text_and_sent(emulator: Start) -> None:
    # `<|endoftext|>` in a user's text is ordinary text to the provider; counting it must not refuse
    # the item, and the exact count (a named encoding) must still be the one the provider reports.
    providers = [emu_provider("alpha")]
    emu = await emulator(providers)
    cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}], tokenizer="o200k_base")
    body = chat("Why does my log end with <|endoftext|> and <|fim_prefix|>?")
    async with Gateway(cfg) as gw:
        estimate = gw.estimate(body)
        result = await gw.arun(body)
    assert result.ok, result.error
    assert result.usage is not None
    assert estimate.prompt_tokens == result.usage.prompt_tokens


async def test_sync_batch_works_inside_a_running_loop() -> None:
    # A notebook (Jupyter) runs its cells inside an event loop: the synchronous API must still
    # work there, as LangChain's `batch` does, instead of refusing to start a second loop.

    providers = [emu_provider("alpha")]
    with EmulatorThread(emulator_config_from_dict({"seed": 1, "providers": providers})) as emu:
        cfg = gateway_config(emu, providers, [{"model": "m", "targets": ["alpha"]}])  # type: ignore[arg-type]
        gw = Gateway(cfg)
        asyncio.get_running_loop()  # we are inside one
        results = gw.batch([chat("Summarize: the quick brown fox jumps")] * 2)
    assert [r.ok for r in results] == [True, True]
    assert gw.statistics().items_succeeded == 2
