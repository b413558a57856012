"""Helpers for tests that run the real engine against a scripted provider on a FakeClock: the
prompt counter those providers' runtimes take, and the loop that moves the clock from one timer
to the next until every task is done."""

from __future__ import annotations

import asyncio
from typing import Any

from batchgate.clock import FakeClock
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
