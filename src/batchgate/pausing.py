"""The requests waiting for one paused target (`policy/outage.py`): event-driven, never polled.

A target that answered before and then cannot be reached is paused by its take-out policy; the
requests for it (where its route has no other target) wait here rather than fail or spend
attempts. Each waits on a future of its own, all woken by a timer (`Clock.call_at`) when the
pause's next probe is due, when the probe reports, when the pause ends (any answer) and when the
target is taken out after `max_outage`. Each woken request looks again: one claims the probe
(`Pause.claim`), the others wait for its verdict. `stop_sending` cancels each waiter's future.
"""

from __future__ import annotations

import asyncio

from batchgate.clock import Clock, TimerHandle
from batchgate.policy.outage import Pause
from batchgate.policy.takeout import TakeOut


class PauseWaits:
    """One target's waiting requests; see the module docstring."""

    def __init__(self, clock: Clock, takeout: TakeOut) -> None:
        self._clock = clock
        self._takeout = takeout
        self._waiters: set[asyncio.Future[None]] = set()
        self._timer: TimerHandle | None = None
        self._timer_at: float | None = None
        self.seen: Pause | None = None  # the pause last seen (to tell when it began and ended)

    def future(self) -> asyncio.Future[None]:
        """What one waiting request awaits (done when it should look again), with the timer for
        the next probe armed."""
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(wake)
        wake.add_done_callback(self._waiters.discard)
        pause = self._takeout.pause
        if pause is not None and not pause.probing and self._timer_at != pause.next_probe:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = pause.next_probe
            self._timer = self._clock.call_at(pause.next_probe, self.wake)
        return wake

    def wake(self) -> None:
        """Every waiting request looks again."""
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, None
        for wake in list(self._waiters):
            if not wake.done():
                wake.set_result(None)

    def began(self) -> bool:
        """Whether the take-out's pause is new since last seen (say so once)."""
        pause = self._takeout.pause
        new = pause is not None and pause is not self.seen
        self.seen = pause
        return new

    def ended(self) -> bool:
        """Whether the pause last seen is over (the target answered, or is out): the waiting
        requests are woken, and this says so once."""
        if self.seen is None or self._takeout.pause is self.seen:
            return False
        self.seen = self._takeout.pause
        self.wake()
        return True

    def probed(self) -> None:
        """The probe's attempt is over: a probe that gave no verdict (cancelled, stopped, a
        failure that is no outage's) lets the next go at once; the waiting requests look again."""
        pause = self._takeout.pause
        if pause is not None and pause.probing:
            pause.released()
        self.wake()

    @property
    def waiting(self) -> int:
        """The requests waiting for this target's pause to let them try."""
        return len(self._waiters)
