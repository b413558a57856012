"""Helpers for tests that run the real engine against a scripted provider on a FakeClock: the
prompt counter those providers' runtimes take, a scheduler with one target, and the loop that
moves the clock from one timer to the next until every task is done."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from batchgate.clock import FakeClock
from batchgate.policy.retry import RetryPolicy, RetrySettings
from batchgate.runtime import ProviderRuntime
from batchgate.scheduler import Scheduler, Target
from batchgate.slots import FairSlots
from batchgate.tokens import char_count


class CharCounter:
    """Counts a prompt as batchgate does (characters ÷ 4 with framing); learns nothing."""

    def count_prompt(self, body: Any) -> int:
        return char_count(body)

    def observe(self, body: Any, actual: int) -> None:
        return None


async def drive(clock: FakeClock, tasks: list[asyncio.Task[Any]]) -> None:
    """Run until every task is done, moving the fake clock from one timer to the next."""
    while not all(t.done() for t in tasks):
        for _ in range(4):
            await asyncio.sleep(0)
        deadline = clock.next_deadline()
        if deadline is not None:
            clock.advance(max(0.0, deadline - clock.now()))


def one_target_scheduler(rt: ProviderRuntime, clock: FakeClock, *, max_attempts: int) -> Scheduler:
    """A scheduler sending model "m" to `rt` alone, with quick seeded retries and 100 fair slots."""
    retry = RetryPolicy(
        RetrySettings(max_attempts=max_attempts, base_delay=0.01, max_delay=0.1), random.Random(0)
    )
    return Scheduler(
        {"m": [Target(rt, "m")]}, clock=clock, retry=retry, global_slots=FairSlots(100, [rt.name], clock)
    )
