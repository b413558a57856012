"""A job's scheduled start: a run of a job whose `not_before` is ahead waits for it — one timer on
the injected clock, no polling — after saying when it will start; and its callback's secret is
checked first, so a run that could not sign its end never waits or sends anything."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

from batchgate.clock import Clock
from batchgate.config.job_spec import JobSpec
from batchgate.jobs.lifecycle.callback import callback_secret


async def before_start(spec: JobSpec, job_id: str, clock: Clock, say: Callable[[str], None]) -> None:
    callback_secret(spec)  # a missing or malformed secret: refused before anything is sent
    left = (spec.not_before or 0.0) - clock.wall()
    if left <= 0:
        return
    at = datetime.fromtimestamp(spec.not_before or 0.0, UTC).isoformat(timespec="seconds")
    say(f"job {job_id} starts at {at.replace('+00:00', 'Z')} (not_before), in {_span(left)}; waiting")
    due = asyncio.Event()
    timer = clock.call_at(clock.now() + left, due.set)
    try:
        await due.wait()
    finally:
        timer.cancel()
    say(f"job {job_id}: its start time has come")


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
