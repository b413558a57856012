"""The test clock over an emulator's FakeClock: the one `Clock` the suite gives to code that
sleeps between looks at the emulator (a batch client polling, the batch-mode runner), so each
sleep moves emulator time forward and nothing really waits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from batchgate.clock import FakeClock, TimerHandle


class SteppingClock:
    """Reads and timers are the emulator's FakeClock; each `sleep` advances it by the time asked
    (recorded in `sleeps`). With `gated`, the first sleep waits for the test to set `gate`
    (after setting `sleeping`), so a test can act at a known point of the run."""

    def __init__(self, fake: FakeClock, *, gated: bool = False) -> None:
        self.fake = fake
        self.sleeps: list[float] = []
        self.sleeping = asyncio.Event()
        self.gate: asyncio.Event | None = asyncio.Event() if gated else None

    def now(self) -> float:
        return self.fake.now()

    def wall(self) -> float:
        return self.fake.wall()

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return self.fake.call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.gate is not None and not self.gate.is_set():
            self.sleeping.set()
            await self.gate.wait()
        self.fake.advance(seconds)
        await asyncio.sleep(0)
