"""Which limit a 429 names: a bare one (no hint, no rate-limit headers, no rate limit in its body)
is a concurrency cap to learn; one whose body names a token or request limit is a rate, even
without headers or a retry hint (the engine against a scripted provider on a FakeClock)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig
from batchgate.errors import RateLimitError
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.policy.circuit import CircuitSettings
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import ProviderRuntime, build_runtime
from engineutil import CharCounter, drive, one_target_scheduler


class _Refusing:
    """Refuses its first call with a 429 carrying `body` and nothing else, then answers."""

    name = "p"
    kind = "openai"

    def __init__(self, clock: FakeClock, body: dict[str, Any]) -> None:
        self.clock = clock
        self.body = body
        self.calls = 0

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        self.calls += 1
        if self.calls == 1:
            raise RateLimitError("p: 429", provider="p", status=429, body=self.body)
        await self.clock.sleep(0.1)
        return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, Usage(10, 1), {})

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


async def _run(body: dict[str, Any]) -> ProviderRuntime:
    clock = FakeClock()
    client = _Refusing(clock, body)
    config = ProviderConfig(name="p", kind="openai", base_url="http://x", limits=QuotaLimits(tpm=600_000))
    rt = build_runtime(config, client, CharCounter(), clock, CircuitSettings(), timeout=60.0)
    sched = one_target_scheduler(rt, clock, max_attempts=5)
    messages = [{"role": "user", "content": "hello"}]
    tasks = [asyncio.ensure_future(sched.run(i, {"model": "m", "messages": messages})) for i in range(3)]
    await drive(clock, tasks)
    assert all(t.result().ok for t in tasks)
    return rt


@pytest.mark.parametrize("etype", ["tokens", "requests"])
async def test_a_429_whose_body_names_a_rate_limit_is_no_concurrency_cap(etype: str) -> None:
    rt = await _run({"error": {"type": etype, "message": "Rate limit reached"}})
    assert rt.concurrency.limit is None
    assert rt.slots.limit is None


async def test_a_bare_429_teaches_the_in_flight_cap() -> None:
    rt = await _run({"error": {"type": "server_error", "message": "busy"}})
    assert rt.concurrency.limit is not None
