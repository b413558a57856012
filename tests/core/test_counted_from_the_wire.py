"""The quota pool counts an admission from when its bytes left (`batchgate.providers.wire`), not
from when it was handed to the client: a request whose connection took a while to open holds its
window until a second after that (the engine against a provider on a FakeClock that takes
`CONNECT` seconds to connect before it writes, as aiohttp's tracing reports)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.policy.circuit import CircuitSettings
from batchgate.providers.wire import ON_WIRE
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from engineutil import CharCounter, drive, one_target_scheduler

CONNECT = 0.3  # seconds the first request's connection takes to open


class _SlowToConnect:
    """Its first call opens a connection for `CONNECT` s before its bytes leave; each answers
    0.1 s after leaving. Logs when each call's bytes left."""

    name = "p"
    kind = "openai"

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.left: list[float] = []

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        if not self.left:
            await self.clock.sleep(CONNECT)
        on_wire = ON_WIRE.get()
        if on_wire is not None:
            on_wire()
        self.left.append(self.clock.now())
        await self.clock.sleep(0.1)
        return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, Usage(10, 1), {})

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


@pytest.mark.parametrize("rpm", [60, 120])
async def test_a_window_counts_a_request_from_when_its_bytes_left(rpm: int) -> None:
    clock = FakeClock()
    start = clock.now()
    client = _SlowToConnect(clock)
    config = ProviderConfig(name="p", kind="openai", base_url="http://x", limits=QuotaLimits(rpm=rpm))
    rt = build_runtime(config, client, CharCounter(), clock, CircuitSettings(), timeout=60.0)
    sched = one_target_scheduler(rt, clock, max_attempts=3)
    per_window = rpm // 60  # what one second holds
    messages = [{"role": "user", "content": "hello"}]
    tasks = [
        asyncio.ensure_future(sched.run(i, {"model": "m", "messages": messages}))
        for i in range(per_window + 1)
    ]
    await drive(clock, tasks)
    assert all(t.result().ok for t in tasks)
    # the request past one second's allowance waits for the first to leave the window: a second
    # after the first one's bytes left (at CONNECT), not a second after it was admitted (at 0)
    assert len(client.left) == per_window + 1
    assert client.left[0] - start == pytest.approx(CONNECT)
    assert client.left[per_window] >= client.left[0] + 1.0
