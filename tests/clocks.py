"""The test clocks over an emulator's FakeClock: `SteppingClock`, the one `Clock` the suite gives
to code that sleeps between looks at the emulator (a batch client polling, the batch-mode runner),
so each sleep moves emulator time forward and nothing really waits; `on_fake_time`, which runs a
gateway and an emulator over real sockets on one FakeClock, so a pace is checked without timing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from batchgate.clock import FakeClock, TimerHandle

T = TypeVar("T")
QUIET_TURNS = 50  # loop turns without a timer that count as quiet (loopback I/O needs a few)


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


async def on_fake_time(clock: FakeClock, work: Awaitable[T]) -> T:
    """Await `work` (real sockets, an emulator and a gateway both on `clock`), moving `clock` to
    its next timer whenever the loop has gone quiet: the sockets have had many turns to carry
    what was sent, so time moves only between messages and a pace is judged on the clock alone,
    whatever the machine's load. With no timer due, real I/O is still under way: wait for it."""
    task = asyncio.ensure_future(work)
    while not task.done():
        for _ in range(QUIET_TURNS):
            await asyncio.sleep(0)
        deadline = clock.next_deadline()
        if deadline is None:
            await asyncio.sleep(0.001)
            continue
        clock.advance(max(0.0, deadline - clock.now()))
    return task.result()
