"""One request's unexpected exception (a bug in a client, a translation, a tokenizer) fails that
request alone, as an `InternalError` item result; every other request of the batch completes."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from batchgate.clock import LoopClock
from batchgate.config import ProviderConfig
from batchgate.errors import InternalError
from batchgate.models import ProviderResponse, RateLimitSnapshot, Usage
from batchgate.policy.circuit import CircuitSettings
from batchgate.policy.retry import RetryPolicy, RetrySettings
from batchgate.quota.limits import QuotaLimits
from batchgate.runtime import build_runtime
from batchgate.scheduler import Scheduler, Target
from batchgate.slots import FairSlots
from batchgate.tokens import EstimatingTokenCounter


class BuggyClient:
    """Answers every request, except that a prompt saying "boom" hits a bug in the client."""

    name = "p"
    kind = "openai"

    def __init__(self) -> None:
        self.sent = 0

    async def send(self, body: dict[str, Any], *, model: str) -> ProviderResponse:
        self.sent += 1
        await asyncio.sleep(0)
        if body["messages"][0]["content"] == "boom":
            raise ZeroDivisionError("division by zero\nsecond line never shown")
        return ProviderResponse(200, {"choices": [{"message": {"content": "ok"}}]}, Usage(5, 1), {})

    def rate_limits(self, headers: Any, wall_now: float) -> RateLimitSnapshot:
        return RateLimitSnapshot()


async def test_an_unexpected_exception_fails_only_its_own_request() -> None:
    clock = LoopClock()
    client = BuggyClient()
    config = ProviderConfig(
        name="p", kind="openai", base_url="http://x", limits=QuotaLimits(rpm=60_000, tpm=10**7)
    )
    runtime = build_runtime(config, client, EstimatingTokenCounter(), clock, CircuitSettings(), seed=1)
    sched = Scheduler(
        {"m": [Target(runtime, "m")]},
        clock=clock,
        retry=RetryPolicy(RetrySettings(3, 0.01, 0.05, 1.0), random.Random(1)),
        global_slots=FairSlots(8, ["p"], clock),
    )
    texts = ["fine", "boom", "fine", "fine"]
    bodies = [{"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": t}]} for t in texts]
    results = await asyncio.gather(*(sched.run(i, b) for i, b in enumerate(bodies)))
    assert [r.ok for r in results] == [True, False, True, True]
    error = results[1].error
    assert isinstance(error, InternalError)
    assert error.kind == "internal_error"
    assert error.message == "internal error: ZeroDivisionError: division by zero"
    assert client.sent == 4  # a bug is not retried
    assert (sched.items_succeeded, sched.items_failed) == (3, 1)
    assert not runtime.slots.locked()
    assert runtime.recorder.in_flight == 0
