"""A stop ends a retry's backoff at once: a request waiting to try again after a 5xx is not sent
again, and ends with `DispatchStopped` (its task goes back to pending) without its wait being
waited out. On a FakeClock that never moves after the stop: only the event can end the wait."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from batchgate.clock import FakeClock
from batchgate.config import ProviderConfig
from batchgate.errors import DispatchStopped, ServerError
from batchgate.models import ProviderResponse, RateLimitSnapshot
from batchgate.policy.circuit import CircuitSettings
from batchgate.policy.retry import RetryPolicy, RetrySettings
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from batchgate.scheduler import Scheduler, Target
from batchgate.slots import FairSlots
from engineutil import CharCounter


class Failing:
    """A provider that answers every request with a 503."""

    name = "p"
    kind = "openai"

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        self.sent += 1
        await asyncio.sleep(0)
        raise ServerError("p: HTTP 503", provider="p", status=503)

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


async def test_a_stop_ends_the_backoff_before_the_next_try() -> None:
    clock = FakeClock()
    client = Failing()
    config = ProviderConfig(name="p", kind="openai", base_url="http://x", limits=QuotaLimits(rpm=600))
    rt = build_runtime(config, client, CharCounter(), clock, CircuitSettings())
    retry = RetryPolicy(RetrySettings(max_attempts=8, base_delay=20.0, max_delay=30.0), random.Random(1))
    sched = Scheduler(
        {"m": [Target(rt, "m")]}, clock=clock, retry=retry, global_slots=FairSlots(4, ["p"], clock)
    )
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    task = asyncio.ensure_future(sched.run(0, body))
    for _ in range(100):
        if sched.backing_off:
            break
        await asyncio.sleep(0)
    assert sched.backing_off == 1  # the first try failed; it waits (on the fake clock) to retry
    sched.stop_sending()
    for _ in range(100):
        if task.done():
            break
        await asyncio.sleep(0)
    assert task.done()  # the clock never moved: the stop, not the wait's end, ended it
    result = task.result()
    assert isinstance(result.error, DispatchStopped)
    assert client.sent == 1
    assert sched.backing_off == 0
