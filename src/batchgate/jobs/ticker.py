"""The beat of a running job, driven by event-loop timers on the injected clock (never a sleep
loop): twice a second the displays get a fresh snapshot and a `batchgate cancel` from another
terminal is noticed; every two seconds (or at once after a batch event) the live snapshot and the
run's report figures so far are stored, for `batchgate status` and for a run that gets killed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson

from batchgate.clock import Clock, TimerHandle
from batchgate.jobs.engine import CANCEL_REASON, JobEngine
from batchgate.jobs.progress import ProgressSink, snapshot
from batchgate.jobs.report import OPEN_SEGMENT_BLOB, run_segment
from batchgate.jobs.store import JobStore

LIVE_BLOB = "live"
BEAT_S = 0.5
STORE_EVERY = 4  # beats


class Periodic:
    """Calls `beat(n)` at start + n × interval (n = 1, 2, ...) on `clock`'s timers; a beat that
    falls due while the previous one's work is still running is skipped, not queued."""

    def __init__(self, clock: Clock, interval: float, beat: Callable[[int], None]) -> None:
        self._clock = clock
        self._interval = interval
        self._beat = beat
        self._start = 0.0
        self._n = 0
        self._handle: TimerHandle | None = None

    def start(self) -> None:
        self._start = self._clock.now()
        self._schedule()

    def _schedule(self) -> None:
        self._n += 1
        self._handle = self._clock.call_at(self._start + self._n * self._interval, self._fire)

    def _fire(self) -> None:
        n = self._n
        behind = int((self._clock.now() - self._start) / self._interval)
        self._n = max(self._n, behind)  # beats missed while the loop was busy are not replayed
        self._schedule()
        self._beat(n)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def publish(engine: JobEngine, sink: ProgressSink, elapsed: float, stats: Any) -> dict[str, Any]:
    snap = snapshot(engine.job_id, engine.progress, stats, elapsed, time.time(), engine.budget.view())
    sink.update(snap)
    return snap


class JobTicker:
    """The running job's beat (see the module docstring); `stop()` ends it."""

    def __init__(self, engine: JobEngine, store: JobStore, sink: ProgressSink, run_id: str) -> None:
        self._engine = engine
        self._store = store
        self._sink = sink
        self._run_id = run_id
        self._clock = engine.clock
        self._started = 0.0
        self._stored_events = 0
        self._unreachable: set[str] = set()
        self._work: asyncio.Task[None] | None = None
        self._timer = Periodic(self._clock, BEAT_S, self._on_beat)

    def start(self) -> None:
        self._started = self._clock.now()
        self._timer.start()

    def _on_beat(self, n: int) -> None:
        if self._work is not None and not self._work.done():
            return  # the store is slow: skip this beat rather than pile them up
        self._work = asyncio.ensure_future(self._beat(n))

    async def _beat(self, n: int) -> None:
        engine, job_id = self._engine, self._engine.job_id
        if not engine.cancel_requested and await engine.cancel_asked():
            engine.request_cancel()
            self._sink.event(
                "stopping", job=job_id, reason=CANCEL_REASON, grace_s=engine.options.grace_seconds
            )
        gw = engine.gateway
        elapsed = self._clock.now() - self._started
        stats = gw.statistics() if gw else None
        snap = publish(engine, self._sink, elapsed, stats)
        self._reachability(snap)
        if n % STORE_EVERY == 0 or engine.progress.batch_events != self._stored_events:
            self._stored_events = engine.progress.batch_events
            await self._store.put_blob(job_id, LIVE_BLOB, orjson.dumps(snap))
            if stats is not None:
                seg = run_segment(stats, elapsed, engine.progress, run_id=self._run_id, finished=False)
                await self._store.put_blob(job_id, OPEN_SEGMENT_BLOB, orjson.dumps(seg))

    def _reachability(self, snap: dict[str, Any]) -> None:
        """`provider_unreachable` when a provider stops answering (refused, DNS), and
        `provider_reachable` when it answers again — as they happen, not only in the report."""
        for name, p in snap["providers"].items():
            gone = p["unreachable"]
            if gone is not None and name not in self._unreachable:
                self._unreachable.add(name)
                self._sink.event("provider_unreachable", job=snap["job"], provider=name, **gone)
            elif gone is None and name in self._unreachable:
                self._unreachable.discard(name)
                self._sink.event("provider_reachable", job=snap["job"], provider=name)

    async def stop(self) -> None:
        """No more beats; a beat under way finishes its store write first (never cut halfway)."""
        self._timer.stop()
        if self._work is not None:
            await asyncio.gather(self._work, return_exceptions=True)
