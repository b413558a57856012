"""A straggler is hedged only with quota nobody queues for (`batchgate.attempt`): while other
requests wait at the pool, a hedge would take one of their places, so it waits until the queue
has drained (the engine against a scripted provider on a FakeClock; one request never answers
the first time it is sent)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig
from batchgate.models import ProviderResponse, RateLimitSnapshot, Result, Usage
from batchgate.policy.circuit import CircuitSettings
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from batchgate.scheduler import Scheduler
from engineutil import CharCounter, drive, one_target_scheduler

RPM = 600  # ten a second: 40 requests queue for about four seconds


class _OneHangs:
    """Answers 0.1 s after each call, but for the first call of the prompt "hang", which never
    answers. Logs (time, prompt) of every call."""

    name = "p"
    kind = "openai"

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.calls: list[tuple[float, str]] = []

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        prompt = str(body["messages"][0]["content"])
        first = all(p != prompt for _, p in self.calls)
        self.calls.append((self.clock.now(), prompt))
        await self.clock.sleep(1e6 if prompt == "hang" and first else 0.1)
        return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, Usage(10, 1), {})

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


def _run(sched: Scheduler, prompts: list[str], urgent_hang: bool) -> list[asyncio.Task[Result]]:
    def body(p: str) -> dict[str, Any]:
        return {"model": "m", "messages": [{"role": "user", "content": p}]}

    return [
        asyncio.create_task(sched.run(i, body(p), urgent=urgent_hang and p == "hang"))
        for i, p in enumerate(prompts)
    ]


@pytest.mark.parametrize("urgent", [False, True])
async def test_a_straggler_is_hedged_only_once_nobody_queues_for_the_quota(urgent: bool) -> None:
    """A live (urgent) request's hedge does not wait: its latency is the point."""
    clock = FakeClock()
    client = _OneHangs(clock)
    config = ProviderConfig(name="p", kind="openai", base_url="http://x", limits=QuotaLimits(rpm=RPM))
    rt = build_runtime(config, client, CharCounter(), clock, CircuitSettings(), timeout=60.0)
    sched = one_target_scheduler(rt, clock, max_attempts=3)
    prompts = [f"item {i}" for i in range(40)]
    prompts[3] = "hang"
    tasks = _run(sched, prompts, urgent)
    await drive(clock, tasks)
    assert all(t.result().ok for t in tasks)
    hang_calls = [t for t, p in client.calls if p == "hang"]
    others = [t for t, p in client.calls if p != "hang"]
    assert len(hang_calls) == 2  # sent once more, as a hedge
    assert rt.recorder.hedged == 1
    assert max(others) - min(others) > 3.0  # the queue lasted past the hedge's due time
    if urgent:  # sent when due (about a second in, by the cold rule), ahead of the queue
        assert hang_calls[1] < max(others) - 1.0
    else:  # it waited for the last queued request
        assert hang_calls[1] >= max(others)
