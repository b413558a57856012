"""The one bounded wait of the test suite: poll until something another thread or process does
has happened, or fail naming what was awaited once `limit` seconds pass. The limit bounds a wait
for an event (a job ended, a callback settled); it is never a timing assertion — speed is
measured by the scripts in `bench/`. In-process waits on a FakeClock need none of this: they
move the clock (`engineutil.drive`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT_LIMIT_S = 60.0  # the most a wait may take on a loaded machine before the test fails


def poll(
    fetch: Callable[[], T],
    done: Callable[[T], bool],
    what: str | Callable[[T], str],
    *,
    limit: float = WAIT_LIMIT_S,
    every: float = 0.05,
) -> T:
    """`fetch()` again every `every` seconds until `done` holds for what it returned; that value.
    Past `limit`, an AssertionError naming `what` (called with the last value when callable)."""
    deadline = time.monotonic() + limit
    while not done(value := fetch()):
        if time.monotonic() > deadline:
            said = what(value) if callable(what) else what
            raise AssertionError(f"gave up after {limit:g} s waiting for {said}")
        time.sleep(every)
    return value


def wait_for(
    condition: Callable[[], bool], what: str, limit: float = WAIT_LIMIT_S, every: float = 0.05
) -> None:
    """Until `condition()` holds (bounded by `limit`)."""
    poll(condition, bool, what, limit=limit, every=every)


async def until(
    condition: Callable[[], bool], what: str, limit: float = WAIT_LIMIT_S, every: float = 0.01
) -> None:
    """`wait_for` on the running loop: other tasks run between two looks at `condition()`."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {limit:g} s waiting for {what}")
        await asyncio.sleep(every)
