"""The requests waiting out a paused target (`pausing.PauseWaits`), on a FakeClock: nothing wakes
them before the pause's next probe is due (one timer, no polling), the timer wakes every waiter
then, a probe's turn goes to one at a time, a probe with no verdict hands its turn on at once,
and an answer ends the wait for all."""

from __future__ import annotations

import asyncio

from batchgate.clock import FakeClock
from batchgate.errors import UnreachableError
from batchgate.pausing import PauseWaits
from batchgate.policy.takeout import TakeOut, TakeOutSettings

REFUSED = UnreachableError("p: unreachable", provider="p", cause="connection refused")


def _paused(clock: FakeClock) -> tuple[TakeOut, PauseWaits]:
    takeout = TakeOut(TakeOutSettings(after=1))
    takeout.record_answer()
    assert takeout.record(REFUSED, clock.now()) == "paused"
    waits = PauseWaits(clock, takeout)
    assert waits.began()
    return takeout, waits


async def test_waiters_sleep_until_the_probe_is_due_on_one_timer() -> None:
    clock = FakeClock()
    takeout, waits = _paused(clock)
    futures = [waits.future() for _ in range(5)]
    assert clock.pending_timers() == 1  # one timer for every waiter
    assert clock.next_deadline() == clock.now() + 1.0  # the first probe, 1 s after the pause
    clock.advance(0.9)
    await asyncio.sleep(0)
    assert not any(f.done() for f in futures)
    clock.advance(0.1)
    assert all(f.done() for f in futures)
    pause = takeout.pause
    assert pause is not None
    assert pause.claim(clock.now())  # the first to look again is the probe
    assert not pause.claim(clock.now())  # the others wait for its verdict


async def test_a_failed_probe_arms_the_next_timer_twice_as_far() -> None:
    clock = FakeClock()
    takeout, waits = _paused(clock)
    clock.advance(1.0)
    pause = takeout.pause
    assert pause is not None
    assert pause.claim(clock.now())
    waiting = waits.future()
    assert clock.pending_timers() == 0  # a probe is out: its verdict wakes them, not a timer
    assert takeout.record(REFUSED, clock.now(), probe=True) == "paused"
    waits.probed()
    assert waiting.done()
    waits.future()
    assert clock.next_deadline() == clock.now() + 2.0


async def test_a_probe_without_a_verdict_hands_its_turn_on_and_an_answer_ends_the_wait() -> None:
    clock = FakeClock()
    takeout, waits = _paused(clock)
    clock.advance(1.0)
    pause = takeout.pause
    assert pause is not None
    assert pause.claim(clock.now())
    waits.probed()  # cancelled on its way: no verdict
    assert pause.claim(clock.now())  # the next may go at once
    waiting = waits.future()
    takeout.record_answer()  # the probe was answered
    assert waits.ended()
    assert waiting.done()
    assert not waits.ended()  # said once
    await asyncio.sleep(0)  # the woken futures' callbacks run
    assert waits.waiting == 0
